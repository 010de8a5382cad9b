#include "base/time.h"

#include <cstdlib>
#include <string>

namespace teller::base {
namespace {

constexpr int64_t kMax = INT64_MAX / 10 - 10;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

StatusOr<int64_t> ParseInt64(std::string_view text) {
  size_t i = 0;
  bool negative = false;
  if (i < text.size() && (text[i] == '-' || text[i] == '+')) negative = text[i++] == '-';
  if (i == text.size()) return InvalidArgument("expected an integer, got '{}'", text);
  int64_t value = 0;
  for (; i < text.size(); ++i) {
    if (!IsDigit(text[i])) return InvalidArgument("expected an integer, got '{}'", text);
    if (value > kMax) return InvalidArgument("integer '{}' is out of range", text);
    value = value * 10 + (text[i] - '0');
  }
  return negative ? -value : value;
}

StatusOr<TimeNs> ParseDecimalMicrosAsNs(std::string_view text) {
  size_t i = 0;
  bool negative = false;
  if (i < text.size() && (text[i] == '-' || text[i] == '+')) negative = text[i++] == '-';
  int64_t micros = 0;
  size_t int_digits = 0;
  for (; i < text.size() && IsDigit(text[i]); ++i, ++int_digits) {
    if (micros > kMax / 1000) return InvalidArgument("timestamp '{}' is out of range", text);
    micros = micros * 10 + (text[i] - '0');
  }
  int64_t frac_ns = 0;
  size_t frac_digits = 0;
  bool round_up = false;
  if (i < text.size() && text[i] == '.') {
    ++i;
    for (; i < text.size() && IsDigit(text[i]); ++i, ++frac_digits) {
      if (frac_digits < 3) {
        frac_ns = frac_ns * 10 + (text[i] - '0');
      } else if (frac_digits == 3) {
        round_up = text[i] >= '5';
      }
    }
  }
  if (int_digits == 0 && frac_digits == 0) {
    return InvalidArgument("expected a decimal number of microseconds, got '{}'", text);
  }
  if (i < text.size()) {
    if (text[i] != 'e' && text[i] != 'E') {
      return InvalidArgument("expected a decimal number of microseconds, got '{}'", text);
    }
    // Exponent form is rare (a writer printing doubles); go through long double.
    std::string copy(text);
    char* end = nullptr;
    long double value = std::strtold(copy.c_str(), &end);
    if (end != copy.c_str() + copy.size()) {
      return InvalidArgument("expected a decimal number of microseconds, got '{}'", text);
    }
    long double ns = value * 1000.0L;
    if (ns > 9.2e18L || ns < -9.2e18L)
      return InvalidArgument("timestamp '{}' is out of range", text);
    return static_cast<TimeNs>(ns < 0 ? ns - 0.5L : ns + 0.5L);
  }
  for (size_t d = frac_digits; d < 3; ++d) frac_ns *= 10;
  int64_t ns = micros * 1000 + frac_ns + (round_up ? 1 : 0);
  return negative ? -ns : ns;
}

}  // namespace teller::base
