#include "base/metrics.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <numeric>

namespace teller::base {
namespace {

double Ratio(double numerator, double denominator) {
  return denominator == 0.0 ? 0.0 : numerator / denominator;
}

double HarmonicMean(double a, double b) { return a + b == 0.0 ? 0.0 : 2.0 * a * b / (a + b); }

Status CheckBinaryValues(std::span<const int> values, std::string_view what) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] != 0 && values[i] != 1) {
      return InvalidArgument("metrics: {}[{}] is {}, expected 0 or 1", what, i, values[i]);
    }
  }
  return OkStatus();
}

// Indices of scores ordered by score; ties keep index order (results do not depend on it).
std::vector<size_t> OrderByScore(std::span<const double> scores, bool descending) {
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return descending ? scores[a] > scores[b] : scores[a] < scores[b];
  });
  return order;
}

std::vector<std::string> SortedUnique(std::span<const std::string> values) {
  std::vector<std::string> out(values.begin(), values.end());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace

StatusOr<int64_t> CheckScoredLabels(std::span<const double> scores, std::span<const int> labels,
                                    std::string_view metric) {
  if (scores.empty()) return InvalidArgument("metrics: {} of an empty input", metric);
  if (scores.size() != labels.size()) {
    return InvalidArgument("metrics: {}: {} scores but {} labels", metric, scores.size(),
                           labels.size());
  }
  TELLER_RETURN_IF_ERROR(CheckBinaryValues(labels, "labels"));
  for (size_t i = 0; i < scores.size(); ++i) {
    if (!std::isfinite(scores[i])) {
      return InvalidArgument("metrics: {}: scores[{}] is not finite", metric, i);
    }
  }
  return static_cast<int64_t>(std::count(labels.begin(), labels.end(), 1));
}

// ---- Binary ----

StatusOr<BinaryCounts> CountBinary(std::span<const int> predictions, std::span<const int> labels) {
  if (labels.empty()) return InvalidArgument("metrics: binary metrics of an empty input");
  if (predictions.size() != labels.size()) {
    return InvalidArgument("metrics: {} predictions but {} labels", predictions.size(),
                           labels.size());
  }
  TELLER_RETURN_IF_ERROR(CheckBinaryValues(predictions, "predictions"));
  TELLER_RETURN_IF_ERROR(CheckBinaryValues(labels, "labels"));
  BinaryCounts counts;
  for (size_t i = 0; i < labels.size(); ++i) {
    if (predictions[i] == 1) {
      ++(labels[i] == 1 ? counts.true_positives : counts.false_positives);
    } else {
      ++(labels[i] == 1 ? counts.false_negatives : counts.true_negatives);
    }
  }
  return counts;
}

BinaryMetrics BinaryMetricsFromCounts(const BinaryCounts& counts) {
  BinaryMetrics metrics;
  metrics.counts = counts;
  const double tp = static_cast<double>(counts.true_positives);
  metrics.accuracy =
      Ratio(tp + static_cast<double>(counts.true_negatives), static_cast<double>(counts.total()));
  metrics.precision = Ratio(tp, tp + static_cast<double>(counts.false_positives));
  metrics.recall = Ratio(tp, tp + static_cast<double>(counts.false_negatives));
  metrics.f1 = HarmonicMean(metrics.precision, metrics.recall);
  return metrics;
}

StatusOr<BinaryMetrics> ComputeBinaryMetrics(std::span<const int> predictions,
                                             std::span<const int> labels) {
  TELLER_ASSIGN_OR_RETURN(BinaryCounts counts, CountBinary(predictions, labels));
  return BinaryMetricsFromCounts(counts);
}

std::vector<int> ThresholdScores(std::span<const double> scores, double threshold) {
  std::vector<int> predictions(scores.size());
  for (size_t i = 0; i < scores.size(); ++i) predictions[i] = scores[i] >= threshold ? 1 : 0;
  return predictions;
}

// ---- Ranking ----

StatusOr<double> ComputeAuroc(std::span<const double> scores, std::span<const int> labels) {
  TELLER_ASSIGN_OR_RETURN(const int64_t positives, CheckScoredLabels(scores, labels, "AUROC"));
  const int64_t negatives = static_cast<int64_t>(labels.size()) - positives;
  if (positives == 0 || negatives == 0) {
    return InvalidArgument("metrics: AUROC needs both classes ({} positives, {} negatives)",
                           positives, negatives);
  }
  const std::vector<size_t> order = OrderByScore(scores, /*descending=*/false);
  // Sum of the 1-based ranks of the positives; a tie group shares its average rank.
  double positive_rank_sum = 0.0;
  for (size_t begin = 0; begin < order.size();) {
    size_t end = begin + 1;
    while (end < order.size() && scores[order[end]] == scores[order[begin]]) ++end;
    const double average_rank = (static_cast<double>(begin + 1) + static_cast<double>(end)) / 2.0;
    for (size_t i = begin; i < end; ++i) {
      if (labels[order[i]] == 1) positive_rank_sum += average_rank;
    }
    begin = end;
  }
  const double p = static_cast<double>(positives);
  const double u = positive_rank_sum - p * (p + 1.0) / 2.0;
  return u / (p * static_cast<double>(negatives));
}

StatusOr<double> ComputeAveragePrecision(std::span<const double> scores,
                                         std::span<const int> labels) {
  TELLER_ASSIGN_OR_RETURN(const int64_t positives, CheckScoredLabels(scores, labels, "AUPRC"));
  if (positives == 0) return InvalidArgument("metrics: AUPRC needs at least one positive label");
  const std::vector<size_t> order = OrderByScore(scores, /*descending=*/true);
  int64_t true_positives = 0;
  int64_t false_positives = 0;
  double previous_recall = 0.0;
  double average_precision = 0.0;
  for (size_t begin = 0; begin < order.size();) {
    size_t end = begin;
    while (end < order.size() && scores[order[end]] == scores[order[begin]]) {
      ++(labels[order[end]] == 1 ? true_positives : false_positives);
      ++end;
    }
    const double recall = static_cast<double>(true_positives) / static_cast<double>(positives);
    const double precision =
        static_cast<double>(true_positives) / static_cast<double>(true_positives + false_positives);
    average_precision += (recall - previous_recall) * precision;
    previous_recall = recall;
    begin = end;
  }
  return average_precision;
}

// ---- Multiclass ----

StatusOr<MulticlassMetrics> ComputeMulticlassMetrics(std::span<const int> predictions,
                                                     std::span<const int> truth) {
  if (truth.empty()) return InvalidArgument("metrics: multiclass metrics of an empty input");
  if (predictions.size() != truth.size()) {
    return InvalidArgument("metrics: {} predictions but {} truth labels", predictions.size(),
                           truth.size());
  }
  MulticlassMetrics metrics;
  metrics.classes.assign(truth.begin(), truth.end());
  metrics.classes.insert(metrics.classes.end(), predictions.begin(), predictions.end());
  std::sort(metrics.classes.begin(), metrics.classes.end());
  metrics.classes.erase(std::unique(metrics.classes.begin(), metrics.classes.end()),
                        metrics.classes.end());
  const size_t class_count = metrics.classes.size();
  auto index_of = [&](int label) {
    return static_cast<size_t>(
        std::lower_bound(metrics.classes.begin(), metrics.classes.end(), label) -
        metrics.classes.begin());
  };
  metrics.confusion.assign(class_count, std::vector<int64_t>(class_count, 0));
  int64_t correct = 0;
  for (size_t i = 0; i < truth.size(); ++i) {
    ++metrics.confusion[index_of(truth[i])][index_of(predictions[i])];
    if (truth[i] == predictions[i]) ++correct;
  }
  metrics.accuracy = static_cast<double>(correct) / static_cast<double>(truth.size());
  for (size_t c = 0; c < class_count; ++c) {
    int64_t predicted_as_c = 0;
    int64_t truly_c = 0;
    for (size_t other = 0; other < class_count; ++other) {
      predicted_as_c += metrics.confusion[other][c];
      truly_c += metrics.confusion[c][other];
    }
    const double hits = static_cast<double>(metrics.confusion[c][c]);
    ClassScores scores;
    scores.label = metrics.classes[c];
    scores.support = truly_c;
    scores.precision = Ratio(hits, static_cast<double>(predicted_as_c));
    scores.recall = Ratio(hits, static_cast<double>(truly_c));
    scores.f1 = HarmonicMean(scores.precision, scores.recall);
    metrics.macro_precision += scores.precision;
    metrics.macro_recall += scores.recall;
    metrics.macro_f1 += scores.f1;
    metrics.per_class.push_back(scores);
  }
  const double n = static_cast<double>(class_count);
  metrics.macro_precision /= n;
  metrics.macro_recall /= n;
  metrics.macro_f1 /= n;
  return metrics;
}

double F1FromCounts(int64_t true_positives, int64_t false_positives, int64_t false_negatives) {
  return true_positives == 0
             ? 0.0
             : 2.0 * true_positives / (2.0 * true_positives + false_positives + false_negatives);
}

double MacroF1FromCounts(std::span<const ClassCounts> classes) {
  double macro = 0;
  int occurring = 0;
  for (const ClassCounts& c : classes) {
    if (c.true_positives + c.false_positives + c.false_negatives == 0) continue;
    macro += F1FromCounts(c.true_positives, c.false_positives, c.false_negatives);
    ++occurring;
  }
  return occurring ? macro / occurring : 0;
}

// ---- Mean and std ----

StatusOr<MeanStd> ComputeMeanStd(std::span<const double> values) {
  if (values.empty()) return InvalidArgument("metrics: mean of no values");
  const double n = static_cast<double>(values.size());
  MeanStd result;
  for (const double value : values) result.mean += value;
  result.mean /= n;
  double squares = 0.0;
  for (const double value : values) squares += (value - result.mean) * (value - result.mean);
  result.std = std::sqrt(squares / n);
  return result;
}

SetScore ScoreSetPair(std::span<const std::string> predicted, std::span<const std::string> truth) {
  const std::vector<std::string> p = SortedUnique(predicted);
  const std::vector<std::string> t = SortedUnique(truth);
  if (p.empty() && t.empty()) return SetScore{1.0, 1.0, 1.0, 1.0};
  if (p.empty() || t.empty()) return SetScore{};
  std::vector<std::string> common;
  std::set_intersection(p.begin(), p.end(), t.begin(), t.end(), std::back_inserter(common));
  const double both = static_cast<double>(common.size());
  const double p_size = static_cast<double>(p.size());
  const double t_size = static_cast<double>(t.size());
  SetScore score;
  score.precision = both / p_size;
  score.recall = both / t_size;
  score.f1 = 2.0 * both / (p_size + t_size);
  score.jaccard = both / (p_size + t_size - both);
  return score;
}

}  // namespace teller::base
