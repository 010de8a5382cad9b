// Trace time: integer nanoseconds on one trace clock.
#pragma once

#include <cstdint>
#include <string_view>

#include "base/status.h"

namespace teller::base {

using TimeNs = int64_t;
using DurationNs = int64_t;

// Parses a decimal number of microseconds ("1234.5678", "-3", "1.5e3") into integer
// nanoseconds exactly, rounding half away from zero below a nanosecond. Never goes
// through a double for plain decimal text.
StatusOr<TimeNs> ParseDecimalMicrosAsNs(std::string_view text);

// Parses a decimal integer ("-42"), rejecting anything else.
StatusOr<int64_t> ParseInt64(std::string_view text);

}  // namespace teller::base
