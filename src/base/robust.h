// Robust spread: the median absolute deviation (MAD) scaled to a normal's sigma, as
// every stage that scores a value against its normal measures it. The resolution floor
// under a sigma is each scorer's own tuned value (base/tuning_list.h).
#pragma once

#include <cmath>
#include <utility>
#include <vector>

#include "base/median.h"

namespace teller::base {

// A normal distribution's sigma is 1.4826 times its MAD (1 / the 0.75 quantile of N(0, 1)).
inline constexpr double kMadToSigma = 1.4826;

inline double SigmaOfMad(double mad) { return kMadToSigma * mad; }

// Median and MAD of values (reordered and overwritten).
inline std::pair<double, double> MedianAndMad(std::vector<double>* values) {
  const double median = MedianInPlace(values);
  for (double& v : *values) v = std::abs(v - median);
  return {median, MedianInPlace(values)};
}

}  // namespace teller::base
