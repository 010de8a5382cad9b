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

// The least sigma of a time or count measured step after step, as a share of its median
// or expected value: identical work jitters by about this much, so a series that held
// still in the baseline does not turn a small change into a huge z. One floor for every
// robust score of the diagnosis (localize's findings and slow regimes, the deviation
// map's cells); `deviation.relative_floor` in base/tuning_list.h overrides it for a run.
inline constexpr double kRelativeSigmaFloor = 0.02;

// Median and MAD of values (reordered and overwritten).
inline std::pair<double, double> MedianAndMad(std::vector<double>* values) {
  const double median = MedianInPlace(values);
  for (double& v : *values) v = std::abs(v - median);
  return {median, MedianInPlace(values)};
}

}  // namespace teller::base
