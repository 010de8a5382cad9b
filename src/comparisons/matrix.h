// Dense row-major feature matrices for the classical comparison methods, their checks,
// and the one feature standardization every learner shares (fit on train, apply
// to test).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace teller::comparisons {

struct Matrix {
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<float> values;  // rows * cols, row-major

  static Matrix Zeros(int64_t rows, int64_t cols) {
    return Matrix{rows, cols, std::vector<float>(static_cast<size_t>(rows * cols), 0.0f)};
  }
  float at(int64_t row, int64_t col) const { return values[static_cast<size_t>(row * cols + col)]; }
  float& at(int64_t row, int64_t col) { return values[static_cast<size_t>(row * cols + col)]; }
  std::span<const float> Row(int64_t row) const {
    return {values.data() + row * cols, static_cast<size_t>(cols)};
  }
};

// Ok when `x` has rows > 0, cols > 0, rows * cols values and only finite
// values; otherwise InvalidArgument naming `what`, the shape or the first bad
// (row, col).
base::Status ValidateMatrix(const Matrix& x, std::string_view what);

// Per-column z-scores: (value - mean) / stddev with the population stddev of
// the training rows. A constant column (stddev below 1e-12 of its scale) maps
// to 0.
class Standardizer {
 public:
  // `x` must be valid (ValidateMatrix).
  static Standardizer Fit(const Matrix& x);
  // InvalidArgument when `x` has another column count than the training matrix.
  base::StatusOr<Matrix> Apply(const Matrix& x) const;
  // The identity on `cols` columns (for learners run without standardization).
  static Standardizer Identity(int64_t cols);

  int64_t cols() const { return static_cast<int64_t>(mean_.size()); }
  const std::vector<double>& mean() const { return mean_; }
  const std::vector<double>& scale() const { return inverse_stddev_; }

 private:
  std::vector<double> mean_;
  std::vector<double> inverse_stddev_;  // 0 for a constant column
};

}  // namespace teller::comparisons
