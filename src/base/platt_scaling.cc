#include "base/platt_scaling.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace teller::base {
namespace {

// 1 / (1 + e^-t) without overflow.
double Sigmoid(double t) {
  return t >= 0 ? 1.0 / (1.0 + std::exp(-t)) : std::exp(t) / (1.0 + std::exp(t));
}

// log(1 + exp(-z)) without overflow.
double LogOnePlusExpNeg(double z) {
  return z >= 0 ? std::log1p(std::exp(-z)) : -z + std::log1p(std::exp(z));
}

}  // namespace

PlattScaler PlattScaler::Fit(std::span<const double> x, const std::vector<bool>& positive,
                             Solver solver) {
  return solver == Solver::kLineSearch ? FitLineSearch(x, positive) : FitNewton(x, positive);
}

// Works in Lin, Lin and Weng's sign convention, p = 1 / (1 + exp(a x + b)), and negates
// a and b at the end (exact in floating point).
PlattScaler PlattScaler::FitLineSearch(std::span<const double> decision,
                                       const std::vector<bool>& positive) {
  const size_t n = std::min(decision.size(), positive.size());
  double positives = 0, negatives = 0;
  for (size_t i = 0; i < n; ++i) (positive[i] ? positives : negatives) += 1.0;
  const double high = (positives + 1.0) / (positives + 2.0);
  const double low = 1.0 / (negatives + 2.0);
  std::vector<double> target(n);
  for (size_t i = 0; i < n; ++i) target[i] = positive[i] ? high : low;
  double fit_a = 0.0;
  double fit_b = std::log((negatives + 1.0) / (positives + 1.0));
  if (positives == 0 || negatives == 0) return FromParameters(-fit_a, -fit_b);

  // Loss with z = a f + b and p = 1 / (1 + e^z): sum t z + log(1 + e^-z).
  auto loss = [&](double a, double b) {
    double sum = 0.0;
    for (size_t i = 0; i < n; ++i) {
      const double z = a * decision[i] + b;
      sum += target[i] * z + LogOnePlusExpNeg(z);
    }
    return sum;
  };
  constexpr double kSigma = 1e-12;  // keeps the Hessian positive definite
  double current = loss(fit_a, fit_b);
  for (int iteration = 0; iteration < 100; ++iteration) {
    double h11 = kSigma, h22 = kSigma, h21 = 0.0, g1 = 0.0, g2 = 0.0;
    for (size_t i = 0; i < n; ++i) {
      const double z = fit_a * decision[i] + fit_b;
      const double p = z >= 0 ? std::exp(-z) / (1.0 + std::exp(-z)) : 1.0 / (1.0 + std::exp(z));
      const double q = 1.0 - p;
      const double d2 = p * q;
      h11 += decision[i] * decision[i] * d2;
      h22 += d2;
      h21 += decision[i] * d2;
      const double d1 = target[i] - p;
      g1 += decision[i] * d1;
      g2 += d1;
    }
    if (std::abs(g1) < 1e-5 && std::abs(g2) < 1e-5) break;
    const double det = h11 * h22 - h21 * h21;
    const double da = -(h22 * g1 - h21 * g2) / det;
    const double db = -(-h21 * g1 + h11 * g2) / det;
    const double slope = g1 * da + g2 * db;
    double step = 1.0;
    bool improved = false;
    while (step >= 1e-10) {
      const double a = fit_a + step * da, b = fit_b + step * db;
      const double next = loss(a, b);
      if (next < current + 1e-4 * step * slope) {
        fit_a = a;
        fit_b = b;
        current = next;
        improved = true;
        break;
      }
      step /= 2.0;
    }
    if (!improved) break;
  }
  return FromParameters(-fit_a, -fit_b);
}

PlattScaler PlattScaler::FitNewton(std::span<const double> x, const std::vector<bool>& positive) {
  PlattScaler out;
  const size_t n = std::min(x.size(), positive.size());
  double positives = 0;
  for (size_t i = 0; i < n; ++i) positives += positive[i] ? 1 : 0;
  const double negatives = static_cast<double>(n) - positives;
  const double hi = (positives + 1.0) / (positives + 2.0);
  const double lo = 1.0 / (negatives + 2.0);
  const double prior = (positives + 1.0) / (static_cast<double>(n) + 2.0);
  out.b_ = std::log(prior / (1.0 - prior));
  if (positives == 0 || negatives == 0) return out;
  double a = 0.0, b = out.b_;
  for (int iteration = 0; iteration < 100; ++iteration) {
    // Gradient and Hessian of the log-loss in (a, b), with a small ridge.
    double ga = 0, gb = 0, haa = 1e-9, hab = 0, hbb = 1e-9;
    for (size_t i = 0; i < n; ++i) {
      const double p = Sigmoid(a * x[i] + b);
      const double d = p - (positive[i] ? hi : lo);
      const double w = std::max(p * (1.0 - p), 1e-12);
      ga += d * x[i];
      gb += d;
      haa += w * x[i] * x[i];
      hab += w * x[i];
      hbb += w;
    }
    const double det = haa * hbb - hab * hab;
    if (std::abs(det) < 1e-18) break;
    const double da = (hbb * ga - hab * gb) / det;
    const double db = (haa * gb - hab * ga) / det;
    a -= da;
    b -= db;
    if (std::abs(da) < 1e-10 && std::abs(db) < 1e-10) break;
  }
  out.a_ = a;
  out.b_ = b;
  return out;
}

double PlattScaler::Probability(double x) const { return Sigmoid(a_ * x + b_); }

}  // namespace teller::base
