#include "diagnose/peer_scores.h"

#include <algorithm>
#include <array>
#include <map>
#include <tuple>

namespace teller::diagnose {
namespace {

using localize::Feature;

double Median(std::vector<double>& values) {
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  const double upper = values[mid];
  if (values.size() % 2 == 1) return upper;
  return 0.5 * (upper + *std::max_element(values.begin(), values.begin() + mid));
}

// Aggregates only: one instance's max jitters, and queueing follows the host.
constexpr std::array<Feature, 2> kPeerFeatures = {Feature::kTotalNs, Feature::kMeanNs};

}  // namespace

std::vector<PeerScore> ScorePeers(const model::Trace& trace,
                                  const localize::StepFeatures& features,
                                  uint32_t feature_mask) {
  std::vector<PeerScore> scores(features.size());
  // (global step, family, count) -> rows, one per rank.
  std::map<std::tuple<int64_t, localize::OperatorFamily, int64_t>, std::vector<size_t>> groups;
  for (size_t row = 0; row < features.size(); ++row) {
    const int64_t global = trace.steps.global_step[features.step[row].value()];
    // A collective lasts until the last rank arrives: its time is the peers' doing.
    if (global < 0 || localize::IsCollectiveFamily(features.family[row])) continue;
    groups[{global, features.family[row], features.count[row]}].push_back(row);
  }
  std::vector<double> values;
  for (const auto& [key, rows] : groups) {
    if (rows.size() < static_cast<size_t>(kMinPeers)) continue;
    for (Feature feature : kPeerFeatures) {
      if (!(feature_mask & (1u << static_cast<int>(feature)))) continue;
      values.clear();
      for (size_t row : rows) values.push_back(features.Value(row, feature));
      const double median = Median(values);
      for (double& v : values) v = std::abs(v - median);
      const double mad = Median(values);
      const double eps = std::max(kPeerResolution * std::abs(median), 1000.0);
      for (size_t row : rows) {
        const double x = features.Value(row, feature);
        const double z = (x - median) / (1.4826 * mad + eps);
        if (z > scores[row].score) {
          scores[row] = {z, feature, x, median, static_cast<int32_t>(rows.size())};
        }
      }
    }
  }
  return scores;
}

}  // namespace teller::diagnose
