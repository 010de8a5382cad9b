// XGBoost comparison method through the C API (xgboost/c_api.h): gradient-boosted trees,
// binary:logistic for two classes and multi:softprob for more, tree_method
// hist, nthread and seed from MethodOptions. Every non-zero return code
// becomes a Status carrying XGBGetLastError().
#include <algorithm>
#include <limits>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <xgboost/c_api.h>

#include "comparisons/learners.h"

namespace teller::comparisons {
namespace {

base::Status Check(int code, std::string_view what) {
  if (code == 0) return base::OkStatus();
  return base::Internal("xgboost: {} failed: {}", what, XGBGetLastError());
}

struct DMatrixDeleter {
  void operator()(void* handle) const { XGDMatrixFree(handle); }
};
struct BoosterDeleter {
  void operator()(void* handle) const { XGBoosterFree(handle); }
};
using DMatrix = std::unique_ptr<void, DMatrixDeleter>;
using Booster = std::unique_ptr<void, BoosterDeleter>;

base::StatusOr<DMatrix> MakeDMatrix(const Matrix& x) {
  DMatrixHandle handle = nullptr;
  TELLER_RETURN_IF_ERROR(
      Check(XGDMatrixCreateFromMat(x.values.data(), static_cast<bst_ulong>(x.rows),
                                   static_cast<bst_ulong>(x.cols),
                                   std::numeric_limits<float>::quiet_NaN(), &handle),
            "creating a DMatrix"));
  return DMatrix(handle);
}

class XgboostMethod final : public ComparisonMethod {
 public:
  explicit XgboostMethod(const MethodOptions& options) : ComparisonMethod(options) {}
  MethodId id() const override { return MethodId::kXgboost; }
  MethodKind kind() const override { return MethodKind::kSupervised; }

 protected:
  base::Status FitSupervised(const Matrix& x, std::span<const int32_t> class_index,
                             int class_count) override {
    const XgboostOptions& settings = options().xgboost;
    if (settings.rounds < 1 || settings.max_depth < 1 || settings.learning_rate <= 0 ||
        settings.subsample <= 0 || settings.subsample > 1 || settings.colsample_bytree <= 0 ||
        settings.colsample_bytree > 1) {
      return base::InvalidArgument(
          "xgboost: needs rounds, max_depth >= 1, "
          "learning_rate > 0, subsample and "
          "colsample_bytree in (0, 1]");
    }
    class_count_ = class_count;
    booster_.reset();
    TELLER_ASSIGN_OR_RETURN(DMatrix train, MakeDMatrix(x));
    std::vector<float> labels(class_index.begin(), class_index.end());
    TELLER_RETURN_IF_ERROR(Check(XGDMatrixSetFloatInfo(train.get(), "label", labels.data(),
                                                       static_cast<bst_ulong>(labels.size())),
                                 "setting labels"));
    DMatrixHandle handles[] = {train.get()};
    BoosterHandle handle = nullptr;
    TELLER_RETURN_IF_ERROR(Check(XGBoosterCreate(handles, 1, &handle), "creating a booster"));
    Booster booster(handle);
    const std::vector<std::pair<std::string, std::string>> params = {
        {"verbosity", "0"},
        {"objective", class_count == 2 ? "binary:logistic" : "multi:softprob"},
        {"num_class", class_count == 2 ? "1" : std::to_string(class_count)},
        {"tree_method", "hist"},
        {"max_depth", std::to_string(settings.max_depth)},
        {"eta", fmt::format("{}", settings.learning_rate)},
        {"subsample", fmt::format("{}", settings.subsample)},
        {"colsample_bytree", fmt::format("{}", settings.colsample_bytree)},
        {"nthread", std::to_string(std::max(1, options().threads))},
        {"seed", std::to_string(options().seed)},
    };
    for (const auto& [name, value] : params) {
      if (name == "num_class" && class_count == 2) continue;
      TELLER_RETURN_IF_ERROR(Check(XGBoosterSetParam(booster.get(), name.c_str(), value.c_str()),
                                   fmt::format("setting {}={}", name, value)));
    }
    for (int round = 0; round < settings.rounds; ++round) {
      TELLER_RETURN_IF_ERROR(Check(XGBoosterUpdateOneIter(booster.get(), round, train.get()),
                                   fmt::format("boosting round {}", round)));
    }
    booster_ = std::move(booster);
    return base::OkStatus();
  }

  base::StatusOr<Matrix> Probabilities(const Matrix& x) const override {
    TELLER_ASSIGN_OR_RETURN(DMatrix data, MakeDMatrix(x));
    bst_ulong length = 0;
    const float* result = nullptr;
    TELLER_RETURN_IF_ERROR(Check(
        XGBoosterPredict(booster_.get(), data.get(), 0, 0, 0, &length, &result), "predicting"));
    const bst_ulong per_row = class_count_ == 2 ? 1 : static_cast<bst_ulong>(class_count_);
    if (length != static_cast<bst_ulong>(x.rows) * per_row) {
      return base::Internal("xgboost: expected {} predictions, got {}",
                            static_cast<bst_ulong>(x.rows) * per_row, length);
    }
    Matrix probabilities = Matrix::Zeros(x.rows, class_count_);
    for (int64_t r = 0; r < x.rows; ++r) {
      if (class_count_ == 2) {
        probabilities.at(r, 0) = 1.0f - result[r];
        probabilities.at(r, 1) = result[r];
      } else {
        for (int64_t c = 0; c < class_count_; ++c)
          probabilities.at(r, c) = result[r * class_count_ + c];
      }
    }
    return probabilities;
  }

 private:
  int class_count_ = 0;
  Booster booster_;
};

}  // namespace

namespace internal {
std::unique_ptr<ComparisonMethod> MakeXgboostMethod(const MethodOptions& options) {
  return std::make_unique<XgboostMethod>(options);
}
}  // namespace internal

}  // namespace teller::comparisons
