// Nanosecond units of the simulator's true time.
#pragma once

#include <cstdint>

namespace teller::sim {

inline constexpr int64_t kUs = 1000;
inline constexpr int64_t kMs = 1000000;
inline constexpr int64_t kSec = 1000000000;

}  // namespace teller::sim
