#include "comparisons/dbscan.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>

#include "comparisons/learners.h"

namespace teller::comparisons {
namespace {

float SquaredDistance(std::span<const float> a, std::span<const float> b) {
  float sum = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) {
    const float d = a[i] - b[i];
    sum += d * d;
  }
  return sum;
}

void Neighbours(const Matrix& x, int64_t row, float eps_squared, std::vector<int64_t>* out) {
  out->clear();
  const std::span<const float> point = x.Row(row);
  for (int64_t other = 0; other < x.rows; ++other) {
    if (SquaredDistance(point, x.Row(other)) <= eps_squared) out->push_back(other);
  }
}

// splitmix64, as in localize's isolation forest: portable and seeded.
uint64_t NextRandom(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Unsupervised comparison method: a row is an anomaly when no core point of the training
// rows lies within eps (exactly DBSCAN's noise on the training rows). Score:
// the distance to the nearest core point over eps, so Predict's threshold is 1.
class DbscanMethod final : public ComparisonMethod {
 public:
  explicit DbscanMethod(const MethodOptions& options) : ComparisonMethod(options) {}
  MethodId id() const override { return MethodId::kDbscan; }
  MethodKind kind() const override { return MethodKind::kUnsupervised; }

 protected:
  base::Status FitUnsupervised(const Matrix& x) override {
    const DbscanOptions& settings = options().dbscan;
    if (settings.min_points < 1) {
      return base::InvalidArgument("dbscan: min_points must be >= 1, got {}", settings.min_points);
    }
    Matrix train = Subsample(x, settings.max_train_rows);
    eps_ = settings.eps;
    if (eps_ <= 0.0) {
      // Automatic: the (1 - contamination) quantile of the distance to the
      // (min_points - 1)-th neighbour, so about that share of rows is not core.
      const int k = std::max(1, settings.min_points - 1);
      eps_ = Quantile(KthNeighbourDistance(train, k), 1.0 - contamination());
    }
    eps_ = std::max(eps_, 1e-6);
    const DbscanClusters clusters = ClusterDbscan(train, eps_, settings.min_points);
    core_ = Matrix{0, train.cols, {}};
    all_ = train;
    for (int64_t r = 0; r < train.rows; ++r) {
      if (!clusters.core[r]) continue;
      core_.values.insert(core_.values.end(), train.Row(r).begin(), train.Row(r).end());
      ++core_.rows;
    }
    return base::OkStatus();
  }

  base::StatusOr<std::vector<float>> AnomalyScores(const Matrix& x) const override {
    std::vector<float> scores(static_cast<size_t>(x.rows));
    // Without any core point every row is noise: 1 + distance to the nearest
    // training row.
    const Matrix& reference = core_.rows > 0 ? core_ : all_;
    const float offset = core_.rows > 0 ? 0.0f : 1.0f;
    for (int64_t r = 0; r < x.rows; ++r) {
      float best = std::numeric_limits<float>::max();
      for (int64_t c = 0; c < reference.rows; ++c) {
        best = std::min(best, SquaredDistance(x.Row(r), reference.Row(c)));
      }
      scores[r] = offset + static_cast<float>(std::sqrt(best) / eps_);
    }
    return scores;
  }

  std::optional<float> FixedThreshold() const override { return 1.0f; }

 private:
  Matrix Subsample(const Matrix& x, int64_t max_rows) const {
    if (max_rows <= 0 || x.rows <= max_rows) return x;
    std::vector<int64_t> order(static_cast<size_t>(x.rows));
    std::iota(order.begin(), order.end(), 0);
    uint64_t state = options().seed;
    for (int64_t i = 0; i < max_rows; ++i) {
      const int64_t j =
          i + static_cast<int64_t>(NextRandom(&state) % static_cast<uint64_t>(x.rows - i));
      std::swap(order[i], order[j]);
    }
    std::sort(order.begin(), order.begin() + max_rows);
    Matrix out{0, x.cols, {}};
    for (int64_t i = 0; i < max_rows; ++i) {
      out.values.insert(out.values.end(), x.Row(order[i]).begin(), x.Row(order[i]).end());
      ++out.rows;
    }
    return out;
  }

  double eps_ = 0.0;
  Matrix core_;
  Matrix all_;
};

}  // namespace

DbscanClusters ClusterDbscan(const Matrix& x, double eps, int min_points) {
  DbscanClusters result;
  const size_t n = static_cast<size_t>(std::max<int64_t>(0, x.rows));
  result.cluster.assign(n, -1);
  result.core.assign(n, false);
  const float eps_squared = static_cast<float>(eps * eps);
  std::vector<int64_t> neighbours;
  for (size_t r = 0; r < n; ++r) {
    Neighbours(x, static_cast<int64_t>(r), eps_squared, &neighbours);
    result.core[r] = static_cast<int64_t>(neighbours.size()) >= min_points;
  }
  std::vector<int64_t> frontier;
  for (size_t seed = 0; seed < n; ++seed) {
    if (!result.core[seed] || result.cluster[seed] >= 0) continue;
    const int32_t id = result.cluster_count++;
    result.cluster[seed] = id;
    frontier.assign(1, static_cast<int64_t>(seed));
    while (!frontier.empty()) {
      const int64_t row = frontier.back();
      frontier.pop_back();
      Neighbours(x, row, eps_squared, &neighbours);
      for (int64_t other : neighbours) {
        if (result.cluster[other] >= 0) continue;
        result.cluster[other] = id;
        if (result.core[other]) frontier.push_back(other);
      }
    }
  }
  return result;
}

std::vector<float> KthNeighbourDistance(const Matrix& x, int k) {
  const int64_t n = std::max<int64_t>(0, x.rows);
  std::vector<float> result(static_cast<size_t>(n), 0.0f);
  if (n < 2) return result;
  const int64_t rank = std::clamp<int64_t>(k, 1, n - 1) - 1;
  std::vector<float> distances;
  for (int64_t r = 0; r < n; ++r) {
    distances.clear();
    for (int64_t other = 0; other < n; ++other) {
      if (other != r) distances.push_back(SquaredDistance(x.Row(r), x.Row(other)));
    }
    std::nth_element(distances.begin(), distances.begin() + rank, distances.end());
    result[r] = std::sqrt(distances[rank]);
  }
  return result;
}

namespace internal {
std::unique_ptr<ComparisonMethod> MakeDbscanMethod(const MethodOptions& options) {
  return std::make_unique<DbscanMethod>(options);
}
}  // namespace internal

}  // namespace teller::comparisons
