// Platt scaling of signed decision values: P(positive | f) = 1 / (1 + exp(a * f
// + b)), fitted by Newton's method with backtracking on the log-loss with
// Platt's smoothed targets (Lin, Lin and Weng, 2007). Used by the SVM baseline.
#pragma once

#include <span>
#include <vector>

namespace teller::baselines {

class PlattScaling {
public:
  // decision[i] with positive[i]; both classes should be present (otherwise the
  // fit returns the smoothed base rate for every value).
  static PlattScaling Fit(std::span<const double> decision,
                          const std::vector<bool> &positive);
  double Probability(double decision) const;
  double a() const { return a_; }
  double b() const { return b_; }

private:
  double a_ = 0.0;
  double b_ = 0.0;
};

} // namespace teller::baselines
