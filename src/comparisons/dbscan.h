// DBSCAN (Ester, Kriegel, Sander and Xu, 1996) by brute force over dense rows:
// no Debian package provides it. O(n^2 * cols) time, O(n) memory.
#pragma once

#include <cstdint>
#include <vector>

#include "comparisons/matrix.h"

namespace teller::comparisons {

struct DbscanClusters {
  std::vector<int32_t> cluster;  // per row: cluster id from 0 in discovery order, -1 noise
  std::vector<bool> core;        // per row: at least min_points rows (itself included) within eps
  int32_t cluster_count = 0;
};

// Euclidean distance; a row is within eps of another when the distance is <=
// eps. A border row joins the first cluster (in row order of its core seeds)
// that reaches it.
DbscanClusters ClusterDbscan(const Matrix& x, double eps, int min_points);

// Per row, the distance to its k-th nearest other row (k >= 1; the largest
// distance when fewer than k other rows). DBSCAN's usual guide to eps, with k =
// min_points - 1.
std::vector<float> KthNeighbourDistance(const Matrix& x, int k);

}  // namespace teller::comparisons
