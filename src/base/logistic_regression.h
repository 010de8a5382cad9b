// Logistic regression over a few dozen features: P(positive | x) = 1 / (1 + exp(-(w.x + b))),
// features standardized on the training rows, fitted by Newton's method (IRLS) on the
// log-loss with an L2 penalty on w. A standardized feature is clipped at kMaxStandardized
// standard deviations, in the fit and after it: a row beyond the training rows' range reads
// as their edge, not as the fitted line drawn on. Deterministic; the diagnosis's cause decider
// (diagnose/decider.h) is its user.
#pragma once

#include <span>
#include <vector>

namespace teller::base {

class LogisticRegression {
 public:
  static constexpr double kMaxStandardized = 3.0;

  // rows[i] labelled positive[i]; every row has the same width. l2: the penalty on the
  // standardized weights. With one class only, every row gets the smoothed base rate.
  // nonnegative[j] (empty: none) keeps weight j at 0 or above: evidence that may only
  // raise the probability, however the training rows' correlations would sign it.
  static LogisticRegression Fit(const std::vector<std::vector<double>>& rows,
                                const std::vector<bool>& positive, double l2 = 1.0,
                                const std::vector<bool>& nonnegative = {});
  // A model fitted before (its parameters as the accessors give them).
  static LogisticRegression FromParameters(std::vector<double> mean, std::vector<double> scale,
                                           std::vector<double> weights, double bias);

  double Probability(std::span<const double> x) const;
  size_t width() const { return weights_.size(); }
  const std::vector<double>& mean() const { return mean_; }
  const std::vector<double>& scale() const { return scale_; }
  const std::vector<double>& weights() const { return weights_; }  // standardized units
  double bias() const { return bias_; }

 private:
  double Standardized(size_t j, double value) const;

  std::vector<double> mean_, scale_, weights_;
  double bias_ = 0.0;
};

}  // namespace teller::base
