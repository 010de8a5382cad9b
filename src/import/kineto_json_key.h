// Small helpers shared by the simdjson readers of the Kineto importer.
#pragma once

#include <cstring>
#include <string_view>

#include "simdjson.h"

namespace teller::import {

// Compares a text already known to have the literal's length.
template <size_t N>
bool Is(std::string_view text, const char (&literal)[N]) {
  return std::memcmp(text.data(), literal, N - 1) == 0;
}

// The raw key text of a field (keys with escapes never match a known key).
inline std::string_view RawKey(const simdjson::ondemand::raw_json_string& key) {
  const char* begin = key.raw();
  const char* end = begin;
  while (*end != '"') ++end;
  return std::string_view(begin, end - begin);
}

// text without trailing JSON whitespace (a raw number token keeps what follows it).
inline std::string_view TrimRight(std::string_view text) {
  while (!text.empty() && (text.back() == ' ' || text.back() == '\n' || text.back() == '\r' ||
                           text.back() == '\t')) {
    text.remove_suffix(1);
  }
  return text;
}

}  // namespace teller::import
