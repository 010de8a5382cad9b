#include "localize/baseline.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "base/median.h"
#include "base/parallel_for.h"
#include "base/robust.h"

namespace teller::localize {
namespace {

// Robust spread of a time series (ns): sigma of the MAD, plus relative_floor of the median
// or min_scale (1 us).
double Scale(std::vector<double>& values, const ShiftOptions& options) {
  const auto [median, mad] = base::MedianAndMad(&values);
  return base::SigmaOfMad(mad) +
         std::max(options.relative_floor * std::abs(median), options.min_scale);
}

// Step numbers of a key's rows in a slower regime (left out of its baseline). Steps
// of the key's context without the family (absent) count as 0.
std::vector<int64_t> SlowStepsOfKey(const FeatureRows& feature_rows,
                                    const std::vector<size_t>& rows,
                                    const std::vector<model::StepIndex>& absent,
                                    double relative_floor) {
  const StepFeatures& features = feature_rows.features;
  std::map<int64_t, std::vector<double>> by_number;
  for (size_t row : rows) {
    by_number[feature_rows.number[features.step[row].value()]].push_back(
        features.Value(row, Feature::kTotalNs));
  }
  for (model::StepIndex step : absent) by_number[feature_rows.number[step.value()]].push_back(0.0);
  std::vector<double> values;
  for (auto& [number, v] : by_number) values.push_back(base::MedianInPlace(&v));
  ShiftOptions shift;
  shift.relative_floor = relative_floor;
  const SlowRegime regime = FindSlowRegime(values, shift);
  std::vector<int64_t> slow;
  size_t i = 0;
  for (const auto& entry : by_number) {
    if (regime.slow[i++]) slow.push_back(entry.first);
  }
  return slow;
}

// The window [begin, end) with the largest sum of sign * clipped deviation - drift.
std::pair<size_t, size_t> BestWindow(const std::vector<double>& values, double median, double scale,
                                     double sign, double drift) {
  double best = 0.0, sum = 0.0;
  size_t best_begin = 0, best_end = 0, begin = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    if (sum <= 0.0) {
      sum = 0.0;
      begin = i;
    }
    sum += std::clamp(sign * (values[i] - median) / scale, -4.0, 4.0) - drift;
    if (sum > best) {
      best = sum;
      best_begin = begin;
      best_end = i + 1;
    }
  }
  return {best_begin, best_end};
}

// Steps from the first to the last slow position: the window [begin, end) when slow
// (sign > 0), else the series outside it.
double SlowSpan(const std::vector<int64_t>& positions, size_t begin, size_t end, double sign) {
  const size_t n = positions.size();
  const size_t first = sign > 0 ? begin : begin > 0 ? 0 : end;
  const size_t last = sign > 0 ? end - 1 : end < n ? n - 1 : begin - 1;
  return static_cast<double>(positions[last] - positions[first] + 1);
}

// A window in the middle of the series that the steps after it come back from: at least
// `min_side` steps on each side, the median after it at most a quarter of the window's
// excess above the median before. A slower phase that lasts (a longer context, another mix
// of requests) does not come back to where it started; a series that ends lower than it
// began (the batch drained after the window) did.
bool RecoveredWindow(const std::vector<double>& values, size_t begin, size_t end, size_t min_side) {
  if (begin < min_side || values.size() - end < min_side) return false;
  std::vector<double> before(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(begin));
  std::vector<double> after(values.begin() + static_cast<std::ptrdiff_t>(end), values.end());
  std::vector<double> inside(values.begin() + static_cast<std::ptrdiff_t>(begin),
                             values.begin() + static_cast<std::ptrdiff_t>(end));
  const double level_before = base::MedianInPlace(&before);
  const double level_after = base::MedianInPlace(&after);
  const double excess = base::MedianInPlace(&inside) - std::max(level_before, level_after);
  return excess > 0.0 && level_after - level_before <= 0.25 * excess;
}

// The split of a series into a first and a last part (the last at least min_last values)
// whose values lie closest to their parts' medians (least absolute deviations).
size_t BestChangePoint(const std::vector<double>& values, size_t min_last) {
  auto cost = [](std::vector<double> part) {
    const double median = base::MedianInPlace(&part);
    double sum = 0.0;
    for (double v : part) sum += std::abs(v - median);
    return sum;
  };
  size_t best = 1;
  double best_cost = std::numeric_limits<double>::infinity();
  for (size_t k = 1; k + min_last <= values.size(); ++k) {
    const double c = cost({values.begin(), values.begin() + static_cast<std::ptrdiff_t>(k)}) +
                     cost({values.begin() + static_cast<std::ptrdiff_t>(k), values.end()});
    if (c < best_cost) best_cost = c, best = k;
  }
  return best;
}

// How far the values from `onset` on stand above those before it, in robust deviations of
// the earlier ones; 0 unless the later ones hold one level (the step up at least min_z of
// their own deviations) and, with fewer normal values than min_normal_before, the step up
// is at least min_z x few_normal_floor of the normal level.
double LevelShiftZ(const std::vector<double>& values, size_t onset, const ShiftOptions& options) {
  if (onset == 0 || values.size() < onset + options.min_slow) return 0.0;
  std::vector<double> normal(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(onset));
  std::vector<double> slow(values.begin() + static_cast<std::ptrdiff_t>(onset), values.end());
  std::vector<double> work = normal;
  const double normal_median = base::MedianInPlace(&work);
  work = slow;
  const double step_up = base::MedianInPlace(&work) - normal_median;
  const double z = step_up / Scale(normal, options);
  if (z < options.min_z || step_up < options.min_z * Scale(slow, options)) return 0.0;
  const size_t min_normal_before = std::min(options.min_normal, options.min_normal_before);
  if (onset < min_normal_before &&
      step_up < options.min_z * options.few_normal_floor * std::abs(normal_median))
    return 0.0;
  return z;
}

// A median's standard error over the mean's, sqrt(pi / 2), for normal noise.
constexpr double kMedianStandardErrorFactor = 1.2533;

// How far the slow values' median stands above the normal ones', in robust deviations of
// the normal ones; 0 below min_z, unless the regime is sustained: min_sustained_z and
// min_sustained_t standard errors of the two medians. Reorders both.
double RegimeZ(std::vector<double>* slow, std::vector<double>* normal,
               const ShiftOptions& options) {
  const double slow_median = base::MedianInPlace(slow);
  const double normal_median = base::MedianInPlace(normal);
  const double z = (slow_median - normal_median) / Scale(*normal, options);
  if (z >= options.min_z) return z;
  const double standard_error =
      kMedianStandardErrorFactor * std::sqrt(1.0 / static_cast<double>(slow->size()) +
                                             1.0 / static_cast<double>(normal->size()));
  if (z >= options.min_sustained_z && z >= options.min_sustained_t * standard_error) return z;
  return 0.0;
}

// Fewer normal steps than min_normal (a fault over the middle of a short capture) tell
// their level and spread less surely: the step up must be as many times larger as they
// are fewer, and a sustained regime's smaller one does not count
// (ShiftOptions::few_normal_regimes).
ShiftOptions FewNormalOptions(const ShiftOptions& options, size_t normal, size_t min_normal) {
  if (normal >= min_normal) return options;
  ShiftOptions strict = options;
  strict.min_z = options.min_z * static_cast<double>(min_normal) / static_cast<double>(normal);
  strict.min_sustained_t = std::numeric_limits<double>::infinity();
  return strict;
}

}  // namespace

SlowRegime FindSlowRegime(const std::vector<double>& values, const ShiftOptions& options) {
  return FindSlowRegime(values, {}, 0, 1.0, options);
}

SlowRegime FindSlowRegime(const std::vector<double>& values, const std::vector<int64_t>& positions,
                          int64_t span, double max_span_share, const ShiftOptions& options) {
  SlowRegime out;
  const size_t n = values.size();
  out.slow.assign(n, 0);
  if (n < options.min_slow + 1) return out;
  std::vector<double> work = values;
  const double median = base::MedianInPlace(&work);
  const double scale = Scale(work, options);
  // A slow window holding most of the series pulls the median into itself: it is also
  // sought above the lower quartile (the normal steps' level while they are a quarter),
  // as a fault that came and went (RecoveredWindow).
  std::vector<double> sorted = values;
  std::sort(sorted.begin(), sorted.end());
  const double lower_quartile = sorted[sorted.size() / 4];
  for (const auto& [sign, center] :
       {std::pair{1.0, median}, std::pair{-1.0, median}, std::pair{1.0, lower_quartile}}) {
    const auto [begin, end] = BestWindow(values, center, scale, sign, options.drift);
    if (begin == end) continue;
    if (center != median && !RecoveredWindow(values, begin, end, options.min_slow)) continue;
    std::vector<double> slow, normal;
    for (size_t i = 0; i < n; ++i) {
      const bool inside = i >= begin && i < end;
      ((inside == (sign > 0)) ? slow : normal).push_back(values[i]);
    }
    // Normal steps all before slow ones that run to the end: a change point.
    const bool change_point = sign > 0 ? end == n : begin == 0 && end < n;
    const size_t min_normal =
        change_point ? std::min(options.min_normal, options.min_normal_before) : options.min_normal;
    const size_t least_normal =
        options.few_normal_regimes ? std::min(min_normal, options.min_normal_before) : min_normal;
    if (slow.size() < options.min_slow || normal.size() < least_normal) continue;
    if (!positions.empty() && SlowSpan(positions, begin, end, sign) > max_span_share * span)
      continue;
    const double z = RegimeZ(&slow, &normal, FewNormalOptions(options, normal.size(), min_normal));
    if (z <= out.z) continue;
    out.z = z;
    for (size_t i = 0; i < n; ++i) out.slow[i] = (i >= begin && i < end) == (sign > 0);
  }
  // A series too short to hold a regime beside enough normal steps: its best change point,
  // when the steps after it hold a level above those before (a fault that set in early in
  // a short capture and lasted, whatever share of it that took).
  if (options.level_shifts && n < options.min_normal + options.min_slow) {
    const size_t onset = BestChangePoint(values, options.min_slow);
    const double z = LevelShiftZ(values, onset, options);
    if (z > out.z) {
      out.z = z;
      for (size_t i = 0; i < n; ++i) out.slow[i] = i >= onset;
    }
  }
  return out;
}

int32_t BatchBucket(const model::Trace& trace, model::StepIndex step) {
  const model::StringId tokens_key = trace.strings.Find("tokens");
  int64_t tokens = 0;
  if (tokens_key.valid() &&
      trace.FindIntArg(trace.steps.event[step.value()], tokens_key, &tokens) && tokens > 0) {
    // Half-octave buckets of the scheduled tokens, offset past the request buckets.
    return 64 + static_cast<int32_t>(std::floor(2.0 * std::log2(static_cast<double>(tokens))));
  }
  const uint32_t requests = trace.steps.requests_count[step.value()];
  return requests == 0 ? 0 : 32 - __builtin_clz(requests);
}

BaselineKey ContextKey(const FeatureRows& rows, model::StepIndex step, int32_t rank_key) {
  const size_t s = step.value();
  return BaselineKey{rows.names[rows.name[s]], rows.phase[s], rows.batch_bucket[s],
                     OperatorFamily::kUnnamed, rank_key};
}

namespace {

// Feature rows' keys: a step's context is made once for its rows (they are consecutive),
// then each row sets its family.
class RowKeys {
 public:
  RowKeys(const FeatureRows& rows, const Baseline& baseline) : rows_(rows), baseline_(baseline) {}

  const BaselineKey& Of(size_t row) {
    const model::StepIndex step = rows_.features.step[row];
    if (!step_.valid() || step != step_) {
      key_ = ContextKey(rows_, step, baseline_.RankKey(rows_, step));
      step_ = step;
    }
    key_.family = rows_.features.family[row];
    return key_;
  }

 private:
  const FeatureRows& rows_;
  const Baseline& baseline_;
  model::StepIndex step_ = model::StepIndex::Invalid();
  BaselineKey key_;
};

}  // namespace

std::map<int32_t, int32_t> RankRoles(const FeatureRows& rows) {
  const StepFeatures& features = rows.features;
  std::map<int32_t, std::set<OperatorFamily>> families;
  for (size_t row = 0; row < features.size(); ++row) {
    if (features.count[row] > 0) {
      families[rows.rank[features.step[row].value()]].insert(features.family[row]);
    }
  }
  std::map<std::set<OperatorFamily>, int32_t> role_of;
  std::map<int32_t, int32_t> roles;
  for (const auto& [rank, set] : families) {
    roles[rank] = role_of.try_emplace(set, static_cast<int32_t>(role_of.size())).first->second;
  }
  return roles;
}

double Baseline::RobustZ(double x, double median, double mad, Feature feature,
                         double family_total_ns, double step_ns, double relative_floor) {
  const double time_scale =
      family_total_ns > 0.0 ? kTimeScaleShare * family_total_ns : kAbsentStepShare * step_ns;
  double resolution = std::max(1000.0, time_scale);  // ns
  if (IsCountFeature(feature)) resolution = 1.0;
  if (feature == Feature::kShare) resolution = 0.005;
  const double eps = std::max(relative_floor * std::abs(median), resolution);
  return std::abs(x - median) / (base::SigmaOfMad(mad) + eps);
}

std::array<double, kFeatureCount> ForestRow(const StepFeatures& features, size_t row) {
  std::array<double, kFeatureCount> out{};
  for (int f = 0; f < kFeatureCount; ++f) {
    const double v = features.Value(row, static_cast<Feature>(f));
    out[f] = static_cast<Feature>(f) == Feature::kShare ? 100.0 * v : std::log1p(std::abs(v));
  }
  return out;
}

Baseline Baseline::Learn(const FeatureRows& feature_rows,
                         const std::vector<model::StepIndex>& steps,
                         const BaselineOptions& options) {
  const StepFeatures& features = feature_rows.features;
  Baseline baseline;
  baseline.relative_floor_ = options.relative_floor;
  if (options.per_rank) {
    for (int32_t rank : feature_rows.rank) baseline.rank_key_[rank] = rank;
  } else if (options.by_role) {
    baseline.rank_key_ = RankRoles(feature_rows);
  }
  std::vector<uint8_t> wanted(feature_rows.steps(), 0);
  for (model::StepIndex s : steps) wanted[s.value()] = 1;
  std::map<BaselineKey, std::vector<size_t>> rows_by_key;
  RowKeys keys(feature_rows, baseline);
  for (size_t row = 0; row < features.size(); ++row) {
    if (wanted[features.step[row].value()]) rows_by_key[keys.Of(row)].push_back(row);
  }
  // Steps with features, by context (the key without its family), ascending.
  std::map<BaselineKey, std::vector<model::StepIndex>> steps_by_context;
  if (options.absent_as_zero) {
    for (size_t row = 0; row < features.size(); ++row) {
      const model::StepIndex step = features.step[row];
      if (!wanted[step.value()] || (row > 0 && features.step[row - 1] == step)) continue;
      steps_by_context[ContextKey(feature_rows, step, baseline.RankKey(feature_rows, step))]
          .push_back(step);
    }
  }
  std::vector<double> values;
  std::vector<model::StepIndex> present, absent;
  for (auto& [key, rows] : rows_by_key) {
    absent.clear();
    if (options.absent_as_zero) {
      BaselineKey context = key;
      context.family = OperatorFamily::kUnnamed;
      const std::vector<model::StepIndex>& context_steps = steps_by_context[context];
      present.clear();
      for (size_t row : rows) present.push_back(features.step[row]);
      std::set_difference(context_steps.begin(), context_steps.end(), present.begin(),
                          present.end(), std::back_inserter(absent));
    }
    if (options.exclude_shifts) {
      const std::vector<int64_t> slow =
          SlowStepsOfKey(feature_rows, rows, absent, options.relative_floor);
      auto is_slow = [&](model::StepIndex step) {
        return std::binary_search(slow.begin(), slow.end(), feature_rows.number[step.value()]);
      };
      if (!slow.empty()) {
        std::erase_if(rows, [&](size_t row) { return is_slow(features.step[row]); });
        std::erase_if(absent, is_slow);
      }
    }
    FeatureStats stats;
    stats.samples = static_cast<int64_t>(rows.size() + absent.size());
    for (int f = 0; f < kFeatureCount; ++f) {
      values.clear();
      for (size_t row : rows) values.push_back(features.Value(row, static_cast<Feature>(f)));
      values.resize(values.size() + absent.size(), 0.0);
      std::tie(stats.median[f], stats.mad[f]) = base::MedianAndMad(&values);
    }
    if (stats.samples >= kMinForestSamples) {
      std::vector<double> matrix;
      matrix.reserve(static_cast<size_t>(stats.samples) * kFeatureCount);
      for (size_t row : rows) {
        const auto values_row = ForestRow(features, row);
        matrix.insert(matrix.end(), values_row.begin(), values_row.end());
      }
      matrix.resize(matrix.size() + absent.size() * kFeatureCount, 0.0);
      stats.forest = IsolationForest::Fit(matrix, kFeatureCount, options.forest);
    }
    baseline.stats_.emplace(key, std::move(stats));
  }
  if (options.score_threads > 0) baseline.ScoreForestsAhead(feature_rows, options.score_threads);
  return baseline;
}

double Baseline::ForestScore(const FeatureStats& stats, const StepFeatures& features,
                             size_t row) const {
  if (!forest_score_.empty()) return forest_score_[row];
  const auto values_row = ForestRow(features, row);
  return stats.forest->Score(values_row.data());
}

void Baseline::ScoreForestsAhead(const FeatureRows& rows, int threads) {
  const StepFeatures& features = rows.features;
  // Each row's forest, then the rows grouped by forest: a batch of rows of one forest is
  // scored tree by tree (IsolationForest::ScoreRows).
  std::vector<std::pair<const IsolationForest*, size_t>> by_forest;
  RowKeys keys(rows, *this);
  for (size_t row = 0; row < features.size(); ++row) {
    auto found = stats_.find(keys.Of(row));
    if (found == stats_.end() || !found->second.forest) continue;
    by_forest.emplace_back(&*found->second.forest, row);
  }
  std::stable_sort(by_forest.begin(), by_forest.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<double> scores(features.size(), 0.0);
  constexpr size_t kBatch = 256;
  base::ParallelFor(
      (by_forest.size() + kBatch - 1) / kBatch, threads,
      [&](size_t begin, size_t end) {
        std::vector<double> matrix, batch_scores;
        const size_t chunk_end = std::min(end * kBatch, by_forest.size());
        for (size_t at = begin * kBatch; at < chunk_end;) {
          const IsolationForest* forest = by_forest[at].first;
          size_t stop = at;
          matrix.clear();
          while (stop < chunk_end && stop < at + kBatch && by_forest[stop].first == forest) {
            const auto values_row = ForestRow(features, by_forest[stop].second);
            matrix.insert(matrix.end(), values_row.begin(), values_row.end());
            ++stop;
          }
          batch_scores.resize(stop - at);
          forest->ScoreRows(matrix.data(), stop - at, batch_scores.data());
          for (size_t i = at; i < stop; ++i) scores[by_forest[i].second] = batch_scores[i - at];
          at = stop;
        }
      },
      16);
  forest_score_ = std::move(scores);
}

std::vector<FamilyScore> Baseline::ScoreStep(const FeatureRows& rows, model::StepIndex step,
                                             uint32_t feature_mask, int64_t min_samples) const {
  const StepFeatures& features = rows.features;
  std::vector<FamilyScore> scores;
  // Rows are ordered by step: find this step's range.
  auto lo = std::lower_bound(features.step.begin(), features.step.end(), step);
  auto hi = std::upper_bound(lo, features.step.end(), step);
  if (lo == hi) return scores;
  // Every row of the step shares the key but for the family: build it once.
  BaselineKey key = ContextKey(rows, step, RankKey(rows, step));
  const double step_ns = static_cast<double>(rows.dur_ns[step.value()]);
  for (auto it = lo; it != hi; ++it) {
    const size_t row = static_cast<size_t>(it - features.step.begin());
    key.family = features.family[row];
    auto found = stats_.find(key);
    if (found == stats_.end() || found->second.samples < min_samples) continue;
    FamilyScore best{features.family[row], 0.0, Feature::kCount, row};
    for (int f = 0; f < kFeatureCount; ++f) {
      if (!(feature_mask & (1u << f))) continue;
      const double z =
          RobustZ(features.Value(row, static_cast<Feature>(f)), found->second.median[f],
                  found->second.mad[f], static_cast<Feature>(f),
                  found->second.median[static_cast<size_t>(Feature::kTotalNs)], step_ns,
                  relative_floor_);
      if (z > best.score) {
        best.score = z;
        best.feature = static_cast<Feature>(f);
      }
    }
    best.value = features.Value(row, best.feature);
    best.median = found->second.median[static_cast<size_t>(best.feature)];
    best.baseline_samples = found->second.samples;
    if (found->second.forest) best.forest_score = ForestScore(found->second, features, row);
    scores.push_back(best);
  }
  std::sort(scores.begin(), scores.end(), [](const FamilyScore& a, const FamilyScore& b) {
    return a.score != b.score ? a.score > b.score : a.family < b.family;
  });
  return scores;
}

}  // namespace teller::localize
