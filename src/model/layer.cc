#include "model/layer.h"

#include <array>

namespace teller::model {
namespace {
constexpr std::array<std::string_view, kLayerCount> kNames = {
    "STEP", "FE", "BE", "RT", "DRV", "K", "MEM", "COMM", "SYNC", "OTHER"};
}  // namespace

std::string_view LayerName(Layer layer) { return kNames[static_cast<int>(layer)]; }

std::optional<Layer> ParseLayer(std::string_view name) {
  for (int i = 0; i < kLayerCount; ++i) {
    if (kNames[i] == name) return static_cast<Layer>(i);
  }
  return std::nullopt;
}

}  // namespace teller::model
