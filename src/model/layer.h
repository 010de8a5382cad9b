// Layers of the inference stack: the node types and tokens of teller.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace teller::model {

enum class Layer : uint8_t {
  kStep,   // engine step (carries request ids and phase)
  kFe,     // framework / engine Python function or module range
  kBe,     // backend op: aten op, library call
  kRt,     // CUDA/HIP runtime call
  kDrv,    // driver call
  kK,      // GPU kernel
  kMem,    // memcpy / memset
  kComm,   // collective or its kernel
  kSync,   // stream / event / device synchronization
  kOther,  // markers, counters and anything unclassified
};
inline constexpr int kLayerCount = 10;

std::string_view LayerName(Layer layer);

// Work the GPU itself runs: kernels, copies and memsets, collectives. Not the host's
// calls, and not synchronizations (waits, whichever timeline records them).
constexpr bool IsDeviceWork(Layer layer) {
  return layer == Layer::kK || layer == Layer::kMem || layer == Layer::kComm;
}
std::optional<Layer> ParseLayer(std::string_view name);

}  // namespace teller::model
