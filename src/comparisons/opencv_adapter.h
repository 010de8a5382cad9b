// Internal: the edge between teller and OpenCV's ml module. Matrices become
// cv::Mat views, every OpenCV call runs inside CallOpenCv so no cv::Exception
// escapes.
#pragma once

#include <cstdint>
#include <exception>
#include <string_view>

#include <opencv2/core.hpp>

#include "base/status.h"
#include "comparisons/matrix.h"

namespace teller::comparisons::internal {

// A CV_32F view of x's values (no copy): valid while x lives and is not
// resized.
inline cv::Mat AsCvMat(const Matrix& x) {
  return cv::Mat(static_cast<int>(x.rows), static_cast<int>(x.cols), CV_32F,
                 const_cast<float*>(x.values.data()));
}

// cv::kmeans and EM's initialization draw from the calling thread's
// cv::theRNG().
inline void SeedOpenCv(uint64_t seed) { cv::theRNG().state = seed != 0 ? seed : 0xffffffffull; }

template <typename Call>
base::Status CallOpenCv(std::string_view what, Call&& call) {
  try {
    call();
  } catch (const cv::Exception& e) {
    return base::Internal("{}: OpenCV failed: {}", what, e.what());
  } catch (const std::exception& e) {
    return base::Internal("{}: {}", what, e.what());
  }
  return base::OkStatus();
}

}  // namespace teller::comparisons::internal
