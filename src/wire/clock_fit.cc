#include "wire/clock_fit.h"

#include <algorithm>

namespace teller::wire {
namespace {

// round(numerator / denominator) half away from zero; denominator > 0.
int64_t DivRound(__int128 numerator, __int128 denominator) {
  __int128 half = denominator / 2;
  __int128 q =
      numerator >= 0 ? (numerator + half) / denominator : -((-numerator + half) / denominator);
  return static_cast<int64_t>(q);
}

}  // namespace

ClockFit::ClockFit(std::vector<std::pair<int64_t, int64_t>> samples)
    : samples_(std::move(samples)) {
  std::stable_sort(samples_.begin(), samples_.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  samples_.erase(std::unique(samples_.begin(), samples_.end(),
                             [](const auto& a, const auto& b) { return a.first == b.first; }),
                 samples_.end());
}

int64_t ClockFit::ToRealtime(int64_t source_ns) const {
  if (samples_.empty()) return source_ns;
  if (samples_.size() == 1) return source_ns + (samples_[0].second - samples_[0].first);
  // Segment [i, i+1] that holds source_ns, or the first/last one outside the samples.
  auto it = std::upper_bound(samples_.begin(), samples_.end(), source_ns,
                             [](int64_t x, const auto& s) { return x < s.first; });
  size_t i = it == samples_.begin() ? 0 : static_cast<size_t>(it - samples_.begin()) - 1;
  if (i + 1 >= samples_.size()) i = samples_.size() - 2;
  const auto& [s0, r0] = samples_[i];
  const auto& [s1, r1] = samples_[i + 1];
  __int128 dx = static_cast<__int128>(source_ns) - s0;
  __int128 dr = static_cast<__int128>(r1) - r0;
  return r0 + DivRound(dx * dr, static_cast<__int128>(s1) - s0);
}

HostClockConverter::HostClockConverter(const std::vector<ClockPair>& pairs) {
  std::vector<std::pair<int64_t, int64_t>> monotonic, gpu;
  for (const ClockPair& p : pairs) {
    monotonic.emplace_back(p.monotonic_ns, p.realtime_ns);
    if (p.gpu_ns) gpu.emplace_back(*p.gpu_ns, p.realtime_ns);
  }
  monotonic_ = ClockFit(std::move(monotonic));
  gpu_ = ClockFit(std::move(gpu));
}

bool HostClockConverter::ToTrace(ClockDomain clock, int64_t ts_ns, int64_t* trace_ns) const {
  switch (clock) {
    case ClockDomain::kNone:
    case ClockDomain::kRealtime:
      *trace_ns = ts_ns;
      return true;
    case ClockDomain::kMonotonic:
      *trace_ns = monotonic_.ToRealtime(ts_ns);
      return !monotonic_.empty();
    case ClockDomain::kGpu:
      *trace_ns = gpu_.ToRealtime(ts_ns);
      return !gpu_.empty();
  }
  *trace_ns = ts_ns;
  return false;
}

}  // namespace teller::wire
