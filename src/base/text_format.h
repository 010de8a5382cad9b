// Numbers as a reader sees them, shared by every text surface (terminal, HTML, the
// explainer's prompt, the cause sentences) so one quantity reads the same everywhere.
#pragma once

#include <cstdint>
#include <string>

namespace teller::base {

// A measured duration to the microsecond: "18.301 ms", "97.7 us", "1.250 s", "640 ns".
std::string FormatDuration(int64_t ns);
// A duration in a sentence, rounded: "4.0 ms", "41 us".
std::string FormatDurationRounded(double ns);
// Seconds with `decimals` digits: "12 s", "3.5 s".
std::string FormatSeconds(double ns, int decimals);
// The time of day of a UTC epoch time to the millisecond: "00:00:00.632 UTC".
std::string FormatUtcClock(int64_t ns);

}  // namespace teller::base
