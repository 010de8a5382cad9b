#include "base/logistic_regression.h"

#include <algorithm>
#include <cmath>

namespace teller::base {
namespace {

double LogisticOf(double z) {
  return z >= 0 ? 1.0 / (1.0 + std::exp(-z)) : std::exp(z) / (1.0 + std::exp(z));
}

// Solves a x = b in place (a: n x n, row-major) by Gaussian elimination with partial
// pivoting; a singular pivot leaves that unknown at 0.
std::vector<double> SolveByElimination(std::vector<double> a, std::vector<double> b) {
  const size_t n = b.size();
  for (size_t col = 0; col < n; ++col) {
    size_t pivot = col;
    for (size_t r = col + 1; r < n; ++r) {
      if (std::abs(a[r * n + col]) > std::abs(a[pivot * n + col])) pivot = r;
    }
    if (std::abs(a[pivot * n + col]) < 1e-12) continue;
    if (pivot != col) {
      for (size_t c = 0; c < n; ++c) std::swap(a[col * n + c], a[pivot * n + c]);
      std::swap(b[col], b[pivot]);
    }
    for (size_t r = col + 1; r < n; ++r) {
      const double factor = a[r * n + col] / a[col * n + col];
      if (factor == 0) continue;
      for (size_t c = col; c < n; ++c) a[r * n + c] -= factor * a[col * n + c];
      b[r] -= factor * b[col];
    }
  }
  std::vector<double> x(n, 0.0);
  for (size_t i = n; i-- > 0;) {
    if (std::abs(a[i * n + i]) < 1e-12) continue;
    double sum = b[i];
    for (size_t c = i + 1; c < n; ++c) sum -= a[i * n + c] * x[c];
    x[i] = sum / a[i * n + i];
  }
  return x;
}

// Projected Newton for weights kept at 0 or above: one at its bound whose gradient would
// push it below is held there this step (its row and column of the system left out).
void HoldAtBound(const std::vector<bool>& nonnegative, const std::vector<double>& theta,
                 std::vector<double>* gradient, std::vector<double>* hessian) {
  const size_t n = theta.size();
  for (size_t j = 0; j < nonnegative.size() && j < n; ++j) {
    if (!nonnegative[j] || theta[j] > 0.0 || (*gradient)[j] <= 0.0) continue;
    for (size_t k = 0; k < n; ++k) (*hessian)[j * n + k] = (*hessian)[k * n + j] = 0.0;
    (*hessian)[j * n + j] = 1.0;
    (*gradient)[j] = 0.0;
  }
}

}  // namespace

LogisticRegression LogisticRegression::Fit(const std::vector<std::vector<double>>& rows,
                                           const std::vector<bool>& positive, double l2,
                                           const std::vector<bool>& nonnegative) {
  LogisticRegression out;
  const size_t m = std::min(rows.size(), positive.size());
  const size_t width = m ? rows[0].size() : 0;
  out.mean_.assign(width, 0.0);
  out.scale_.assign(width, 1.0);
  out.weights_.assign(width, 0.0);
  size_t positives = 0;
  for (size_t i = 0; i < m; ++i) positives += positive[i];
  out.bias_ = std::log((positives + 1.0) / (m - positives + 1.0));
  if (positives == 0 || positives == m) return out;
  for (size_t j = 0; j < width; ++j) {
    double sum = 0, squares = 0;
    for (size_t i = 0; i < m; ++i) sum += rows[i][j];
    out.mean_[j] = sum / m;
    for (size_t i = 0; i < m; ++i)
      squares += (rows[i][j] - out.mean_[j]) * (rows[i][j] - out.mean_[j]);
    const double sd = std::sqrt(squares / m);
    out.scale_[j] = sd > 1e-12 ? sd : 1.0;
  }
  // Unknowns: the weights, then the bias (not penalized).
  const size_t n = width + 1;
  std::vector<double> theta(n, 0.0);
  theta[width] = out.bias_;
  std::vector<double> z(n);
  for (int iteration = 0; iteration < 50; ++iteration) {
    std::vector<double> gradient(n, 0.0), hessian(n * n, 0.0);
    for (size_t i = 0; i < m; ++i) {
      for (size_t j = 0; j < width; ++j) z[j] = out.Standardized(j, rows[i][j]);
      z[width] = 1.0;
      double logit = 0;
      for (size_t j = 0; j < n; ++j) logit += theta[j] * z[j];
      const double p = LogisticOf(logit);
      const double residual = p - (positive[i] ? 1.0 : 0.0);
      const double curvature = std::max(p * (1 - p), 1e-9);
      for (size_t j = 0; j < n; ++j) {
        gradient[j] += residual * z[j];
        for (size_t k = j; k < n; ++k) hessian[j * n + k] += curvature * z[j] * z[k];
      }
    }
    for (size_t j = 0; j < n; ++j) {
      for (size_t k = 0; k < j; ++k) hessian[j * n + k] = hessian[k * n + j];
    }
    for (size_t j = 0; j < width; ++j) {
      gradient[j] += l2 * theta[j];
      hessian[j * n + j] += l2;
    }
    HoldAtBound(nonnegative, theta, &gradient, &hessian);
    const std::vector<double> step = SolveByElimination(hessian, gradient);
    double largest = 0;
    for (size_t j = 0; j < n; ++j) {
      const double before = theta[j];
      theta[j] -= step[j];
      if (j < nonnegative.size() && nonnegative[j]) theta[j] = std::max(0.0, theta[j]);
      largest = std::max(largest, std::abs(theta[j] - before));
    }
    if (largest < 1e-8) break;
  }
  std::copy(theta.begin(), theta.begin() + static_cast<ptrdiff_t>(width), out.weights_.begin());
  out.bias_ = theta[width];
  return out;
}

LogisticRegression LogisticRegression::FromParameters(std::vector<double> mean,
                                                      std::vector<double> scale,
                                                      std::vector<double> weights, double bias) {
  LogisticRegression out;
  out.mean_ = std::move(mean);
  out.scale_ = std::move(scale);
  out.weights_ = std::move(weights);
  out.bias_ = bias;
  return out;
}

double LogisticRegression::Standardized(size_t j, double value) const {
  return std::clamp((value - mean_[j]) / scale_[j], -kMaxStandardized, kMaxStandardized);
}

double LogisticRegression::Probability(std::span<const double> x) const {
  double logit = bias_;
  for (size_t j = 0; j < weights_.size() && j < x.size(); ++j) {
    logit += weights_[j] * Standardized(j, x[j]);
  }
  return LogisticOf(logit);
}

}  // namespace teller::base
