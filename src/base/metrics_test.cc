#include "base/metrics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace teller::base {
namespace {

constexpr double kTight = 1e-12;

// splitmix64 (as eval::SplitMix64), so the data do not depend on the standard library.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t UniformBelow(uint64_t bound) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    uint64_t value = Next();
    while (value >= limit) value = Next();
    return value % bound;
  }

 private:
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  uint64_t state_;
};

// ---- Binary ----

TEST(BinaryMetricsTest, HandCheckedCounts) {
  // TP at 0; FP at 1, 2; FN at 3; TN at 4.
  const std::vector<int> predictions = {1, 1, 1, 0, 0};
  const std::vector<int> labels = {1, 0, 0, 1, 0};
  auto metrics = ComputeBinaryMetrics(predictions, labels);
  ASSERT_TRUE(metrics.ok()) << metrics.status().ToString();
  EXPECT_EQ(metrics->counts.true_positives, 1);
  EXPECT_EQ(metrics->counts.false_positives, 2);
  EXPECT_EQ(metrics->counts.false_negatives, 1);
  EXPECT_EQ(metrics->counts.true_negatives, 1);
  EXPECT_EQ(metrics->counts.total(), 5);
  EXPECT_NEAR(metrics->accuracy, 0.4, kTight);
  EXPECT_NEAR(metrics->precision, 1.0 / 3.0, kTight);
  EXPECT_NEAR(metrics->recall, 0.5, kTight);
  EXPECT_NEAR(metrics->f1, 0.4, kTight);
}

TEST(BinaryMetricsTest, EdgeCasesAreZeroNotNan) {
  // Nothing predicted positive: precision 0 (and so F1 0).
  auto none_predicted = ComputeBinaryMetrics(std::vector<int>{0, 0}, std::vector<int>{1, 0});
  ASSERT_TRUE(none_predicted.ok());
  EXPECT_EQ(none_predicted->precision, 0.0);
  EXPECT_EQ(none_predicted->recall, 0.0);
  EXPECT_EQ(none_predicted->f1, 0.0);
  EXPECT_NEAR(none_predicted->accuracy, 0.5, kTight);
  // No positive label at all: recall 0 even though every prediction is right.
  auto no_positives = ComputeBinaryMetrics(std::vector<int>{0, 0}, std::vector<int>{0, 0});
  ASSERT_TRUE(no_positives.ok());
  EXPECT_EQ(no_positives->recall, 0.0);
  EXPECT_EQ(no_positives->f1, 0.0);
  EXPECT_EQ(no_positives->accuracy, 1.0);
}

TEST(BinaryMetricsTest, BadInputIsAnError) {
  EXPECT_FALSE(ComputeBinaryMetrics(std::vector<int>{}, std::vector<int>{}).ok());
  EXPECT_FALSE(ComputeBinaryMetrics(std::vector<int>{1}, std::vector<int>{1, 0}).ok());
  auto two = ComputeBinaryMetrics(std::vector<int>{1, 2}, std::vector<int>{1, 0});
  ASSERT_FALSE(two.ok());
  EXPECT_NE(two.status().message().find("predictions[1] is 2"), std::string::npos)
      << two.status().message();
}

TEST(BinaryMetricsTest, F1LiesBetweenPrecisionAndRecall) {
  SplitMix64 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<int> predictions(20), labels(20);
    for (size_t i = 0; i < 20; ++i) {
      predictions[i] = static_cast<int>(rng.UniformBelow(2));
      labels[i] = static_cast<int>(rng.UniformBelow(2));
    }
    auto m = ComputeBinaryMetrics(predictions, labels);
    ASSERT_TRUE(m.ok());
    EXPECT_GE(m->f1, std::min(m->precision, m->recall) - kTight);
    EXPECT_LE(m->f1, std::max(m->precision, m->recall) + kTight);
  }
}

TEST(BinaryMetricsTest, ThresholdIsInclusive) {
  EXPECT_EQ(ThresholdScores(std::vector<double>{0.2, 0.5, 0.7}, 0.5), (std::vector<int>{0, 1, 1}));
}

// ---- Ranking ----

TEST(RankingMetricsTest, HandCheckedExample) {
  const std::vector<double> scores = {0.1, 0.4, 0.35, 0.8};
  const std::vector<int> labels = {0, 0, 1, 1};
  auto auroc = ComputeAuroc(scores, labels);
  auto ap = ComputeAveragePrecision(scores, labels);
  ASSERT_TRUE(auroc.ok() && ap.ok());
  EXPECT_NEAR(*auroc, 0.75, kTight);
  // Thresholds 0.8: R .5 P 1; 0.4: R .5; 0.35: R 1 P 2/3 -> .5 + .5 * 2/3.
  EXPECT_NEAR(*ap, 0.5 + 0.5 * 2.0 / 3.0, kTight);
}

TEST(RankingMetricsTest, TiesCountHalf) {
  const std::vector<int> labels = {0, 0, 1, 1};
  // The positive at 0.5 beats 0.2 and ties 0.5; 0.9 beats both: 3.5 of 4 pairs.
  auto auroc = ComputeAuroc(std::vector<double>{0.2, 0.5, 0.5, 0.9}, labels);
  ASSERT_TRUE(auroc.ok());
  EXPECT_NEAR(*auroc, 0.875, kTight);
  // The tie group enters AP as one threshold: .5 * 1 + .5 * 2/3.
  auto ap = ComputeAveragePrecision(std::vector<double>{0.2, 0.5, 0.5, 0.9}, labels);
  ASSERT_TRUE(ap.ok());
  EXPECT_NEAR(*ap, 0.5 + 0.5 * 2.0 / 3.0, kTight);
  auto all_tied = ComputeAuroc(std::vector<double>{0.5, 0.5, 0.5, 0.5}, labels);
  ASSERT_TRUE(all_tied.ok());
  EXPECT_NEAR(*all_tied, 0.5, kTight);
  auto all_tied_ap = ComputeAveragePrecision(std::vector<double>{0.5, 0.5, 0.5, 0.5}, labels);
  ASSERT_TRUE(all_tied_ap.ok());
  EXPECT_NEAR(*all_tied_ap, 0.5, kTight);
}

TEST(RankingMetricsTest, PerfectAndReversedRankings) {
  const std::vector<int> labels = {0, 1, 0, 1};
  const std::vector<double> perfect = {0.1, 0.9, 0.2, 0.8};
  const std::vector<double> reversed = {0.9, 0.1, 0.8, 0.2};
  EXPECT_NEAR(*ComputeAuroc(perfect, labels), 1.0, kTight);
  EXPECT_NEAR(*ComputeAveragePrecision(perfect, labels), 1.0, kTight);
  EXPECT_NEAR(*ComputeAuroc(reversed, labels), 0.0, kTight);
  // Positives last: precision 1/3 at recall .5, 2/4 at recall 1.
  EXPECT_NEAR(*ComputeAveragePrecision(reversed, labels), 0.5 / 3.0 + 0.25, kTight);
}

TEST(RankingMetricsTest, EdgeCases) {
  EXPECT_FALSE(ComputeAuroc(std::vector<double>{}, std::vector<int>{}).ok());
  EXPECT_FALSE(ComputeAuroc(std::vector<double>{0.1, 0.2}, std::vector<int>{1, 1}).ok());
  EXPECT_FALSE(ComputeAuroc(std::vector<double>{0.1, 0.2}, std::vector<int>{0, 0}).ok());
  EXPECT_FALSE(ComputeAuroc(std::vector<double>{0.1, NAN}, std::vector<int>{0, 1}).ok());
  EXPECT_FALSE(ComputeAuroc(std::vector<double>{0.1}, std::vector<int>{0, 1}).ok());
  EXPECT_FALSE(ComputeAveragePrecision(std::vector<double>{0.1, 0.2}, std::vector<int>{0, 0}).ok());
  // Only positives: precision is 1 at every threshold.
  auto only_positives =
      ComputeAveragePrecision(std::vector<double>{0.1, 0.2}, std::vector<int>{1, 1});
  ASSERT_TRUE(only_positives.ok());
  EXPECT_NEAR(*only_positives, 1.0, kTight);
}

struct ScoredData {
  std::vector<double> scores;
  std::vector<int> labels;
};

// Scores rounded to 0.05 so ties are common; positives score higher on average.
ScoredData RandomScoredData(uint64_t seed, int count) {
  SplitMix64 rng(seed);
  ScoredData data;
  for (int i = 0; i < count; ++i) {
    const int label = static_cast<int>(rng.UniformBelow(2));
    const double raw = static_cast<double>(rng.UniformBelow(15) + 5 * label);
    data.labels.push_back(label);
    data.scores.push_back(raw * 0.05);
  }
  return data;
}

TEST(RankingMetricsTest, MatchesPairCountingAndPrecisionAtEachPositive) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const ScoredData data = RandomScoredData(seed, 60);
    double wins = 0.0;
    double pairs = 0.0;
    double precision_sum = 0.0;
    double positives = 0.0;
    for (size_t i = 0; i < data.scores.size(); ++i) {
      if (data.labels[i] != 1) continue;
      positives += 1.0;
      double at_or_above = 0.0, positives_at_or_above = 0.0;
      for (size_t j = 0; j < data.scores.size(); ++j) {
        if (data.scores[j] >= data.scores[i]) {
          at_or_above += 1.0;
          positives_at_or_above += data.labels[j];
        }
        if (data.labels[j] == 0) {
          pairs += 1.0;
          wins += data.scores[i] > data.scores[j]    ? 1.0
                  : data.scores[i] == data.scores[j] ? 0.5
                                                     : 0.0;
        }
      }
      precision_sum += positives_at_or_above / at_or_above;
    }
    auto auroc = ComputeAuroc(data.scores, data.labels);
    auto ap = ComputeAveragePrecision(data.scores, data.labels);
    ASSERT_TRUE(auroc.ok() && ap.ok());
    EXPECT_NEAR(*auroc, wins / pairs, 1e-9) << "seed " << seed;
    EXPECT_NEAR(*ap, precision_sum / positives, 1e-9) << "seed " << seed;
  }
}

TEST(RankingMetricsTest, PermutationInvariant) {
  ScoredData data = RandomScoredData(11, 200);
  const double auroc = *ComputeAuroc(data.scores, data.labels);
  const double ap = *ComputeAveragePrecision(data.scores, data.labels);
  SplitMix64 rng(3);
  for (int trial = 0; trial < 5; ++trial) {
    for (size_t i = data.scores.size() - 1; i > 0; --i) {
      const size_t j = rng.UniformBelow(i + 1);
      std::swap(data.scores[i], data.scores[j]);
      std::swap(data.labels[i], data.labels[j]);
    }
    EXPECT_DOUBLE_EQ(*ComputeAuroc(data.scores, data.labels), auroc);
    EXPECT_DOUBLE_EQ(*ComputeAveragePrecision(data.scores, data.labels), ap);
  }
}

// ---- Multiclass ----

TEST(MulticlassMetricsTest, HandChecked) {
  const std::vector<int> truth = {0, 0, 1, 1, 2, 2};
  const std::vector<int> predictions = {0, 1, 1, 1, 2, 0};
  auto m = ComputeMulticlassMetrics(predictions, truth);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->classes, (std::vector<int>{0, 1, 2}));
  const std::vector<std::vector<int64_t>> confusion = {{1, 1, 0}, {0, 2, 0}, {1, 0, 1}};
  EXPECT_EQ(m->confusion, confusion);
  EXPECT_NEAR(m->accuracy, 4.0 / 6.0, kTight);
  ASSERT_EQ(m->per_class.size(), 3u);
  EXPECT_NEAR(m->per_class[0].precision, 0.5, kTight);
  EXPECT_NEAR(m->per_class[0].recall, 0.5, kTight);
  EXPECT_NEAR(m->per_class[1].precision, 2.0 / 3.0, kTight);
  EXPECT_NEAR(m->per_class[1].recall, 1.0, kTight);
  EXPECT_NEAR(m->per_class[1].f1, 0.8, kTight);
  EXPECT_NEAR(m->per_class[2].precision, 1.0, kTight);
  EXPECT_NEAR(m->per_class[2].f1, 2.0 / 3.0, kTight);
  EXPECT_EQ(m->per_class[2].support, 2);
  EXPECT_NEAR(m->macro_recall, 2.0 / 3.0, kTight);
  EXPECT_NEAR(m->macro_precision, (0.5 + 2.0 / 3.0 + 1.0) / 3.0, kTight);
  EXPECT_NEAR(m->macro_f1, (0.5 + 0.8 + 2.0 / 3.0) / 3.0, kTight);
}

TEST(MulticlassMetricsTest, ClassOnlyPredictedCountsInMacro) {
  auto m = ComputeMulticlassMetrics(std::vector<int>{0, 5}, std::vector<int>{0, 0});
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->classes, (std::vector<int>{0, 5}));
  EXPECT_EQ(m->per_class[1].support, 0);
  EXPECT_EQ(m->per_class[1].recall, 0.0);
  EXPECT_NEAR(m->macro_recall, 0.25, kTight);
  EXPECT_NEAR(m->macro_f1, (2.0 / 3.0) / 2.0, kTight);
}

TEST(MulticlassMetricsTest, EmptyOrMismatchedIsAnError) {
  EXPECT_FALSE(ComputeMulticlassMetrics(std::vector<int>{}, std::vector<int>{}).ok());
  EXPECT_FALSE(ComputeMulticlassMetrics(std::vector<int>{1}, std::vector<int>{1, 2}).ok());
}

// ---- F1 of counts (the learned model's validation scores) ----

TEST(F1FromCountsTest, ClosedFormAndMacroOverOccurringClasses) {
  EXPECT_EQ(F1FromCounts(0, 3, 4), 0.0);
  EXPECT_DOUBLE_EQ(F1FromCounts(2, 1, 1), 4.0 / 6.0);
  const std::vector<ClassCounts> classes = {{2, 1, 1}, {0, 0, 0}, {1, 0, 1}};
  EXPECT_DOUBLE_EQ(MacroF1FromCounts(classes), (4.0 / 6.0 + 2.0 / 3.0) / 2.0);
  EXPECT_EQ(MacroF1FromCounts({}), 0.0);
}

// ---- Mean/std ----

TEST(MeanStdTest, PopulationStd) {
  auto m = ComputeMeanStd(std::vector<double>{2, 4, 4, 4, 5, 5, 7, 9});
  ASSERT_TRUE(m.ok());
  EXPECT_NEAR(m->mean, 5.0, kTight);
  EXPECT_NEAR(m->std, 2.0, kTight);
  EXPECT_FALSE(ComputeMeanStd(std::vector<double>{}).ok());
  EXPECT_EQ(ComputeMeanStd(std::vector<double>{3.5})->std, 0.0);
}

}  // namespace
}  // namespace teller::base
