#include "localize/calibration.h"

#include <cmath>

namespace teller::localize {
namespace {

double Sigmoid(double t) {
  return t >= 0 ? 1.0 / (1.0 + std::exp(-t)) : std::exp(t) / (1.0 + std::exp(t));
}

}  // namespace

PlattCalibrator PlattCalibrator::Fit(const std::vector<double>& scores,
                                     const std::vector<bool>& faulty) {
  PlattCalibrator out;
  const size_t n = std::min(scores.size(), faulty.size());
  double positives = 0;
  for (size_t i = 0; i < n; ++i) positives += faulty[i] ? 1 : 0;
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
      const double x = std::log1p(std::max(0.0, scores[i]));
      const double p = Sigmoid(a * x + b);
      const double d = p - (faulty[i] ? hi : lo);
      const double w = std::max(p * (1.0 - p), 1e-12);
      ga += d * x;
      gb += d;
      haa += w * x * x;
      hab += w * x;
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

double PlattCalibrator::Probability(double score) const {
  return Sigmoid(a_ * std::log1p(std::max(0.0, score)) + b_);
}

}  // namespace teller::localize
