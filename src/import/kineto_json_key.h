// Small helpers shared by the simdjson readers of the Kineto importer.
#pragma once

#include <string_view>

#include "simdjson.h"

namespace teller::import {

// The raw key text of a field (keys with escapes never match a known key).
inline std::string_view RawKey(const simdjson::ondemand::raw_json_string& key) {
  const char* begin = key.raw();
  const char* end = begin;
  while (*end != '"') ++end;
  return std::string_view(begin, end - begin);
}

}  // namespace teller::import
