// Tests only: a real one-step capture (../shared/real-traces) and kernels slowed in it, for
// the instance peers' tests (cause/) and the verdicts they lead to (diagnose/).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <string>

#include "base/testing.h"
#include "localize/step_features.h"
#include "model/trace.h"
#include "store/open_trace.h"

namespace teller::cause {

// One real vLLM decode step on an MI300X (CUDA graph replayed): 24-72 calls of each kernel.
inline constexpr char kDecodeStep[] = "tracelens__mi300x_vllm_decode_cudagraph_step.json.gz";

inline model::Trace OpenRealTrace(const std::string& file) {
  auto trace = store::OpenTrace({base::RealTracesDir() + "/" + file}, {});
  EXPECT_TRUE(trace.ok()) << trace.status().message();
  return trace.ok() ? std::move(*trace) : model::Trace{};
}

// Multiplies by `factor` the compute kernels of `family` (kUnnamed: every compute family)
// that start in the last `tail` share of the kernels' time span.
inline void SlowKernels(model::Trace* trace, localize::OperatorFamily family, double tail,
                        double factor) {
  const localize::StepFeatures features = localize::ComputeStepFeatures(*trace);
  model::TimeNs first = std::numeric_limits<model::TimeNs>::max(), last = 0;
  for (size_t e = 0; e < trace->events.size(); ++e) {
    if (trace->events.layer[e] != model::Layer::kK) continue;
    first = std::min(first, trace->events.start_ns[e]);
    last = std::max(last, trace->events.start_ns[e]);
  }
  const double from = static_cast<double>(last) - tail * static_cast<double>(last - first);
  for (size_t row = 0; row < features.size(); ++row) {
    const localize::OperatorFamily f = features.family[row];
    if (!localize::IsComputeFamily(f) ||
        (family != localize::OperatorFamily::kUnnamed && f != family)) {
      continue;
    }
    for (int64_t i = 0; i < features.count[row]; ++i) {
      const model::NodeIndex node = features.instances[features.instances_begin[row] + i];
      const uint32_t e = trace->nodes.event[node.value()].value();
      if (static_cast<double>(trace->events.start_ns[e]) < from) continue;
      trace->events.dur_ns[e] =
          static_cast<model::DurationNs>(static_cast<double>(trace->events.dur_ns[e]) * factor);
    }
  }
}

// The compute family with the most kernel time.
inline localize::OperatorFamily LargestFamily(const model::Trace& trace) {
  const localize::StepFeatures features = localize::ComputeStepFeatures(trace);
  std::map<localize::OperatorFamily, int64_t> time;
  for (size_t row = 0; row < features.size(); ++row) {
    if (localize::IsComputeFamily(features.family[row])) {
      time[features.family[row]] += features.total_ns[row];
    }
  }
  return std::max_element(time.begin(), time.end(),
                          [](const auto& a, const auto& b) { return a.second < b.second; })
      ->first;
}

}  // namespace teller::cause
