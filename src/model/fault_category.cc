#include "model/fault_category.h"

#include <array>

namespace teller::model {

std::string_view FaultCategoryName(FaultCategory category) {
  static constexpr std::array<std::string_view, kFaultCategoryCount> kNames = {
      "none",           "memory_resource",       "cuda_kernel",
      "runtime_driver", "communication_network", "scheduling_software"};
  return kNames[static_cast<size_t>(category)];
}

FaultCategory FaultCategoryFromName(std::string_view name) {
  for (int c = 0; c < kFaultCategoryCount; ++c) {
    if (FaultCategoryName(static_cast<FaultCategory>(c)) == name) {
      return static_cast<FaultCategory>(c);
    }
  }
  return FaultCategory::kNone;
}

bool IsFaultCategoryName(std::string_view name) {
  return name == "none" || FaultCategoryFromName(name) != FaultCategory::kNone;
}

}  // namespace teller::model
