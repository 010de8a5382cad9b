// SVM comparison method (cv::ml::SVM, C-SVC with an RBF kernel). Two classes: one SVM;
// more: one SVM per class against the rest. Each SVM's decision value becomes a
// probability by Platt scaling fitted on the training rows; one-vs-rest
// probabilities are normalized to sum to 1.
#include <algorithm>
#include <memory>
#include <stdexcept>

#include <opencv2/ml.hpp>

#include "base/platt_scaling.h"
#include "comparisons/learners.h"
#include "comparisons/opencv_adapter.h"

namespace teller::comparisons {
namespace {

class SvmMethod final : public ComparisonMethod {
 public:
  explicit SvmMethod(const MethodOptions& options) : ComparisonMethod(options) {}
  MethodId id() const override { return MethodId::kSvm; }
  MethodKind kind() const override { return MethodKind::kSupervised; }

 protected:
  base::Status FitSupervised(const Matrix& x, std::span<const int32_t> class_index,
                             int class_count) override {
    const SvmOptions& settings = options().svm;
    if (settings.c <= 0 || settings.max_iterations < 1) {
      return base::InvalidArgument("svm: c must be > 0 and max_iterations >= 1");
    }
    const double gamma = settings.gamma > 0 ? settings.gamma : 1.0 / static_cast<double>(x.cols);
    class_count_ = class_count;
    machines_.clear();
    calibrations_.clear();
    // Two classes: one machine for class 1 against class 0.
    const int machines = class_count == 2 ? 1 : class_count;
    for (int m = 0; m < machines; ++m) {
      const int positive_class = class_count == 2 ? 1 : m;
      cv::Mat responses(static_cast<int>(x.rows), 1, CV_32S);
      std::vector<bool> positive(static_cast<size_t>(x.rows));
      for (int64_t r = 0; r < x.rows; ++r) {
        positive[r] = class_index[r] == positive_class;
        responses.at<int32_t>(static_cast<int>(r)) = positive[r] ? 1 : 0;
      }
      cv::Ptr<cv::ml::SVM> machine;
      std::vector<double> decision;
      TELLER_RETURN_IF_ERROR(internal::CallOpenCv("svm", [&] {
        machine = cv::ml::SVM::create();
        machine->setType(cv::ml::SVM::C_SVC);
        machine->setKernel(cv::ml::SVM::RBF);
        machine->setC(settings.c);
        machine->setGamma(gamma);
        machine->setTermCriteria(cv::TermCriteria(cv::TermCriteria::COUNT + cv::TermCriteria::EPS,
                                                  settings.max_iterations, 1e-6));
        if (!machine->train(internal::AsCvMat(x), cv::ml::ROW_SAMPLE, responses)) {
          throw std::runtime_error("training returned false");
        }
        decision = DecisionValues(*machine, x);
      }));
      machines_.push_back(machine);
      calibrations_.push_back(
          base::PlattScaler::Fit(decision, positive, base::PlattScaler::Solver::kLineSearch));
    }
    return base::OkStatus();
  }

  base::StatusOr<Matrix> Probabilities(const Matrix& x) const override {
    Matrix probabilities = Matrix::Zeros(x.rows, class_count_);
    for (size_t m = 0; m < machines_.size(); ++m) {
      std::vector<double> decision;
      TELLER_RETURN_IF_ERROR(internal::CallOpenCv(
          "svm: predict", [&] { decision = DecisionValues(*machines_[m], x); }));
      for (int64_t r = 0; r < x.rows; ++r) {
        const float p = static_cast<float>(calibrations_[m].Probability(decision[r]));
        if (class_count_ == 2) {
          probabilities.at(r, 0) = 1.0f - p;
          probabilities.at(r, 1) = p;
        } else {
          probabilities.at(r, static_cast<int64_t>(m)) = p;
        }
      }
    }
    if (class_count_ > 2) {
      for (int64_t r = 0; r < x.rows; ++r) {
        float sum = 0.0f;
        for (int64_t c = 0; c < class_count_; ++c) sum += probabilities.at(r, c);
        for (int64_t c = 0; c < class_count_; ++c) {
          probabilities.at(r, c) = sum > 0 ? probabilities.at(r, c) / sum : 1.0f / class_count_;
        }
      }
    }
    return probabilities;
  }

 private:
  static std::vector<double> DecisionValues(const cv::ml::SVM& machine, const Matrix& x) {
    cv::Mat raw;
    machine.predict(internal::AsCvMat(x), raw, cv::ml::StatModel::RAW_OUTPUT);
    std::vector<double> decision(static_cast<size_t>(x.rows));
    for (int r = 0; r < raw.rows; ++r) decision[r] = raw.at<float>(r, 0);
    return decision;
  }

  int class_count_ = 0;
  std::vector<cv::Ptr<cv::ml::SVM>> machines_;
  std::vector<base::PlattScaler> calibrations_;
};

}  // namespace

namespace internal {
std::unique_ptr<ComparisonMethod> MakeSvmMethod(const MethodOptions& options) {
  return std::make_unique<SvmMethod>(options);
}
}  // namespace internal

}  // namespace teller::comparisons
