#include "base/platt_scaling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace teller::base {
namespace {

using Solver = PlattScaler::Solver;

TEST(PlattScalerTest, LineSearchProbabilityRisesWithTheDecisionValue) {
  std::vector<double> decision;
  std::vector<bool> positive;
  uint64_t state = 7;
  for (int i = 0; i < 200; ++i) {
    const double f = -3.0 + 6.0 * i / 199.0;
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const double noise = static_cast<double>(state >> 11) / 9007199254740992.0 - 0.5;
    decision.push_back(f);
    positive.push_back(f + noise > 0);
  }
  const PlattScaler platt = PlattScaler::Fit(decision, positive, Solver::kLineSearch);
  EXPECT_GT(platt.a(), 0.0);  // p = 1 / (1 + exp(-(a f + b))) rises with f
  EXPECT_GT(platt.Probability(2.0), 0.9);
  EXPECT_LT(platt.Probability(-2.0), 0.1);
  EXPECT_NEAR(platt.Probability(0.0), 0.5, 0.15);
  // One class only: the smoothed base rate (3 negatives: 1 / 5 positive).
  const PlattScaler flat = PlattScaler::Fit(
      std::vector<double>{1, 2, 3}, std::vector<bool>{false, false, false}, Solver::kLineSearch);
  EXPECT_NEAR(flat.Probability(-5.0), 0.2, 1e-9);
  EXPECT_NEAR(flat.Probability(5.0), 0.2, 1e-9);
}

TEST(PlattScalerTest, NewtonIsMonotoneAndSeparates) {
  std::vector<double> x;
  std::vector<bool> faulty;
  for (int i = 0; i < 100; ++i) {
    x.push_back(std::log1p(0.5 + 0.02 * i));  // normal scores: 0.5 .. 2.5
    faulty.push_back(false);
  }
  for (int i = 0; i < 10; ++i) {
    x.push_back(std::log1p(8.0 + i));  // faulty: 8 .. 17
    faulty.push_back(true);
  }
  const PlattScaler scaler = PlattScaler::Fit(x, faulty, Solver::kNewton);
  EXPECT_GT(scaler.a(), 0.0);
  EXPECT_LT(scaler.Probability(std::log1p(1.0)), 0.1);
  EXPECT_GT(scaler.Probability(std::log1p(12.0)), 0.9);
  for (double s = 0.0; s < 20.0; s += 0.5) {
    EXPECT_LE(scaler.Probability(std::log1p(s)), scaler.Probability(std::log1p(s + 0.5)));
  }
  // One class only: the smoothed base rate everywhere.
  const PlattScaler flat = PlattScaler::Fit(
      std::vector<double>{1.0, 2.0, 3.0}, std::vector<bool>{false, false, false}, Solver::kNewton);
  EXPECT_NEAR(flat.Probability(1.0), 1.0 / 5.0, 1e-12);
  EXPECT_NEAR(flat.Probability(100.0), 1.0 / 5.0, 1e-12);
}

TEST(PlattScalerTest, FromParametersKeepsAAndB) {
  const PlattScaler scaler = PlattScaler::FromParameters(1.5, -4.0);
  EXPECT_EQ(scaler.a(), 1.5);
  EXPECT_EQ(scaler.b(), -4.0);
  EXPECT_DOUBLE_EQ(scaler.Probability(4.0 / 1.5), 0.5);
  EXPECT_NEAR(scaler.Probability(2.0), 1.0 / (1.0 + std::exp(1.0)), 1e-15);
}

}  // namespace
}  // namespace teller::base
