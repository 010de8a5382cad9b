// TSC ticks -> CLOCK_MONOTONIC ns from (tsc, ns) sample pairs: linear between the two
// samples around a stamp, else the nearest interval's rate extended. Shared by the
// capture's TscClock (which converts a few stamps while recording) and the reader of
// TscRangeBatch records (which converts every stamp), so both give the same ns.
// Header-only, no allocation.
#pragma once

#include <cstddef>
#include <cstdint>

namespace teller::wire {

struct TscSample {
  uint64_t tsc = 0;
  int64_t ns = 0;
};

// Bound of |rate| (ns per tick times 2^32): 256 ns per tick, far above any real TSC;
// it keeps dt * rate inside 128 bits for any input.
inline constexpr __int128 kMaxTscRateQ32 = __int128{1} << 40;

// ns per tick of the interval a -> b, times 2^32; 1 ns per tick when b is not after a.
inline __int128 TscRateQ32(const TscSample& a, const TscSample& b) {
  const __int128 span = static_cast<__int128>(b.tsc) - static_cast<__int128>(a.tsc);
  if (span <= 0) return __int128{1} << 32;
  const __int128 rate = ((static_cast<__int128>(b.ns) - a.ns) * (__int128{1} << 32)) / span;
  return rate > kMaxTscRateQ32 ? kMaxTscRateQ32 : rate < -kMaxTscRateQ32 ? -kMaxTscRateQ32 : rate;
}

// a.ns + (tsc - a.tsc) * rate, rounded to the nearest ns (>> floors, also below zero);
// the sum wraps rather than overflows.
inline int64_t TscLineNs(const TscSample& a, __int128 rate_q32, uint64_t tsc) {
  const __int128 dt = static_cast<__int128>(tsc) - static_cast<__int128>(a.tsc);
  const __int128 scaled = dt * rate_q32 + (__int128{1} << 31);
  return static_cast<int64_t>(static_cast<uint64_t>(a.ns) +
                              static_cast<uint64_t>(static_cast<int64_t>(scaled >> 32)));
}

// The interval a stamp converts with: samples[i - 1] -> samples[i], the latest whose
// start is at or before the stamp (the first one for stamps before every sample).
// count >= 2.
inline size_t TscIntervalEnd(const TscSample* samples, size_t count, uint64_t tsc) {
  size_t i = count - 1;
  while (i > 1 && tsc < samples[i - 1].tsc) --i;
  return i;
}

}  // namespace teller::wire
