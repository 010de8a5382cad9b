// Robust baseline of normal behaviour and scoring by robust deviation: per
// (step name with digits removed, phase, family) the median and MAD of every
// feature; a family's score is the largest robust z over its features.
#pragma once

#include <array>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "localize/isolation_forest.h"
#include "localize/step_features.h"

namespace teller::localize {

struct BaselineKey {
  std::string step_name;  // digits removed: "execute_context_<n>(...)" steps share a key
  model::StepPhase phase;
  int32_t batch_bucket;  // bit width of the step's request count: 0, 1, 2-3, 4-7, ...
  OperatorFamily family;
  auto operator<=>(const BaselineKey&) const = default;
};

struct FeatureStats {
  std::array<double, kFeatureCount> median{};
  std::array<double, kFeatureCount> mad{};
  int64_t samples = 0;
  // Fitted when the key has at least kMinForestSamples rows.
  std::optional<IsolationForest> forest;
};

inline constexpr int64_t kMinForestSamples = 16;
// The rows an isolation forest sees: log1p of counts and durations, share x100.
std::array<double, kFeatureCount> ForestRow(const StepFeatures& features, size_t row);

struct FamilyScore {
  OperatorFamily family;
  double score;     // max robust z over features
  Feature feature;  // the feature that gave it
  size_t row;       // row of StepFeatures (instances there)
  double forest_score = -1.0;  // isolation-forest score in (0, 1); -1 without a forest
};

class Baseline {
 public:
  // Learns from the given steps (typically all steps: median/MAD tolerate a few faulty ones).
  static Baseline Learn(const model::Trace& trace, const StepFeatures& features,
                        const std::vector<model::StepIndex>& steps,
                        const IsolationForestOptions& forest_options = {});
  // Suspicious families of one step, highest score first (ties by family).
  // Families with no baseline key are skipped.
  std::vector<FamilyScore> ScoreStep(const model::Trace& trace, const StepFeatures& features,
                                     model::StepIndex step) const;
  size_t size() const { return stats_.size(); }

  // Robust z: |x - median| / (1.4826 MAD + eps) with eps = max(1% of |median|,
  // the feature's resolution: 1 instance, 1 us, 0.5% of the step), so features
  // that are constant in the baseline do not turn jitter into huge scores.
  static double RobustZ(double x, double median, double mad, Feature feature);

 private:
  std::map<BaselineKey, FeatureStats> stats_;
};

BaselineKey KeyOf(const model::Trace& trace, const StepFeatures& features, size_t row);

}  // namespace teller::localize
