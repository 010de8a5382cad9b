// The median every stage uses: the middle value of a set, the two middle values
// averaged for an even count, 0 for an empty set. Reorders the values.
#pragma once

#include <algorithm>
#include <vector>

namespace teller::base {

inline double MedianInPlace(std::vector<double>* values) {
  if (values->empty()) return 0.0;
  const size_t mid = values->size() / 2;
  std::nth_element(values->begin(), values->begin() + mid, values->end());
  const double upper = (*values)[mid];
  if (values->size() % 2 == 1) return upper;
  return (*std::max_element(values->begin(), values->begin() + mid) + upper) / 2.0;
}

}  // namespace teller::base
