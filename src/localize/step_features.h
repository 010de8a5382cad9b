// phi(x): per step and per operator family, the numbers the baseline learns.
// Columnar, one row per (step, family present in the step), rows ordered by step
// then family, so the output is deterministic.
#pragma once

#include <cstdint>
#include <vector>

#include "localize/operator_family.h"
#include "model/trace.h"

namespace teller::localize {

// Feature columns the baseline scores, in this order.
enum class Feature : uint8_t {
  kCount,
  kTotalNs,
  kMeanNs,
  kMaxNs,
  kQueueMaxNs,  // max launch-to-start (kernel start - launching call start)
  kGapNs,       // idle time between consecutive instances of the family in the step
  kShare,       // total / step duration
  kSkewNs,      // max collective skew across ranks (max end - min end of a match)
  // Compute kernels of the family after a predecessor (the previous compute kernel on
  // its stream) more often than steps that ran the same kernels usually do: a change
  // of operator order, with the same kernels and the same times.
  kOrderBreaks,
};
inline constexpr int kFeatureCount = 9;
std::string_view FeatureName(Feature feature);
// Features that count instances (shown as integers, resolution 1).
inline bool IsCountFeature(Feature feature) {
  return feature == Feature::kCount || feature == Feature::kOrderBreaks;
}

struct StepFeatures {
  std::vector<model::StepIndex> step;
  std::vector<OperatorFamily> family;
  std::vector<int64_t> count;
  std::vector<int64_t> total_ns;
  std::vector<int64_t> mean_ns;
  std::vector<int64_t> max_ns;
  std::vector<int64_t> queue_total_ns;  // over instances launched by a RT/DRV parent
  std::vector<int64_t> queue_max_ns;
  std::vector<int64_t> gap_ns;
  std::vector<double> share;
  std::vector<int64_t> skew_ns;  // 0 when no matched collective
  std::vector<int64_t> order_breaks;
  // Instances: nodes of the row, [instances_begin, instances_begin + count).
  std::vector<uint32_t> instances_begin;
  std::vector<model::NodeIndex> instances;

  size_t size() const { return step.size(); }
  double Value(size_t row, Feature feature) const;
};

// Needs a reconstructed trace (nodes and steps); the step root itself is skipped. The
// split path of step_features_parts.h over one part, the whole trace.
StepFeatures ComputeStepFeatures(const model::Trace& trace);

}  // namespace teller::localize
