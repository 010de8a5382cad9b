// Small helpers shared by the benchmark programs: wall time and peak RSS.
#pragma once

#include <sys/resource.h>

#include <chrono>
#include <cstdint>

namespace teller::bench {

inline double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline int64_t PeakRssBytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;
}

}  // namespace teller::bench
