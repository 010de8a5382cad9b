// Platt scaling: P(positive | x) = 1 / (1 + exp(-(a x + b))), fitted on labelled values
// by Newton's method on the log-loss with Platt's smoothed targets ((positives + 1) /
// (positives + 2) for a positive, 1 / (negatives + 2) for a negative). Used by the
// rule diagnosis's calibration (diagnose/calibration.h) and the SVM comparison method.
#pragma once

#include <span>
#include <vector>

namespace teller::base {

class PlattScaler {
 public:
  // Two solvers, each kept because fitted models and published figures depend on its
  // exact numbers.
  enum class Solver {
    // Newton steps with a backtracking line search on the loss, stopped when the
    // gradient is below 1e-5 (Lin, Lin and Weng, 2007). The SVM comparison method's.
    kLineSearch,
    // Plain Newton steps with a 1e-9 ridge, stopped when a step is below 1e-10.
    // The diagnosis calibration's.
    kNewton,
  };

  // x[i] labelled positive[i] (the shorter length counts). Needs both classes;
  // otherwise every value gets the smoothed base rate (a = 0).
  static PlattScaler Fit(std::span<const double> x, const std::vector<bool>& positive,
                         Solver solver);
  // A scaler fitted before (its a and b, as written by a() and b()).
  static PlattScaler FromParameters(double a, double b) {
    PlattScaler out;
    out.a_ = a;
    out.b_ = b;
    return out;
  }
  double Probability(double x) const;
  double a() const { return a_; }
  double b() const { return b_; }

 private:
  static PlattScaler FitLineSearch(std::span<const double> x, const std::vector<bool>& positive);
  static PlattScaler FitNewton(std::span<const double> x, const std::vector<bool>& positive);

  double a_ = 0.0;
  double b_ = 0.0;
};

}  // namespace teller::base
