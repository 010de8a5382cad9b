// The fault categories teller names (the benchmark's labels.json "category", the
// signature catalog's "category"), plus none.
#pragma once

#include <cstdint>
#include <string_view>

namespace teller::model {

enum class FaultCategory : uint8_t {
  kNone,
  kMemoryResource,
  kCudaKernel,
  kRuntimeDriver,
  kCommunicationNetwork,
  kSchedulingSoftware,
};
inline constexpr int kFaultCategoryCount = 6;

// "none", "memory_resource", "cuda_kernel", "runtime_driver", "communication_network",
// "scheduling_software".
std::string_view FaultCategoryName(FaultCategory category);
// kNone for an unknown name.
FaultCategory FaultCategoryFromName(std::string_view name);
// True when name is one of the names above (none included).
bool IsFaultCategoryName(std::string_view name);

}  // namespace teller::model
