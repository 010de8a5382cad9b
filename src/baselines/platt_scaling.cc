#include "baselines/platt_scaling.h"

#include <cmath>
#include <vector>

namespace teller::baselines {
namespace {

// log(1 + exp(-z)) without overflow.
double LogOnePlusExpNeg(double z) {
  return z >= 0 ? std::log1p(std::exp(-z)) : -z + std::log1p(std::exp(z));
}

} // namespace

PlattScaling PlattScaling::Fit(std::span<const double> decision,
                               const std::vector<bool> &positive) {
  PlattScaling result;
  const size_t n = std::min(decision.size(), positive.size());
  double positives = 0, negatives = 0;
  for (size_t i = 0; i < n; ++i)
    (positive[i] ? positives : negatives) += 1.0;
  const double high = (positives + 1.0) / (positives + 2.0);
  const double low = 1.0 / (negatives + 2.0);
  std::vector<double> target(n);
  for (size_t i = 0; i < n; ++i)
    target[i] = positive[i] ? high : low;
  result.a_ = 0.0;
  result.b_ = std::log((negatives + 1.0) / (positives + 1.0));
  if (positives == 0 || negatives == 0)
    return result;

  // Loss with z = a f + b and p = 1 / (1 + e^z): sum t z + log(1 + e^-z).
  auto loss = [&](double a, double b) {
    double sum = 0.0;
    for (size_t i = 0; i < n; ++i) {
      const double z = a * decision[i] + b;
      sum += target[i] * z + LogOnePlusExpNeg(z);
    }
    return sum;
  };
  constexpr double kSigma = 1e-12; // keeps the Hessian positive definite
  double current = loss(result.a_, result.b_);
  for (int iteration = 0; iteration < 100; ++iteration) {
    double h11 = kSigma, h22 = kSigma, h21 = 0.0, g1 = 0.0, g2 = 0.0;
    for (size_t i = 0; i < n; ++i) {
      const double z = result.a_ * decision[i] + result.b_;
      const double p = z >= 0 ? std::exp(-z) / (1.0 + std::exp(-z))
                              : 1.0 / (1.0 + std::exp(z));
      const double q = 1.0 - p;
      const double d2 = p * q;
      h11 += decision[i] * decision[i] * d2;
      h22 += d2;
      h21 += decision[i] * d2;
      const double d1 = target[i] - p;
      g1 += decision[i] * d1;
      g2 += d1;
    }
    if (std::abs(g1) < 1e-5 && std::abs(g2) < 1e-5)
      break;
    const double det = h11 * h22 - h21 * h21;
    const double da = -(h22 * g1 - h21 * g2) / det;
    const double db = -(-h21 * g1 + h11 * g2) / det;
    const double slope = g1 * da + g2 * db;
    double step = 1.0;
    bool improved = false;
    while (step >= 1e-10) {
      const double a = result.a_ + step * da, b = result.b_ + step * db;
      const double next = loss(a, b);
      if (next < current + 1e-4 * step * slope) {
        result.a_ = a;
        result.b_ = b;
        current = next;
        improved = true;
        break;
      }
      step /= 2.0;
    }
    if (!improved)
      break;
  }
  return result;
}

double PlattScaling::Probability(double decision) const {
  const double z = a_ * decision + b_;
  return z >= 0 ? std::exp(-z) / (1.0 + std::exp(-z))
                : 1.0 / (1.0 + std::exp(z));
}

} // namespace teller::baselines
