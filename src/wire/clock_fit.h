// Converts a host's monotonic or GPU timestamps to the trace clock (realtime, UTC
// epoch ns) from the clock pairs in meta.json: piecewise linear between samples,
// so drift between them is corrected; outside the samples the nearest segment's
// line is extended. Integer arithmetic, rounded to the nearest nanosecond.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "wire/bundle_meta.h"
#include "wire/wire_format.h"

namespace teller::wire {

class ClockFit {
 public:
  // (source_ns, realtime_ns) samples in any order; later duplicates of a source
  // time are dropped. No samples: the identity.
  explicit ClockFit(std::vector<std::pair<int64_t, int64_t>> samples = {});
  int64_t ToRealtime(int64_t source_ns) const;
  bool empty() const { return samples_.empty(); }
  size_t sample_count() const { return samples_.size(); }

 private:
  std::vector<std::pair<int64_t, int64_t>> samples_;  // sorted by source
};

// The fits of one host's monotonic and GPU clocks.
class HostClockConverter {
 public:
  explicit HostClockConverter(const std::vector<ClockPair>& pairs);
  // Returns false (and the raw value) when the domain has no clock pairs to convert
  // with; kRealtime and kNone pass through.
  bool ToTrace(ClockDomain clock, int64_t ts_ns, int64_t* trace_ns) const;
  bool has_monotonic() const { return !monotonic_.empty(); }
  bool has_gpu() const { return !gpu_.empty(); }

 private:
  ClockFit monotonic_;
  ClockFit gpu_;
};

}  // namespace teller::wire
