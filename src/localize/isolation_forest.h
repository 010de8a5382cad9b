// Isolation forest (Liu, Ting and Zhou, 2008) over small dense feature rows:
// anomalies are isolated by fewer random axis-parallel splits. Deterministic for
// a seed (own uniform draws, not std:: distributions).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace teller::localize {

struct IsolationForestOptions {
  int trees = 100;
  int sample_size = 256;  // rows per tree (all rows when fewer)
  uint64_t seed = 1;
};

class IsolationForest {
 public:
  // rows: row-major, `dims` values each. Empty input gives a forest that scores 0.5.
  static IsolationForest Fit(const std::vector<double>& rows, int dims,
                             const IsolationForestOptions& options = {});
  // Anomaly score in (0, 1): 2^(-E[h(x)] / c(n)); ~0.5 and below is normal, near 1 anomalous.
  double Score(const double* row) const;
  // Score of each of `count` rows (row-major), tree by tree so each tree stays in cache
  // across the rows: the values Score gives, bit for bit.
  void ScoreRows(const double* rows, size_t count, double* scores) const;
  int dims() const { return dims_; }

  // Average path length of an unsuccessful BST search among n points.
  static double AveragePathLength(double n);

 private:
  // 16 bytes, so a tree's top levels share cache lines.
  struct Node {
    double value = 0.0;    // inner: the split; leaf: its path length (depth + c(rows))
    int32_t feature = -1;  // -1: leaf
    int32_t left = -1;     // the right child is left + 1
  };
  int dims_ = 0;
  double sample_size_ = 0.0;
  std::vector<Node> nodes_;
  std::vector<int32_t> roots_;
};

}  // namespace teller::localize
