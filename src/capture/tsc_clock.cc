#include "capture/tsc_clock.h"

#include <time.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace teller::capture {
namespace {

int64_t ReadMonotonicNs() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}

}  // namespace

bool TscClock::TscIsInvariant() {
#if defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(0x80000000u, &eax, &ebx, &ecx, &edx) || eax < 0x80000007u) return false;
  if (!__get_cpuid(0x80000007u, &eax, &ebx, &ecx, &edx)) return false;
  return (edx & (1u << 8)) != 0;
#else
  return false;
#endif
}

void TscClock::Sample() {
  if (!use_tsc_) return;
#if defined(__x86_64__)
  uint64_t best_window = ~uint64_t{0};
  Pair best{};
  for (int attempt = 0; attempt < 3; ++attempt) {
    _mm_lfence();  // no earlier load (a ring head) may pass the first read
    const uint64_t before = __rdtsc();
    _mm_lfence();
    const int64_t ns = ReadMonotonicNs();
    _mm_lfence();
    const uint64_t after = __rdtsc();
    if (after - before < best_window) {
      best_window = after - before;
      best = {before + (after - before) / 2, ns, 0};
    }
  }
  AddSample(best.tsc, best.ns);
#endif
}

void TscClock::AddSample(uint64_t tsc, int64_t monotonic_ns) {
  if (count_ > 0 && tsc < At(count_ - 1).tsc) return;  // not monotonic: ignore
  if (count_ >= 2 && monotonic_ns - At(count_ - 2).ns < kMinSampleSpacingNs) {
    At(count_ - 1) = {tsc, monotonic_ns, 0};
    At(count_ - 1).rate_q32 = Rate(At(count_ - 2), At(count_ - 1));
    UpdateFastPath();
    return;
  }
  if (count_ == kMaxSamples) {
    first_ = (first_ + 1) % kMaxSamples;
    --count_;
  }
  At(count_) = {tsc, monotonic_ns, 0};
  if (count_ > 0) At(count_).rate_q32 = Rate(At(count_ - 1), At(count_));
  ++count_;
  UpdateFastPath();
}

__int128 TscClock::Rate(const Pair& a, const Pair& b) {
  return wire::TscRateQ32(a.sample(), b.sample());
}

// a.ns + (tsc - a.tsc) * rate, rounded to the nearest ns; the 2^-32 ns/tick rate
// step adds under 1 ns per 4e9 ticks. No division per event.
int64_t TscClock::Line(const Pair& a, const Pair& b, uint64_t tsc) {
  return wire::TscLineNs(a.sample(), b.rate_q32, tsc);
}

void TscClock::UpdateFastPath() {
  fast_rate_q32_ = 0;
  if (!use_tsc_ || count_ < 2) return;
  const Pair& a = At(count_ - 2);
  const Pair& b = At(count_ - 1);
  // Same result as Line for stamps at or after a: non-negative dt and rate.
  if (b.rate_q32 <= 0 || b.rate_q32 >= (__int128{1} << 40)) return;
  fast_tsc_ = a.tsc;
  fast_ns_ = a.ns;
  fast_rate_q32_ = static_cast<uint64_t>(b.rate_q32);
}

void TscClock::CopySamples(uint64_t oldest_stamp, std::vector<wire::TscSample>* out) const {
  out->clear();
  if (!use_tsc_ || count_ == 0) return;
  size_t first = count_ - 1;
  while (first > 0 && oldest_stamp < At(first).tsc) --first;
  if (count_ >= 2 && first > count_ - 2) first = count_ - 2;
  for (size_t i = first; i < count_; ++i) out->push_back(At(i).sample());
}

int64_t TscClock::ToNsSlow(uint64_t stamp) const {
  if (!use_tsc_ || count_ == 0) return static_cast<int64_t>(stamp);
  if (count_ == 1) return At(0).ns + (static_cast<int64_t>(stamp - At(0).tsc));
  // Events are almost always in the newest interval: search from the end.
  size_t i = count_ - 1;
  while (i > 1 && stamp < At(i - 1).tsc) --i;
  return Line(At(i - 1), At(i), stamp);
}

}  // namespace teller::capture
