#include "comparisons/matrix.h"

#include <cmath>

namespace teller::comparisons {

base::Status ValidateMatrix(const Matrix& x, std::string_view what) {
  if (x.rows <= 0 || x.cols <= 0) {
    return base::InvalidArgument("{}: expected a non-empty matrix, got {} x {}", what, x.rows,
                                 x.cols);
  }
  if (static_cast<int64_t>(x.values.size()) != x.rows * x.cols) {
    return base::InvalidArgument("{}: a {} x {} matrix needs {} values, got {}", what, x.rows,
                                 x.cols, x.rows * x.cols, x.values.size());
  }
  for (size_t i = 0; i < x.values.size(); ++i) {
    if (!std::isfinite(x.values[i])) {
      return base::InvalidArgument("{}: value at row {}, column {} is {}, expected a finite number",
                                   what, static_cast<int64_t>(i) / x.cols,
                                   static_cast<int64_t>(i) % x.cols, x.values[i]);
    }
  }
  return base::OkStatus();
}

Standardizer Standardizer::Fit(const Matrix& x) {
  Standardizer result;
  result.mean_.assign(static_cast<size_t>(x.cols), 0.0);
  result.inverse_stddev_.assign(static_cast<size_t>(x.cols), 0.0);
  if (x.rows <= 0) return result;
  for (int64_t r = 0; r < x.rows; ++r) {
    for (int64_t c = 0; c < x.cols; ++c) result.mean_[c] += x.at(r, c);
  }
  for (double& mean : result.mean_) mean /= static_cast<double>(x.rows);
  std::vector<double> variance(static_cast<size_t>(x.cols), 0.0);
  for (int64_t r = 0; r < x.rows; ++r) {
    for (int64_t c = 0; c < x.cols; ++c) {
      const double d = x.at(r, c) - result.mean_[c];
      variance[c] += d * d;
    }
  }
  for (int64_t c = 0; c < x.cols; ++c) {
    const double stddev = std::sqrt(variance[c] / static_cast<double>(x.rows));
    const double magnitude = std::max(1.0, std::abs(result.mean_[c]));
    result.inverse_stddev_[c] = stddev > 1e-12 * magnitude ? 1.0 / stddev : 0.0;
  }
  return result;
}

Standardizer Standardizer::Identity(int64_t cols) {
  Standardizer result;
  result.mean_.assign(static_cast<size_t>(cols), 0.0);
  result.inverse_stddev_.assign(static_cast<size_t>(cols), 1.0);
  return result;
}

base::StatusOr<Matrix> Standardizer::Apply(const Matrix& x) const {
  if (x.cols != cols()) {
    return base::InvalidArgument("standardize: expected {} columns (as in training), got {}",
                                 cols(), x.cols);
  }
  Matrix out = Matrix::Zeros(x.rows, x.cols);
  for (int64_t r = 0; r < x.rows; ++r) {
    for (int64_t c = 0; c < x.cols; ++c) {
      out.at(r, c) = static_cast<float>((x.at(r, c) - mean_[c]) * inverse_stddev_[c]);
    }
  }
  return out;
}

}  // namespace teller::comparisons
