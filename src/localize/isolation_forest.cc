#include "localize/isolation_forest.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>

namespace teller::localize {
namespace {

// splitmix64: small, portable, deterministic.
struct Rng {
  uint64_t state;
  uint64_t Next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  size_t Below(size_t n) { return static_cast<size_t>(Next() % n); }
};

}  // namespace

double IsolationForest::AveragePathLength(double n) {
  if (n <= 1.0) return 0.0;
  if (n <= 2.0) return 1.0;
  constexpr double kEuler = 0.5772156649015329;
  return 2.0 * (std::log(n - 1.0) + kEuler) - 2.0 * (n - 1.0) / n;
}

IsolationForest IsolationForest::Fit(const std::vector<double>& rows, int dims,
                                     const IsolationForestOptions& options) {
  IsolationForest forest;
  forest.dims_ = dims;
  const size_t count = dims > 0 ? rows.size() / dims : 0;
  if (count == 0) return forest;
  const size_t sample = std::min(count, static_cast<size_t>(std::max(1, options.sample_size)));
  forest.sample_size_ = static_cast<double>(sample);
  const int max_depth = static_cast<int>(std::ceil(std::log2(std::max<size_t>(2, sample))));
  Rng rng{options.seed};
  std::vector<size_t> all(count);
  std::iota(all.begin(), all.end(), 0);
  struct Work {
    int32_t node;
    size_t begin, end;
    int depth;
  };
  std::vector<Work> stack;
  for (int t = 0; t < options.trees; ++t) {
    // Partial Fisher-Yates: the first `sample` of `all` are this tree's rows.
    for (size_t i = 0; i < sample; ++i) std::swap(all[i], all[i + rng.Below(count - i)]);
    std::vector<size_t> idx(all.begin(), all.begin() + sample);
    forest.roots_.push_back(static_cast<int32_t>(forest.nodes_.size()));
    forest.nodes_.push_back({});
    stack.push_back({forest.roots_.back(), 0, sample, 0});
    while (!stack.empty()) {
      Work w = stack.back();
      stack.pop_back();
      // A leaf until split: its path length, the depth plus the average of its rows.
      forest.nodes_[w.node].value =
          w.depth + AveragePathLength(static_cast<double>(w.end - w.begin));
      if (w.depth >= max_depth || w.end - w.begin <= 1) continue;
      // Pick a feature that is not constant on these rows (a few tries).
      int feature = -1;
      double lo = 0, hi = 0;
      for (int attempt = 0; attempt < dims && feature < 0; ++attempt) {
        const int f = static_cast<int>(rng.Below(dims));
        lo = hi = rows[idx[w.begin] * dims + f];
        for (size_t i = w.begin; i < w.end; ++i) {
          lo = std::min(lo, rows[idx[i] * dims + f]);
          hi = std::max(hi, rows[idx[i] * dims + f]);
        }
        if (hi > lo) feature = f;
      }
      if (feature < 0) continue;
      const double split = lo + rng.Uniform() * (hi - lo);
      auto mid = std::partition(idx.begin() + w.begin, idx.begin() + w.end,
                                [&](size_t r) { return rows[r * dims + feature] < split; });
      const size_t m = static_cast<size_t>(mid - idx.begin());
      const int32_t left = static_cast<int32_t>(forest.nodes_.size());
      forest.nodes_.push_back({});
      forest.nodes_.push_back({});
      Node& parent = forest.nodes_[w.node];  // re-fetch: push_back may reallocate
      parent.feature = feature;
      parent.value = split;
      parent.left = left;
      stack.push_back({left, w.begin, m, w.depth + 1});
      stack.push_back({left + 1, m, w.end, w.depth + 1});
    }
  }
  return forest;
}

double IsolationForest::Score(const double* row) const {
  double score = 0.0;
  ScoreRows(row, 1, &score);
  return score;
}

void IsolationForest::ScoreRows(const double* rows, size_t count, double* scores) const {
  if (roots_.empty()) {
    std::fill(scores, scores + count, 0.5);
    return;
  }
  std::fill(scores, scores + count, 0.0);  // path lengths summed tree by tree first
  const auto dims = static_cast<size_t>(dims_);
  constexpr size_t kLanes = 8;  // rows walked down a tree together: independent loads overlap
  for (int32_t root : roots_) {
    for (size_t first = 0; first < count; first += kLanes) {
      const size_t lanes = std::min(kLanes, count - first);
      std::array<const Node*, kLanes> at;
      at.fill(&nodes_[root]);
      for (bool moved = true; moved;) {
        moved = false;
        for (size_t l = 0; l < lanes; ++l) {
          const Node* node = at[l];
          if (node->feature < 0) continue;
          const double value = rows[(first + l) * dims + static_cast<size_t>(node->feature)];
          at[l] = &nodes_[node->left + (value < node->value ? 0 : 1)];
          moved = true;
        }
      }
      for (size_t l = 0; l < lanes; ++l) scores[first + l] += at[l]->value;
    }
  }
  const double c = AveragePathLength(sample_size_);
  for (size_t r = 0; r < count; ++r) {
    const double mean = scores[r] / static_cast<double>(roots_.size());
    scores[r] = c > 0.0 ? std::pow(2.0, -mean / c) : 0.5;
  }
}

}  // namespace teller::localize
