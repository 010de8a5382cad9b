// TscClock: cheap timestamps for the NVTX hot path. When the CPU has an invariant TSC
// (x86-64, CPUID 0x80000007 EDX bit 8), events read __rdtsc() (a few ns) instead of
// clock_gettime (~33 ns on kvm-clock). The writer thread takes a (tsc, monotonic)
// sample at every drain and writes the stamps as ticks with the samples that convert
// them (CopySamples); the reader interpolates (wire/tsc_conversion.h, the same math as
// ToNs). Elsewhere the stamp is CLOCK_MONOTONIC ns and conversion is identity.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "wire/tsc_conversion.h"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace teller::capture {

class TscClock {
 public:
  // Samples closer than this are merged (the newest replaces the last one).
  static constexpr int64_t kMinSampleSpacingNs = 10'000'000;
  static constexpr size_t kMaxSamples = 64;

  // use_tsc false: stamps are CLOCK_MONOTONIC ns.
  explicit TscClock(bool use_tsc) : use_tsc_(use_tsc) {}

  // True when the TSC runs at a constant rate in every P/C-state (invariant TSC).
  static bool TscIsInvariant();

  bool use_tsc() const { return use_tsc_; }

  // The hot-path timestamp.
  static inline uint64_t ReadTsc() {
#if defined(__x86_64__)
    return __rdtsc();
#else
    return 0;
#endif
  }

  // Reads both clocks (TSC before and after clock_gettime, the narrowest of three
  // tries) and adds the pair. Async-signal-safe, no allocation.
  void Sample();
  // Adds a pair; tsc must not decrease. Keeps the last kMaxSamples pairs, at least
  // kMinSampleSpacingNs apart except the newest.
  void AddSample(uint64_t tsc, int64_t monotonic_ns);
  // CLOCK_MONOTONIC ns of a stamp: linear between the samples around it, else the
  // nearest interval's rate extended. 0 samples: identity; 1 sample: nominal 1 GHz.
  // Inline for stamps in the newest interval (or after it), the drain's common case.
  int64_t ToNs(uint64_t stamp) const {
    if (fast_rate_q32_ != 0 && stamp >= fast_tsc_ && stamp - fast_tsc_ < (uint64_t{1} << 62)) {
      const unsigned __int128 scaled =
          static_cast<unsigned __int128>(stamp - fast_tsc_) * fast_rate_q32_ + (uint64_t{1} << 31);
      return fast_ns_ + static_cast<int64_t>(scaled >> 32);
    }
    return ToNsSlow(stamp);
  }
  size_t sample_count() const { return count_; }
  // The samples ToNs uses for stamps at or after oldest_stamp, oldest first (none
  // without TSC): from the last one at or before it (and at least two when there are).
  // Converting with wire::TscIntervalEnd and TscLineNs over them gives ToNs's result.
  void CopySamples(uint64_t oldest_stamp, std::vector<wire::TscSample>* out) const;
  void Reset() {
    count_ = 0;
    first_ = 0;
    fast_rate_q32_ = 0;
  }

 private:
  struct Pair {
    uint64_t tsc;
    int64_t ns;
    // ns per tick of the interval that ends here, times 2^32 (0 for the first pair).
    __int128 rate_q32;
    wire::TscSample sample() const { return {tsc, ns}; }
  };
  const Pair& At(size_t i) const { return samples_[(first_ + i) % kMaxSamples]; }
  Pair& At(size_t i) { return samples_[(first_ + i) % kMaxSamples]; }
  static int64_t Line(const Pair& a, const Pair& b, uint64_t tsc);
  static __int128 Rate(const Pair& a, const Pair& b);
  int64_t ToNsSlow(uint64_t stamp) const;
  void UpdateFastPath();

  bool use_tsc_;
  Pair samples_[kMaxSamples] = {};
  size_t first_ = 0;
  size_t count_ = 0;
  // The newest interval, for ToNs: start tsc and ns and rate (0: use ToNsSlow).
  uint64_t fast_tsc_ = 0;
  int64_t fast_ns_ = 0;
  uint64_t fast_rate_q32_ = 0;
};

}  // namespace teller::capture
