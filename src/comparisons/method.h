// The classical comparison methods of the paper (section 4.3, Tables 2 and 4): KMeans,
// DBSCAN, Isolation Forest and GMM (unsupervised anomaly detectors), SVM,
// Random Forest and XGBoost (supervised classifiers), all behind one interface
// over dense matrices.
//
// Every learner standardizes its features with the training rows (matrix.h)
// unless told not to, validates shapes and values, and returns base::Status
// instead of throwing. Class ids: supervised learners accept any int32 labels
// and predict the labels seen in training; unsupervised learners predict 1
// (anomaly) or 0 (normal). Label 0 is the normal class: Score() of a supervised
// learner is 1 - P(y = 0). Defaults, thresholds and what is deterministic:
// docs/comparisons.md.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "comparisons/matrix.h"

namespace teller::comparisons {

enum class MethodKind { kUnsupervised, kSupervised };
enum class MethodId { kKMeans, kDbscan, kIsolationForest, kGmm, kSvm, kRandomForest, kXgboost };

struct KMeansOptions {
  int clusters = 8;  // clamped to the training rows
  int attempts = 3;  // restarts; the most compact clustering wins
  int max_iterations = 100;
};

struct DbscanOptions {
  double eps = 0.0;               // neighbourhood radius on standardized features; <= 0: automatic
  int min_points = 5;             // neighbours (the point included) that make a core point
  int64_t max_train_rows = 5000;  // O(n^2): larger training sets are subsampled (seeded)
};

struct IsolationForestMethodOptions {
  int trees = 100;
  int sample_size = 256;
};

struct GmmOptions {
  int components = 3;  // clamped to the training rows
  int max_iterations = 100;
};

struct SvmOptions {
  double c = 1.0;
  double gamma = 0.0;  // RBF exp(-gamma |u - v|^2); <= 0: 1 / cols (features are z-scores)
  int max_iterations = 1000;
};

struct RandomForestOptions {
  int trees = 100;
  int max_depth = 16;
  int min_sample_count = 2;
  int active_features = 0;  // features tried per split; 0: sqrt(cols)
};

struct XgboostOptions {
  int rounds = 100;
  int max_depth = 6;
  double learning_rate = 0.3;
  double subsample = 1.0;
  double colsample_bytree = 1.0;
};

struct MethodOptions {
  uint64_t seed = 1;
  int threads = 1;  // xgboost's nthread; OpenCV's own thread pool is left as configured
  bool standardize = true;
  // Share of anomalies the unsupervised learners flag: their threshold is the
  // (1 - contamination) quantile of the training scores. <= 0: the share of
  // non-zero labels when Fit gets labels (clamped to [0.001, 0.5]), else
  // kDefaultContamination.
  double contamination = 0.0;
  KMeansOptions kmeans;
  DbscanOptions dbscan;
  IsolationForestMethodOptions isolation_forest;
  GmmOptions gmm;
  SvmOptions svm;
  RandomForestOptions random_forest;
  XgboostOptions xgboost;
};

inline constexpr double kDefaultContamination = 0.1;

class ComparisonMethod {
 public:
  virtual ~ComparisonMethod() = default;

  virtual MethodId id() const = 0;
  virtual MethodKind kind() const = 0;
  std::string_view name() const;

  // Supervised learners need y (one label per row, at least two distinct
  // labels). Unsupervised learners ignore y except to pick the contamination
  // (see MethodOptions::contamination); y may be empty for them. Refitting
  // replaces the model.
  base::Status Fit(const Matrix& x, std::span<const int32_t> y);

  // Unsupervised: anomaly score, higher is more anomalous (learner-specific
  // scale). Supervised: probability that the row is not class 0.
  base::StatusOr<std::vector<float>> Score(const Matrix& x) const;
  // Unsupervised: 1 when Score > threshold(), else 0. Supervised: most probable
  // label.
  base::StatusOr<std::vector<int32_t>> Predict(const Matrix& x) const;
  // Supervised only: rows x classes().size(), each row sums to 1.
  base::StatusOr<Matrix> ClassProbabilities(const Matrix& x) const;

  bool fitted() const { return fitted_; }
  // Supervised: the distinct training labels, ascending. Unsupervised: {0, 1}.
  const std::vector<int32_t>& classes() const { return classes_; }
  // Unsupervised: the score threshold of Predict. Supervised: 0.
  float threshold() const { return threshold_; }
  // Unsupervised: the contamination the threshold was chosen for.
  double contamination() const { return contamination_; }

 protected:
  explicit ComparisonMethod(const MethodOptions& options) : options_(options) {}
  const MethodOptions& options() const { return options_; }

  // Unsupervised learners: fit on standardized rows, then score standardized
  // rows.
  virtual base::Status FitUnsupervised(const Matrix& x) {
    return base::Unimplemented("unsupervised fit");
  }
  virtual base::StatusOr<std::vector<float>> AnomalyScores(const Matrix& x) const {
    return base::Unimplemented("anomaly scores");
  }
  // A threshold of the learner's own (DBSCAN's eps rule); nullopt: the train
  // quantile.
  virtual std::optional<float> FixedThreshold() const { return std::nullopt; }

  // Supervised learners: labels are dense class indexes in [0, class_count) of
  // classes(); probabilities are rows x class_count.
  virtual base::Status FitSupervised(const Matrix& x, std::span<const int32_t> class_index,
                                     int class_count) {
    return base::Unimplemented("supervised fit");
  }
  virtual base::StatusOr<Matrix> Probabilities(const Matrix& x) const {
    return base::Unimplemented("class probabilities");
  }

 private:
  base::StatusOr<Matrix> Prepare(const Matrix& x) const;  // validate + standardize

  MethodOptions options_;
  Standardizer standardizer_;
  bool fitted_ = false;
  std::vector<int32_t> classes_;
  float threshold_ = 0.0f;
  double contamination_ = 0.0;
};

std::string_view MethodName(MethodId id);  // "kmeans", "dbscan", ..., "xgboost"
std::optional<MethodId> ParseMethodId(std::string_view name);
MethodKind KindOf(MethodId id);
// The learners this build has: OpenCV and xgboost ones only when found at
// configure time.
std::vector<MethodId> AvailableMethods();
bool IsAvailable(MethodId id);

// Unimplemented when the learner's library was not found when teller was built.
base::StatusOr<std::unique_ptr<ComparisonMethod>> MakeMethod(MethodId id,
                                                             const MethodOptions& options = {});

// The q-quantile (0..1) of `values` with linear interpolation; 0 when empty.
float Quantile(std::vector<float> values, double q);

}  // namespace teller::comparisons
