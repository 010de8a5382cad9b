// The learned model's weights file (weights.bin of a model folder): named float32
// tensors in teller's own layout, so that diagnosis reads them without libtorch.
// Layout, little-endian:
//   "TLWEIGHT" (8 bytes), u32 version (1), u32 tensor count, then per tensor:
//   u32 name length, the name (UTF-8), u32 rank, rank x i64 sizes, the float32 values.
// Readers check every length against the bytes left; errors name the offset.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace teller::learn {

struct NamedTensor {
  std::string name;  // the torch module path, e.g. "joint0.attention.in_proj_weight"
  std::vector<int64_t> shape;
  std::vector<float> values;  // row-major
};
using NamedTensors = std::vector<NamedTensor>;

inline constexpr std::string_view kWeightsMagic = "TLWEIGHT";
inline constexpr uint32_t kWeightsVersion = 1;
inline constexpr const char* kWeightsFileName = "weights.bin";

std::string SerializeWeights(const NamedTensors& tensors);
// `path` names the source in errors.
base::StatusOr<NamedTensors> ParseWeights(std::string_view bytes, const std::string& path);

base::Status WriteWeightsFile(const NamedTensors& tensors, const std::string& path);
base::StatusOr<NamedTensors> ReadWeightsFile(const std::string& path);

}  // namespace teller::learn
