// GMM comparison method (cv::ml::EM, diagonal covariances, k-means initialization): the
// anomaly score of a row is its negative log-likelihood under the fitted
// mixture.
#include <algorithm>
#include <limits>
#include <memory>
#include <stdexcept>

#include <opencv2/ml.hpp>

#include "comparisons/learners.h"
#include "comparisons/opencv_adapter.h"

namespace teller::comparisons {
namespace {

class GmmMethod final : public ComparisonMethod {
 public:
  explicit GmmMethod(const MethodOptions& options) : ComparisonMethod(options) {}
  MethodId id() const override { return MethodId::kGmm; }
  MethodKind kind() const override { return MethodKind::kUnsupervised; }

 protected:
  base::Status FitUnsupervised(const Matrix& x) override {
    const GmmOptions& settings = options().gmm;
    if (settings.components < 1 || settings.max_iterations < 1) {
      return base::InvalidArgument("gmm: components and max_iterations must be >= 1");
    }
    if (x.rows < 2)
      return base::InvalidArgument("gmm: needs at least 2 training rows, got {}", x.rows);
    const int k = static_cast<int>(std::min<int64_t>(settings.components, x.rows - 1));
    return internal::CallOpenCv("gmm", [&] {
      internal::SeedOpenCv(options().seed);
      model_ = cv::ml::EM::create();
      model_->setClustersNumber(k);
      model_->setCovarianceMatrixType(cv::ml::EM::COV_MAT_DIAGONAL);
      model_->setTermCriteria(cv::TermCriteria(cv::TermCriteria::COUNT + cv::TermCriteria::EPS,
                                               settings.max_iterations, 1e-6));
      cv::Mat samples;
      internal::AsCvMat(x).convertTo(samples, CV_64F);
      if (!model_->trainEM(samples)) throw std::runtime_error("EM did not converge to a model");
    });
  }

  base::StatusOr<std::vector<float>> AnomalyScores(const Matrix& x) const override {
    std::vector<float> scores(static_cast<size_t>(x.rows));
    TELLER_RETURN_IF_ERROR(internal::CallOpenCv("gmm: score", [&] {
      cv::Mat samples;
      internal::AsCvMat(x).convertTo(samples, CV_64F);
      for (int r = 0; r < samples.rows; ++r) {
        const cv::Vec2d result = model_->predict2(samples.row(r), cv::noArray());
        scores[r] =
            static_cast<float>(std::min<double>(-result[0], std::numeric_limits<float>::max()));
      }
    }));
    return scores;
  }

 private:
  cv::Ptr<cv::ml::EM> model_;
};

}  // namespace

namespace internal {
std::unique_ptr<ComparisonMethod> MakeGmmMethod(const MethodOptions& options) {
  return std::make_unique<GmmMethod>(options);
}
}  // namespace internal

}  // namespace teller::comparisons
