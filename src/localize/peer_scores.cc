#include "localize/peer_scores.h"

#include <algorithm>
#include <array>
#include <map>
#include <tuple>

#include "base/median.h"
#include "base/robust.h"

namespace teller::localize {
namespace {

// Aggregates only: one instance's max jitters, and queueing follows the host.
constexpr std::array<Feature, 2> kPeerFeatures = {Feature::kTotalNs, Feature::kMeanNs};

// Per step: its compute rows, [begin, end) of features, and their total time.
struct ComputeOfStep {
  size_t begin = 0;
  size_t end = 0;
  double total_ns = 0.0;
};

// The median over the peers of each compute row's total time: the k-th compute row of
// every step in a group is the same family (same families and counts).
std::vector<double> ComputeRowMedians(const StepFeatures& features,
                                      const std::vector<ComputeOfStep>& steps) {
  std::vector<std::vector<double>> by_row;
  for (const ComputeOfStep& step : steps) {
    size_t k = 0;
    for (size_t r = step.begin; r < step.end; ++r) {
      if (!IsComputeFamily(features.family[r])) continue;
      if (k == by_row.size()) by_row.emplace_back();
      by_row[k++].push_back(static_cast<double>(features.total_ns[r]));
    }
  }
  std::vector<double> medians;
  medians.reserve(by_row.size());
  for (std::vector<double>& values : by_row) medians.push_back(base::MedianInPlace(&values));
  return medians;
}

void ScoreRankWide(const FeatureRows& rows, uint32_t feature_mask, std::vector<PeerScore>* scores) {
  const StepFeatures& features = rows.features;
  if (!(feature_mask & (1u << static_cast<int>(Feature::kTotalNs)))) return;
  // (global step, compute families and counts) -> steps, one per rank.
  std::map<std::pair<int64_t, std::vector<std::pair<OperatorFamily, int64_t>>>,
           std::vector<ComputeOfStep>>
      groups;
  size_t row = 0;
  while (row < features.size()) {
    const model::StepIndex step = features.step[row];
    size_t end = row;
    while (end < features.size() && features.step[end] == step) ++end;
    const int64_t global = rows.global_step[step.value()];
    std::vector<std::pair<OperatorFamily, int64_t>> work;
    ComputeOfStep compute{row, end, 0.0};
    for (size_t r = row; r < end; ++r) {
      if (!IsComputeFamily(features.family[r])) continue;
      work.emplace_back(features.family[r], features.count[r]);
      compute.total_ns += static_cast<double>(features.total_ns[r]);
    }
    if (global >= 0 && !work.empty()) groups[{global, std::move(work)}].push_back(compute);
    row = end;
  }
  std::vector<double> values;
  for (const auto& [key, steps] : groups) {
    if (steps.size() < static_cast<size_t>(kMinPeers)) continue;
    values.clear();
    for (const ComputeOfStep& step : steps) values.push_back(step.total_ns);
    const double median = base::MedianInPlace(&values);
    for (double& v : values) v = std::abs(v - median);
    const double mad = base::MedianInPlace(&values);
    const double eps = std::max(kRankResolution * median, 1000.0);
    const std::vector<double> family_medians = ComputeRowMedians(features, steps);
    for (const ComputeOfStep& step : steps) {
      const double z = (step.total_ns - median) / (base::SigmaOfMad(mad) + eps);
      if (z <= 0.0) continue;
      // The family adding most: its time over the median of the same family on the
      // peers (same families and counts, so the k-th compute row matches).
      size_t best_row = features.size();
      double best_excess = -1.0;
      size_t k = 0;
      for (size_t r = step.begin; r < step.end; ++r) {
        if (!IsComputeFamily(features.family[r])) continue;
        const double excess = static_cast<double>(features.total_ns[r]) - family_medians[k++];
        if (excess > best_excess) {
          best_excess = excess;
          best_row = r;
        }
      }
      if (best_row == features.size() || z <= (*scores)[best_row].score) continue;
      PeerScore& score = (*scores)[best_row];
      score = {z, Feature::kTotalNs, static_cast<double>(features.total_ns[best_row]),
               static_cast<double>(features.total_ns[best_row]) - best_excess,
               static_cast<int32_t>(steps.size())};
      score.rank_wide = true;
      score.rank_excess = median > 0.0 ? step.total_ns / median - 1.0 : 0.0;
    }
  }
}

}  // namespace

std::vector<PeerScore> ScorePeers(const FeatureRows& feature_rows, uint32_t feature_mask) {
  const StepFeatures& features = feature_rows.features;
  std::vector<PeerScore> scores(features.size());
  // (global step, family, count) -> rows, one per rank.
  std::map<std::tuple<int64_t, OperatorFamily, int64_t>, std::vector<size_t>> groups;
  for (size_t row = 0; row < features.size(); ++row) {
    const int64_t global = feature_rows.global_step[features.step[row].value()];
    // A collective lasts until the last rank arrives: its time is the peers' doing.
    if (global < 0 || IsCollectiveFamily(features.family[row])) continue;
    groups[{global, features.family[row], features.count[row]}].push_back(row);
  }
  std::vector<double> values;
  for (const auto& [key, rows] : groups) {
    if (rows.size() < static_cast<size_t>(kMinPeers)) continue;
    for (Feature feature : kPeerFeatures) {
      if (!(feature_mask & (1u << static_cast<int>(feature)))) continue;
      values.clear();
      for (size_t row : rows) values.push_back(features.Value(row, feature));
      const double median = base::MedianInPlace(&values);
      for (double& v : values) v = std::abs(v - median);
      const double mad = base::MedianInPlace(&values);
      const double eps = std::max(kPeerResolution * std::abs(median), 1000.0);
      for (size_t row : rows) {
        const double x = features.Value(row, feature);
        const double z = (x - median) / (base::SigmaOfMad(mad) + eps);
        if (z > scores[row].score) {
          scores[row] = {z, feature, x, median, static_cast<int32_t>(rows.size())};
        }
      }
    }
  }
  ScoreRankWide(feature_rows, feature_mask, &scores);
  return scores;
}

}  // namespace teller::localize
