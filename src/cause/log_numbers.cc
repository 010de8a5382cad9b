#include "cause/log_numbers.h"

#include <cctype>
#include <charconv>

namespace teller::cause {

int64_t NumberAfter(std::string_view text, std::string_view key) {
  const size_t at = text.find(key);
  if (at == std::string_view::npos) return -1;
  int64_t value = 0;
  size_t i = at + key.size();
  if (i >= text.size() || !std::isdigit(static_cast<unsigned char>(text[i]))) return -1;
  for (int digits = 0; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
    if (++digits > 12) return -1;  // past any sequence number or time a line prints
    value = value * 10 + (text[i] - '0');
  }
  return value;
}

double DecimalAfter(std::string_view text, std::string_view key) {
  const size_t at = text.find(key);
  if (at == std::string_view::npos) return -1.0;
  const char* begin = text.data() + at + key.size();
  const char* end = text.data() + text.size();
  if (begin == end || !std::isdigit(static_cast<unsigned char>(*begin))) return -1.0;
  double value = 0.0;
  if (std::from_chars(begin, end, value).ec != std::errc()) return -1.0;
  return value;
}

}  // namespace teller::cause
