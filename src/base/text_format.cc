#include "base/text_format.h"

#include <cmath>

#include <fmt/format.h>

namespace teller::base {

std::string FormatDuration(int64_t ns) {
  const int64_t magnitude = ns < 0 ? -ns : ns;
  if (magnitude >= 1000000000) return fmt::format("{:.3f} s", static_cast<double>(ns) / 1e9);
  if (magnitude >= 1000000) return fmt::format("{:.3f} ms", static_cast<double>(ns) / 1e6);
  if (magnitude >= 1000) return fmt::format("{:.1f} us", static_cast<double>(ns) / 1e3);
  return fmt::format("{} ns", ns);
}

std::string FormatDurationRounded(double ns) {
  if (std::abs(ns) >= 1e6) return fmt::format("{:.1f} ms", ns / 1e6);
  return fmt::format("{:.0f} us", ns / 1e3);
}

std::string FormatSeconds(double ns, int decimals) {
  return fmt::format("{:.{}f} s", ns / 1e9, decimals);
}

std::string FormatUtcClock(int64_t ns) {
  const int64_t seconds = ns / 1'000'000'000;
  const int64_t day_seconds = ((seconds % 86400) + 86400) % 86400;
  return fmt::format("{:02}:{:02}:{:02}.{:03} UTC", day_seconds / 3600, day_seconds / 60 % 60,
                     day_seconds % 60, (ns / 1'000'000) % 1000);
}

}  // namespace teller::base
