#include "baselines/baseline.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "baselines/learners.h"

namespace teller::baselines {
namespace {

constexpr std::array<BaselineId, 7> kAllIds = {
    BaselineId::kKMeans, BaselineId::kDbscan,       BaselineId::kIsolationForest, BaselineId::kGmm,
    BaselineId::kSvm,    BaselineId::kRandomForest, BaselineId::kXgboost};

}  // namespace

std::string_view BaselineName(BaselineId id) {
  switch (id) {
    case BaselineId::kKMeans:
      return "kmeans";
    case BaselineId::kDbscan:
      return "dbscan";
    case BaselineId::kIsolationForest:
      return "isolation_forest";
    case BaselineId::kGmm:
      return "gmm";
    case BaselineId::kSvm:
      return "svm";
    case BaselineId::kRandomForest:
      return "random_forest";
    case BaselineId::kXgboost:
      return "xgboost";
  }
  return "unknown";
}

std::optional<BaselineId> ParseBaselineId(std::string_view name) {
  for (BaselineId id : kAllIds) {
    if (BaselineName(id) == name) return id;
  }
  return std::nullopt;
}

BaselineKind KindOf(BaselineId id) {
  switch (id) {
    case BaselineId::kSvm:
    case BaselineId::kRandomForest:
    case BaselineId::kXgboost:
      return BaselineKind::kSupervised;
    default:
      return BaselineKind::kUnsupervised;
  }
}

bool IsAvailable(BaselineId id) {
  switch (id) {
    case BaselineId::kDbscan:
    case BaselineId::kIsolationForest:
      return true;
    case BaselineId::kKMeans:
    case BaselineId::kGmm:
    case BaselineId::kSvm:
    case BaselineId::kRandomForest:
#ifdef TELLER_BASELINES_OPENCV
      return true;
#else
      return false;
#endif
    case BaselineId::kXgboost:
#ifdef TELLER_BASELINES_XGBOOST
      return true;
#else
      return false;
#endif
  }
  return false;
}

std::vector<BaselineId> AvailableBaselines() {
  std::vector<BaselineId> ids;
  for (BaselineId id : kAllIds) {
    if (IsAvailable(id)) ids.push_back(id);
  }
  return ids;
}

base::StatusOr<std::unique_ptr<Baseline>> MakeBaseline(BaselineId id,
                                                       const BaselineOptions& options) {
  std::unique_ptr<Baseline> learner;
  switch (id) {
    case BaselineId::kDbscan:
      learner = internal::MakeDbscanBaseline(options);
      break;
    case BaselineId::kIsolationForest:
      learner = internal::MakeIsolationForestBaseline(options);
      break;
#ifdef TELLER_BASELINES_OPENCV
    case BaselineId::kKMeans:
      learner = internal::MakeKMeansBaseline(options);
      break;
    case BaselineId::kGmm:
      learner = internal::MakeGmmBaseline(options);
      break;
    case BaselineId::kSvm:
      learner = internal::MakeSvmBaseline(options);
      break;
    case BaselineId::kRandomForest:
      learner = internal::MakeRandomForestBaseline(options);
      break;
#endif
#ifdef TELLER_BASELINES_XGBOOST
    case BaselineId::kXgboost:
      learner = internal::MakeXgboostBaseline(options);
      break;
#endif
    default:
      break;
  }
  if (learner == nullptr) {
    return base::Unimplemented("baseline {}: its library ({}) was not found when teller was built",
                               BaselineName(id),
                               id == BaselineId::kXgboost ? "libxgboost-dev" : "libopencv-ml-dev");
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

std::string_view Baseline::name() const { return BaselineName(id()); }

base::StatusOr<Matrix> Baseline::Prepare(const Matrix& x) const {
  const std::string what = fmt::format("{}: input", name());
  if (!fitted_) return base::InvalidArgument("{}: not fitted; call Fit first", name());
  TELLER_RETURN_IF_ERROR(ValidateMatrix(x, what));
  if (x.cols != standardizer_.cols()) {
    return base::InvalidArgument("{}: expected {} columns (as in training), got {}", name(),
                                 standardizer_.cols(), x.cols);
  }
  return standardizer_.Apply(x);
}

base::Status Baseline::Fit(const Matrix& x, std::span<const int32_t> y) {
  fitted_ = false;
  const std::string what = fmt::format("{}: training matrix", name());
  TELLER_RETURN_IF_ERROR(ValidateMatrix(x, what));
  const bool supervised = kind() == BaselineKind::kSupervised;
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

base::StatusOr<std::vector<float>> Baseline::Score(const Matrix& x) const {
  TELLER_ASSIGN_OR_RETURN(Matrix z, Prepare(x));
  if (kind() == BaselineKind::kUnsupervised) return AnomalyScores(z);
  TELLER_ASSIGN_OR_RETURN(Matrix probabilities, Probabilities(z));
  std::vector<float> scores(static_cast<size_t>(z.rows), 1.0f);
  if (classes_.front() == 0) {  // ascending: class 0, when present, is column 0
    for (int64_t r = 0; r < z.rows; ++r) scores[r] = 1.0f - probabilities.at(r, 0);
  }
  return scores;
}

base::StatusOr<std::vector<int32_t>> Baseline::Predict(const Matrix& x) const {
  TELLER_ASSIGN_OR_RETURN(Matrix z, Prepare(x));
  std::vector<int32_t> labels(static_cast<size_t>(z.rows), 0);
  if (kind() == BaselineKind::kUnsupervised) {
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

base::StatusOr<Matrix> Baseline::ClassProbabilities(const Matrix& x) const {
  if (kind() != BaselineKind::kSupervised) {
    return base::InvalidArgument(
        "{}: an unsupervised learner has no class probabilities; use Score", name());
  }
  TELLER_ASSIGN_OR_RETURN(Matrix z, Prepare(x));
  return Probabilities(z);
}

}  // namespace teller::baselines
