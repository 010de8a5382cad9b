#include "base/logistic_regression.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace teller::base {
namespace {

// 20,000 rows (a, b) with a ~ N(0, 1) and b ~ N(b_mean, b_sd), each labelled positive with
// the probability a known logit gives.
template <typename Logit>
void DrawRows(uint32_t seed, double b_mean, double b_sd, Logit logit,
              std::vector<std::vector<double>>* rows, std::vector<bool>* positive) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  for (int i = 0; i < 20000; ++i) {
    const double a = normal(rng), b = b_sd * normal(rng) + b_mean;
    rows->push_back({a, b});
    positive->push_back(uniform(rng) < 1.0 / (1.0 + std::exp(-logit(a, b))));
  }
}

// Rows drawn from a known model: the fit finds its weights back (in raw units).
TEST(LogisticRegressionTest, RecoversTheWeightsOfTheModelThatDrewTheLabels) {
  std::vector<std::vector<double>> rows;
  std::vector<bool> positive;
  DrawRows(7, 5.0, 3.0, [](double a, double b) { return 2.0 * a - 0.5 * (b - 5.0) + 0.5; }, &rows,
           &positive);
  const LogisticRegression fit = LogisticRegression::Fit(rows, positive, 1e-3);
  ASSERT_EQ(fit.width(), 2u);
  EXPECT_NEAR(fit.weights()[0] / fit.scale()[0], 2.0, 0.1);
  EXPECT_NEAR(fit.weights()[1] / fit.scale()[1], -0.5, 0.05);
  EXPECT_NEAR(fit.Probability(std::vector<double>{0.0, 5.0}), 1.0 / (1.0 + std::exp(-0.5)), 0.03);
}

// A weight kept non-negative: drawn negative, it stays at 0, and the free weight beside it
// is still found (the constrained optimum of a model without that feature).
TEST(LogisticRegressionTest, ANonnegativeWeightStaysAtZeroWhereTheDataSignItNegative) {
  std::vector<std::vector<double>> rows;
  std::vector<bool> positive;
  DrawRows(11, 0.0, 1.0, [](double a, double b) { return 2.0 * a - 1.0 * b; }, &rows, &positive);
  const LogisticRegression free = LogisticRegression::Fit(rows, positive, 1e-3);
  EXPECT_LT(free.weights()[1], -0.5);
  const LogisticRegression kept = LogisticRegression::Fit(rows, positive, 1e-3, {false, true});
  EXPECT_EQ(kept.weights()[1], 0.0);
  EXPECT_GT(kept.weights()[0], 1.5);
  // A weight the data sign positive is unchanged by the bound.
  const LogisticRegression both = LogisticRegression::Fit(rows, positive, 1e-3, {true, false});
  EXPECT_NEAR(both.weights()[0], free.weights()[0], 1e-6);
}

// Separable rows: the penalty keeps the weights finite and the order right.
TEST(LogisticRegressionTest, SeparableRowsGiveFiniteWeightsInTheRightOrder) {
  std::vector<std::vector<double>> rows = {{0.0}, {1.0}, {2.0}, {3.0}};
  std::vector<bool> positive = {false, false, true, true};
  const LogisticRegression fit = LogisticRegression::Fit(rows, positive, 1.0);
  EXPECT_TRUE(std::isfinite(fit.weights()[0]));
  EXPECT_LT(fit.Probability(std::vector<double>{0.0}), 0.5);
  EXPECT_GT(fit.Probability(std::vector<double>{3.0}), 0.5);
}

TEST(LogisticRegressionTest, OneClassGivesTheSmoothedBaseRate) {
  const LogisticRegression fit =
      LogisticRegression::Fit({{1.0}, {2.0}, {3.0}}, {false, false, false});
  EXPECT_NEAR(fit.Probability(std::vector<double>{9.0}), 1.0 / 5.0, 1e-9);  // (0+1)/(3+2)
}

TEST(LogisticRegressionTest, ParametersRoundTrip) {
  const LogisticRegression fit = LogisticRegression::Fit(
      {{0.0, 1.0}, {1.0, 0.0}, {2.0, 2.0}, {0.5, 3.0}}, {false, true, true, false});
  const LogisticRegression back =
      LogisticRegression::FromParameters(fit.mean(), fit.scale(), fit.weights(), fit.bias());
  EXPECT_DOUBLE_EQ(back.Probability(std::vector<double>{1.5, 0.5}),
                   fit.Probability(std::vector<double>{1.5, 0.5}));
}

// Beyond kMaxStandardized standard deviations a feature reads as that edge: a row far
// outside the training range gets the edge's probability, not the line drawn on.
TEST(LogisticRegressionTest, AFeatureFarOutsideTheTrainingRangeReadsAsItsEdge) {
  const LogisticRegression model =
      LogisticRegression::FromParameters({0.0}, {1.0}, {-2.0}, 1.0);  // mean 0, sd 1
  const double edge = model.Probability(std::vector<double>{LogisticRegression::kMaxStandardized});
  EXPECT_NEAR(edge, 1.0 / (1.0 + std::exp(2.0 * LogisticRegression::kMaxStandardized - 1.0)),
              1e-12);
  EXPECT_DOUBLE_EQ(model.Probability(std::vector<double>{40.0}), edge);
  EXPECT_GT(model.Probability(std::vector<double>{1.0}), edge);  // inside: the line itself
}

}  // namespace
}  // namespace teller::base
