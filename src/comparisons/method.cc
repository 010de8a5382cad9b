#include "comparisons/method.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "comparisons/learners.h"

namespace teller::comparisons {
namespace {

constexpr std::array<MethodId, 7> kAllIds = {
    MethodId::kKMeans, MethodId::kDbscan,       MethodId::kIsolationForest, MethodId::kGmm,
    MethodId::kSvm,    MethodId::kRandomForest, MethodId::kXgboost};

}  // namespace

std::string_view MethodName(MethodId id) {
  switch (id) {
    case MethodId::kKMeans:
      return "kmeans";
    case MethodId::kDbscan:
      return "dbscan";
    case MethodId::kIsolationForest:
      return "isolation_forest";
    case MethodId::kGmm:
      return "gmm";
    case MethodId::kSvm:
      return "svm";
    case MethodId::kRandomForest:
      return "random_forest";
    case MethodId::kXgboost:
      return "xgboost";
  }
  return "unknown";
}

std::optional<MethodId> ParseMethodId(std::string_view name) {
  for (MethodId id : kAllIds) {
    if (MethodName(id) == name) return id;
  }
  return std::nullopt;
}

MethodKind KindOf(MethodId id) {
  switch (id) {
    case MethodId::kSvm:
    case MethodId::kRandomForest:
    case MethodId::kXgboost:
      return MethodKind::kSupervised;
    default:
      return MethodKind::kUnsupervised;
  }
}

bool IsAvailable(MethodId id) {
  switch (id) {
    case MethodId::kDbscan:
    case MethodId::kIsolationForest:
      return true;
    case MethodId::kKMeans:
    case MethodId::kGmm:
    case MethodId::kSvm:
    case MethodId::kRandomForest:
#ifdef TELLER_COMPARISONS_OPENCV
      return true;
#else
      return false;
#endif
    case MethodId::kXgboost:
#ifdef TELLER_COMPARISONS_XGBOOST
      return true;
#else
      return false;
#endif
  }
  return false;
}

std::vector<MethodId> AvailableMethods() {
  std::vector<MethodId> ids;
  for (MethodId id : kAllIds) {
    if (IsAvailable(id)) ids.push_back(id);
  }
  return ids;
}

base::StatusOr<std::unique_ptr<ComparisonMethod>> MakeMethod(MethodId id,
                                                             const MethodOptions& options) {
  std::unique_ptr<ComparisonMethod> learner;
  switch (id) {
    case MethodId::kDbscan:
      learner = internal::MakeDbscanMethod(options);
      break;
    case MethodId::kIsolationForest:
      learner = internal::MakeIsolationForestMethod(options);
      break;
#ifdef TELLER_COMPARISONS_OPENCV
    case MethodId::kKMeans:
      learner = internal::MakeKMeansMethod(options);
      break;
    case MethodId::kGmm:
      learner = internal::MakeGmmMethod(options);
      break;
    case MethodId::kSvm:
      learner = internal::MakeSvmMethod(options);
      break;
    case MethodId::kRandomForest:
      learner = internal::MakeRandomForestMethod(options);
      break;
#endif
#ifdef TELLER_COMPARISONS_XGBOOST
    case MethodId::kXgboost:
      learner = internal::MakeXgboostMethod(options);
      break;
#endif
    default:
      break;
  }
  if (learner == nullptr) {
    return base::Unimplemented(
        "comparison method {}: its library ({}) was not found when teller was built",
        MethodName(id), id == MethodId::kXgboost ? "libxgboost-dev" : "libopencv-ml-dev");
  }
  return learner;
}

float Quantile(std::vector<float> values, double q) {
  if (values.empty()) return 0.0f;
  std::sort(values.begin(), values.end());
  const double position = std::clamp(q, 0.0, 1.0) * static_cast<double>(values.size() - 1);
  const size_t below = static_cast<size_t>(std::floor(position));
  const size_t above = std::min(values.size() - 1, below + 1);
  const double fraction = position - static_cast<double>(below);
  return static_cast<float>(values[below] + fraction * (values[above] - values[below]));
}

std::string_view ComparisonMethod::name() const { return MethodName(id()); }

base::StatusOr<Matrix> ComparisonMethod::Prepare(const Matrix& x) const {
  const std::string what = fmt::format("{}: input", name());
  if (!fitted_) return base::InvalidArgument("{}: not fitted; call Fit first", name());
  TELLER_RETURN_IF_ERROR(ValidateMatrix(x, what));
  if (x.cols != standardizer_.cols()) {
    return base::InvalidArgument("{}: expected {} columns (as in training), got {}", name(),
                                 standardizer_.cols(), x.cols);
  }
  return standardizer_.Apply(x);
}

base::Status ComparisonMethod::Fit(const Matrix& x, std::span<const int32_t> y) {
  fitted_ = false;
  const std::string what = fmt::format("{}: training matrix", name());
  TELLER_RETURN_IF_ERROR(ValidateMatrix(x, what));
  const bool supervised = kind() == MethodKind::kSupervised;
  if ((supervised || !y.empty()) && static_cast<int64_t>(y.size()) != x.rows) {
    return base::InvalidArgument("{}: expected {} labels (one per training row), got {}", name(),
                                 x.rows, y.size());
  }
  standardizer_ = options_.standardize ? Standardizer::Fit(x) : Standardizer::Identity(x.cols);
  TELLER_ASSIGN_OR_RETURN(Matrix z, standardizer_.Apply(x));

  if (supervised) {
    classes_.assign(y.begin(), y.end());
    std::sort(classes_.begin(), classes_.end());
    classes_.erase(std::unique(classes_.begin(), classes_.end()), classes_.end());
    if (classes_.size() < 2) {
      return base::InvalidArgument(
          "{}: training labels hold a single class "
          "({}); a classifier needs at least two",
          name(), classes_.front());
    }
    std::vector<int32_t> index(y.size());
    for (size_t i = 0; i < y.size(); ++i) {
      index[i] = static_cast<int32_t>(std::lower_bound(classes_.begin(), classes_.end(), y[i]) -
                                      classes_.begin());
    }
    TELLER_RETURN_IF_ERROR(FitSupervised(z, index, static_cast<int>(classes_.size()))
                               .WithContext(fmt::format("{}: fit", name())));
    threshold_ = 0.0f;
    fitted_ = true;
    return base::OkStatus();
  }

  classes_ = {0, 1};
  contamination_ = options_.contamination;
  if (contamination_ <= 0.0) {
    if (y.empty()) {
      contamination_ = kDefaultContamination;
    } else {
      const auto anomalies = std::count_if(y.begin(), y.end(), [](int32_t v) { return v != 0; });
      contamination_ =
          std::clamp(static_cast<double>(anomalies) / static_cast<double>(y.size()), 0.001, 0.5);
    }
  }
  contamination_ = std::min(contamination_, 1.0);
  TELLER_RETURN_IF_ERROR(FitUnsupervised(z).WithContext(fmt::format("{}: fit", name())));
  if (std::optional<float> fixed = FixedThreshold()) {
    threshold_ = *fixed;
  } else {
    base::StatusOr<std::vector<float>> train_scores = AnomalyScores(z);
    if (!train_scores.ok())
      return train_scores.status().WithContext(fmt::format("{}: fit", name()));
    threshold_ = Quantile(std::move(*train_scores), 1.0 - contamination_);
  }
  fitted_ = true;
  return base::OkStatus();
}

base::StatusOr<std::vector<float>> ComparisonMethod::Score(const Matrix& x) const {
  TELLER_ASSIGN_OR_RETURN(Matrix z, Prepare(x));
  if (kind() == MethodKind::kUnsupervised) return AnomalyScores(z);
  TELLER_ASSIGN_OR_RETURN(Matrix probabilities, Probabilities(z));
  std::vector<float> scores(static_cast<size_t>(z.rows), 1.0f);
  if (classes_.front() == 0) {  // ascending: class 0, when present, is column 0
    for (int64_t r = 0; r < z.rows; ++r) scores[r] = 1.0f - probabilities.at(r, 0);
  }
  return scores;
}

base::StatusOr<std::vector<int32_t>> ComparisonMethod::Predict(const Matrix& x) const {
  TELLER_ASSIGN_OR_RETURN(Matrix z, Prepare(x));
  std::vector<int32_t> labels(static_cast<size_t>(z.rows), 0);
  if (kind() == MethodKind::kUnsupervised) {
    TELLER_ASSIGN_OR_RETURN(std::vector<float> scores, AnomalyScores(z));
    for (size_t r = 0; r < scores.size(); ++r) labels[r] = scores[r] > threshold_ ? 1 : 0;
    return labels;
  }
  TELLER_ASSIGN_OR_RETURN(Matrix probabilities, Probabilities(z));
  for (int64_t r = 0; r < z.rows; ++r) {
    const std::span<const float> row = probabilities.Row(r);
    labels[r] = classes_[std::max_element(row.begin(), row.end()) - row.begin()];
  }
  return labels;
}

base::StatusOr<Matrix> ComparisonMethod::ClassProbabilities(const Matrix& x) const {
  if (kind() != MethodKind::kSupervised) {
    return base::InvalidArgument(
        "{}: an unsupervised learner has no class probabilities; use Score", name());
  }
  TELLER_ASSIGN_OR_RETURN(Matrix z, Prepare(x));
  return Probabilities(z);
}

}  // namespace teller::comparisons
