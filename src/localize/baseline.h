// Robust baseline of normal behaviour and scoring by robust deviation: per
// (step name with digits removed, phase, family) the median and MAD of every
// feature; a family's score is the largest robust z over its features.
#pragma once

#include <array>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "base/robust.h"
#include "localize/feature_rows.h"
#include "localize/isolation_forest.h"
#include "localize/step_features.h"

namespace teller::localize {

struct BaselineKey {
  std::string step_name;  // digits removed: "execute_context_<n>(...)" steps share a key
  model::StepPhase phase;
  int32_t batch_bucket;  // BatchBucket: scheduled tokens when known, else request count
  OperatorFamily family;
  // Per-rank baselines: the rank. Shared ones: the rank's role when roles are used
  // (RankRoles), else -1.
  int32_t rank = -1;
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
inline constexpr uint32_t kAllFeatures = (1u << kFeatureCount) - 1;
// The rows an isolation forest sees: log1p of counts and durations, share x100.
std::array<double, kFeatureCount> ForestRow(const StepFeatures& features, size_t row);

struct FamilyScore {
  OperatorFamily family;
  double score;                // max robust z over features
  Feature feature;             // the feature that gave it
  size_t row;                  // row of StepFeatures (instances there)
  double forest_score = -1.0;  // isolation-forest score in (0, 1); -1 without a forest
  double value = 0.0;          // the feature's value in this step
  double median = 0.0;         // its baseline median
  int64_t baseline_samples = 0;
};

// Steps of a series (one value per engine step, in step order) that sit in a
// slower regime than the rest of the run: a window found by the largest sum of
// clipped robust deviations minus a drift, above the rest (a slowdown in the middle
// or at the end) or below it (the run is slow but for a window of normal steps).
// The slower side is returned when its median is at least min_z robust deviations
// of the faster side above the faster side's median: faults slow steps down.
struct ShiftOptions {
  size_t min_slow = 3;    // steps: one or two slow steps are spikes, not a regime
  size_t min_normal = 8;  // steps left to estimate normal from
  // ... or this many, all before a slow window that lasts to the series' end (a fault
  // that began during a short capture and was still running when it stopped).
  size_t min_normal_before = 3;
  // ... or one, in a series shorter than min_normal + min_slow, before a slow level its
  // steps hold together (found at the series' best change point, not by the window
  // search; their spread small beside the step up), when the step up is at
  // least min_z times this share of the normal level: one step's own drift, which a lone
  // normal step cannot show. Such a level shift may take most of the run.
  bool level_shifts = true;  // false for series without a level (residuals)
  // Normal steps down to min_normal_before anywhere in the series, when the step up is
  // min_normal / normal times min_z (a fault over the middle of a short capture); off by
  // default (a series with a level of its own: the rank's own work, not its waits).
  bool few_normal_regimes = false;
  double few_normal_floor = 0.05;
  double drift = 0.5;  // robust deviations a step must exceed to extend a window
  double min_z = 3.0;
  // ... or, a regime held over many steps, at least min_sustained_z when its median's
  // step up is min_sustained_t standard errors of the two sides' medians: a launch 1.6x
  // slower over half a run, each step's mean of two calls 2.5 deviations up (off by default).
  double min_sustained_z = 3.0;
  double min_sustained_t = std::numeric_limits<double>::infinity();
  double min_scale = 1000.0;  // the values' resolution: 1 us for times
  // ... and at least this share of the median (base::kRelativeSigmaFloor).
  double relative_floor = base::kRelativeSigmaFloor;
};
struct SlowRegime {
  std::vector<uint8_t> slow;  // per value: 1 = in the slower regime
  double z = 0.0;             // 0: none found
};
SlowRegime FindSlowRegime(const std::vector<double>& values, const ShiftOptions& options = {});
// The same, for values taken at positions (step numbers) of a series of span steps: a
// slower regime spread over more than max_span_share of them is the series' normal (a
// workload phase after a short faster one), not a fault, and is not returned.
SlowRegime FindSlowRegime(const std::vector<double>& values, const std::vector<int64_t>& positions,
                          int64_t span, double max_span_share, const ShiftOptions& options = {});

struct BaselineOptions {
  // One baseline per rank (ranks of different pipeline stages or roles do different
  // work in the same step); otherwise ranks share keys.
  bool per_rank = false;
  // Shared keys are shared by ranks of the same role (RankRoles), not by all ranks.
  bool by_role = false;
  // Per key, a slower regime of the family's total time over a window of steps
  // (FindSlowRegime) is left out of the baseline, so a fault lasting many steps does
  // not become its own normal.
  bool exclude_shifts = false;
  // A family absent from a step of its key's context (same step name, phase, batch
  // bucket and rank key) counts there as zeros: an operator that shows up only in
  // faulty steps (cudaMalloc in the hot path) is judged against its usual absence.
  bool absent_as_zero = false;
  IsolationForestOptions forest;
  // > 0: Learn scores every feature row with its key's forest ahead, on this many
  // threads, and ScoreStep reads the scores (the same numbers; diagnosing a fleet scores
  // millions of rows). 0: ScoreStep scores its rows as it goes.
  int score_threads = 0;
  // A z's sigma is at least this share of the median (base::kRelativeSigmaFloor).
  double relative_floor = base::kRelativeSigmaFloor;
};

class Baseline {
 public:
  // Learns from the given steps (typically all steps: median/MAD tolerate a few faulty ones).
  // Reads only the rows (feature_rows.h): a whole trace's or every part's appended.
  static Baseline Learn(const FeatureRows& rows, const std::vector<model::StepIndex>& steps,
                        const BaselineOptions& options = {});
  // Suspicious families of one step, highest score first (ties by family).
  // Families with no baseline key are skipped.
  // feature_mask: bit f set = Feature f may give the score. Keys learned from
  // fewer than min_samples rows are not scored.
  // FamilyScore::row is the row of rows.features.
  std::vector<FamilyScore> ScoreStep(const FeatureRows& rows, model::StepIndex step,
                                     uint32_t feature_mask = kAllFeatures,
                                     int64_t min_samples = 1) const;
  size_t size() const { return stats_.size(); }
  // BaselineKey::rank of a step's rows.
  int32_t RankKey(const FeatureRows& rows, model::StepIndex step) const {
    auto found = rank_key_.find(rows.rank[step.value()]);
    return found == rank_key_.end() ? -1 : found->second;
  }

  // Robust z: |x - median| / (base::SigmaOfMad(MAD) + eps) with eps = max(relative_floor
  // of |median|,
  // the feature's resolution: 1 instance, 0.5% of the step, and for times the
  // larger of 1 us and kTimeScaleShare of the family's median total time in the
  // step), so features that are constant in the baseline (a gap that is usually
  // 0) do not turn jitter into huge scores: times are judged on the family's scale.
  // A family usually absent (median total 0) is judged on the step's scale instead:
  // kAbsentStepShare of step_ns.
  static double RobustZ(double x, double median, double mad, Feature feature,
                        double family_total_ns = 0.0, double step_ns = 0.0,
                        double relative_floor = base::kRelativeSigmaFloor);
  static constexpr double kTimeScaleShare = 0.02;
  static constexpr double kAbsentStepShare = 0.01;

 private:
  std::map<BaselineKey, FeatureStats> stats_;
  // rank -> BaselineKey::rank (the rank, its role, or -1).
  std::map<int32_t, int32_t> rank_key_;
  double relative_floor_ = base::kRelativeSigmaFloor;
  // Per feature row, its key's forest score (BaselineOptions::score_threads); empty
  // when scored as ScoreStep goes.
  std::vector<double> forest_score_;
  void ScoreForestsAhead(const FeatureRows& rows, int threads);
  double ForestScore(const FeatureStats& stats, const StepFeatures& features, size_t row) const;
};

// Roles of ranks: ranks that run the same operator families (over the whole trace)
// share a role; pipeline stages differ (the last one samples, the first embeds), and
// so do a send and the matching receive's wait. rank -> role id, from 0.
std::map<int32_t, int32_t> RankRoles(const FeatureRows& rows);

// rank_key: BaselineKey::rank for the row's rank.
// A step's key without its family (family kUnnamed).
BaselineKey ContextKey(const FeatureRows& rows, model::StepIndex step, int32_t rank_key = -1);
// Batch shape of a step: half-octave buckets of its STEP range's "tokens" arg
// (64 + floor(2 log2 tokens)) when present, else the bit width of its request
// count (0, 1, 2-3, 4-7, ...).
int32_t BatchBucket(const model::Trace& trace, model::StepIndex step);

}  // namespace teller::localize
