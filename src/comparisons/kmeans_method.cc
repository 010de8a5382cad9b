// KMeans comparison method (cv::kmeans, k-means++ seeding): the anomaly score of a row
// is its Euclidean distance to the nearest centroid learned on the training
// rows.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "comparisons/learners.h"
#include "comparisons/opencv_adapter.h"

namespace teller::comparisons {
namespace {

class KMeansMethod final : public ComparisonMethod {
 public:
  explicit KMeansMethod(const MethodOptions& options) : ComparisonMethod(options) {}
  MethodId id() const override { return MethodId::kKMeans; }
  MethodKind kind() const override { return MethodKind::kUnsupervised; }

 protected:
  base::Status FitUnsupervised(const Matrix& x) override {
    const KMeansOptions& settings = options().kmeans;
    if (settings.clusters < 1 || settings.attempts < 1 || settings.max_iterations < 1) {
      return base::InvalidArgument("kmeans: clusters, attempts and max_iterations must be >= 1");
    }
    const int k = static_cast<int>(std::min<int64_t>(settings.clusters, x.rows));
    cv::Mat centers;
    TELLER_RETURN_IF_ERROR(internal::CallOpenCv("kmeans", [&] {
      internal::SeedOpenCv(options().seed);
      cv::Mat labels;
      cv::kmeans(internal::AsCvMat(x), k, labels,
                 cv::TermCriteria(cv::TermCriteria::COUNT + cv::TermCriteria::EPS,
                                  settings.max_iterations, 1e-6),
                 settings.attempts, cv::KMEANS_PP_CENTERS, centers);
    }));
    centers_ = Matrix::Zeros(centers.rows, centers.cols);
    for (int r = 0; r < centers.rows; ++r) {
      for (int c = 0; c < centers.cols; ++c) centers_.at(r, c) = centers.at<float>(r, c);
    }
    return base::OkStatus();
  }

  base::StatusOr<std::vector<float>> AnomalyScores(const Matrix& x) const override {
    std::vector<float> scores(static_cast<size_t>(x.rows));
    for (int64_t r = 0; r < x.rows; ++r) {
      double best = std::numeric_limits<double>::max();
      for (int64_t k = 0; k < centers_.rows; ++k) {
        double sum = 0.0;
        for (int64_t c = 0; c < x.cols; ++c) {
          const double d = x.at(r, c) - centers_.at(k, c);
          sum += d * d;
        }
        best = std::min(best, sum);
      }
      scores[r] = static_cast<float>(std::sqrt(best));
    }
    return scores;
  }

 private:
  Matrix centers_;
};

}  // namespace

namespace internal {
std::unique_ptr<ComparisonMethod> MakeKMeansMethod(const MethodOptions& options) {
  return std::make_unique<KMeansMethod>(options);
}
}  // namespace internal

}  // namespace teller::comparisons
