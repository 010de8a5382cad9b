// Platt scaling: maps a raw anomaly score to a probability of being faulty,
// p = 1 / (1 + exp(-(a * log1p(score) + b))), fitted on labeled scores (the
// simulator's labels) so later stages can threshold at a chosen prior.
#pragma once

#include <vector>

namespace teller::localize {

class PlattCalibrator {
 public:
  // Newton's method on the log-loss with Platt's smoothed targets
  // ((positives + 1) / (positives + 2), 1 / (negatives + 2)). Needs both classes;
  // otherwise the calibrator returns the smoothed base rate for every score.
  static PlattCalibrator Fit(const std::vector<double>& scores, const std::vector<bool>& faulty);
  // A calibrator fitted before (its a and b, as written by a() and b()).
  static PlattCalibrator FromParameters(double a, double b) {
    PlattCalibrator out;
    out.a_ = a;
    out.b_ = b;
    return out;
  }
  double Probability(double score) const;
  double a() const { return a_; }
  double b() const { return b_; }

 private:
  double a_ = 0.0;
  double b_ = 0.0;
};

}  // namespace teller::localize
