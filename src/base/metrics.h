// Classification and ranking metrics every stage may use (learn, comparisons, eval):
// binary counts with precision, recall and F1, AUROC and average precision over
// scores, multiclass macro scores, and mean/std. Columnar inputs, deterministic.
// Definitions and edge cases: docs/metrics.md.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace teller::base {

// ---- Binary classification (labels and predictions are 0 or 1) ----

struct BinaryCounts {
  int64_t true_positives = 0;
  int64_t false_positives = 0;
  int64_t true_negatives = 0;
  int64_t false_negatives = 0;
  int64_t total() const {
    return true_positives + false_positives + true_negatives + false_negatives;
  }
};

struct BinaryMetrics {
  BinaryCounts counts;
  double accuracy = 0.0;
  double precision = 0.0;  // 0 when nothing is predicted positive
  double recall = 0.0;     // 0 when there is no positive label
  double f1 = 0.0;         // 0 when precision + recall is 0
};

// Errors on empty input, different lengths, or a value other than 0/1.
StatusOr<BinaryCounts> CountBinary(std::span<const int> predictions, std::span<const int> labels);
BinaryMetrics BinaryMetricsFromCounts(const BinaryCounts& counts);
StatusOr<BinaryMetrics> ComputeBinaryMetrics(std::span<const int> predictions,
                                             std::span<const int> labels);

// 1 where score >= threshold, else 0.
std::vector<int> ThresholdScores(std::span<const double> scores, double threshold);

// ---- Ranking metrics over scores (higher = more likely positive) ----

// Area under the ROC curve, ties counted by average rank (Mann-Whitney U / (P*N)).
// Errors on empty input, different lengths, non-finite scores, labels other than 0/1,
// or when one class is absent.
StatusOr<double> ComputeAuroc(std::span<const double> scores, std::span<const int> labels);

// AUPRC as average precision: sum over distinct thresholds of (R_n - R_{n-1}) * P_n
// (scikit-learn's average_precision_score). Errors like ComputeAuroc, but only a
// missing positive class is an error (no negatives gives 1).
StatusOr<double> ComputeAveragePrecision(std::span<const double> scores,
                                         std::span<const int> labels);

// ---- Multiclass classification (any int class ids) ----

struct ClassScores {
  int label = 0;
  int64_t support = 0;  // items whose truth is this class
  double precision = 0.0;
  double recall = 0.0;
  double f1 = 0.0;
};

struct MulticlassMetrics {
  std::vector<int> classes;  // sorted union of the classes in truth and prediction
  // confusion[t][p]: items of truth classes[t] predicted as classes[p].
  std::vector<std::vector<int64_t>> confusion;
  std::vector<ClassScores> per_class;  // parallel to classes
  double accuracy = 0.0;
  double macro_precision = 0.0;  // means over `classes`
  double macro_recall = 0.0;
  double macro_f1 = 0.0;  // mean of per-class F1 (not the F1 of the macro means)
};

// Errors on empty input or different lengths.
StatusOr<MulticlassMetrics> ComputeMulticlassMetrics(std::span<const int> predictions,
                                                     std::span<const int> truth);

// ---- F1 of counts (the learned model's validation scores) ----

// 2 tp / (2 tp + fp + fn), 0 without a true positive. BinaryMetricsFromCounts takes the
// harmonic mean of precision and recall instead: equal in exact arithmetic, not always
// in the last bit, so each caller keeps the form its published figures used.
double F1FromCounts(int64_t true_positives, int64_t false_positives, int64_t false_negatives);

struct ClassCounts {
  int64_t true_positives = 0;
  int64_t false_positives = 0;
  int64_t false_negatives = 0;
};
// Mean of F1FromCounts over the classes that occur (tp + fp + fn > 0), in index order;
// 0 when none does.
double MacroF1FromCounts(std::span<const ClassCounts> classes);

// Checks the scores and labels of a ranking metric (non-empty, same length, finite
// scores, labels 0 or 1); returns the number of positives. `metric` names the caller.
StatusOr<int64_t> CheckScoredLabels(std::span<const double> scores, std::span<const int> labels,
                                    std::string_view metric);

// ---- Operator sets (paper: Operator set-Macro) ----

struct SetScore {
  double precision = 0.0;
  double recall = 0.0;
  double f1 = 0.0;
  double jaccard = 0.0;
};

// One item; duplicates count once. Both sets empty: 1 for all four; exactly one
// empty: 0 for all four.
SetScore ScoreSetPair(std::span<const std::string> predicted, std::span<const std::string> truth);

// ---- Mean and standard deviation ----

struct MeanStd {
  double mean = 0.0;
  double std = 0.0;  // population standard deviation (divides by n)
};

// Errors on empty input.
StatusOr<MeanStd> ComputeMeanStd(std::span<const double> values);

}  // namespace teller::base
