// Random Forest comparison method (cv::ml::RTrees, classification): class probabilities
// are the trees' vote shares.
#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>

#include <opencv2/ml.hpp>

#include "comparisons/learners.h"
#include "comparisons/opencv_adapter.h"

namespace teller::comparisons {
namespace {

class RandomForestMethod final : public ComparisonMethod {
 public:
  explicit RandomForestMethod(const MethodOptions& options) : ComparisonMethod(options) {}
  MethodId id() const override { return MethodId::kRandomForest; }
  MethodKind kind() const override { return MethodKind::kSupervised; }

 protected:
  base::Status FitSupervised(const Matrix& x, std::span<const int32_t> class_index,
                             int class_count) override {
    const RandomForestOptions& settings = options().random_forest;
    if (settings.trees < 1 || settings.max_depth < 1 || settings.min_sample_count < 1 ||
        settings.active_features < 0) {
      return base::InvalidArgument(
          "random_forest: trees, max_depth and min_sample_count must be >= 1, "
          "active_features >= 0");
    }
    class_count_ = class_count;
    cv::Mat responses(static_cast<int>(x.rows), 1, CV_32S);
    for (int64_t r = 0; r < x.rows; ++r)
      responses.at<int32_t>(static_cast<int>(r)) = class_index[r];
    return internal::CallOpenCv("random_forest", [&] {
      internal::SeedOpenCv(options().seed);
      model_ = cv::ml::RTrees::create();
      model_->setMaxDepth(settings.max_depth);
      model_->setMinSampleCount(settings.min_sample_count);
      model_->setActiveVarCount(settings.active_features);  // 0: sqrt(cols)
      model_->setCalculateVarImportance(false);
      model_->setUseSurrogates(false);
      model_->setCVFolds(0);
      model_->setRegressionAccuracy(0.0f);
      model_->setTermCriteria(cv::TermCriteria(cv::TermCriteria::COUNT, settings.trees, 0.0));
      cv::Ptr<cv::ml::TrainData> data =
          cv::ml::TrainData::create(internal::AsCvMat(x), cv::ml::ROW_SAMPLE, responses);
      if (!model_->train(data)) throw std::runtime_error("training returned false");
    });
  }

  base::StatusOr<Matrix> Probabilities(const Matrix& x) const override {
    Matrix probabilities = Matrix::Zeros(x.rows, class_count_);
    TELLER_RETURN_IF_ERROR(internal::CallOpenCv("random_forest: predict", [&] {
      cv::Mat votes;  // row 0: the class labels; then one row of vote counts per
                      // sample
      model_->getVotes(internal::AsCvMat(x), votes, 0);
      if (votes.rows != x.rows + 1) throw std::runtime_error("unexpected vote matrix shape");
      for (int r = 0; r < static_cast<int>(x.rows); ++r) {
        double total = 0.0;
        for (int c = 0; c < votes.cols; ++c) total += votes.at<int32_t>(r + 1, c);
        for (int c = 0; c < votes.cols; ++c) {
          const int32_t label = votes.at<int32_t>(0, c);
          if (label < 0 || label >= class_count_)
            throw std::runtime_error("vote for an unknown class");
          probabilities.at(r, label) =
              total > 0 ? static_cast<float>(votes.at<int32_t>(r + 1, c) / total) : 0.0f;
        }
      }
    }));
    return probabilities;
  }

 private:
  int class_count_ = 0;
  cv::Ptr<cv::ml::RTrees> model_;
};

}  // namespace

namespace internal {
std::unique_ptr<ComparisonMethod> MakeRandomForestMethod(const MethodOptions& options) {
  return std::make_unique<RandomForestMethod>(options);
}
}  // namespace internal

}  // namespace teller::comparisons
