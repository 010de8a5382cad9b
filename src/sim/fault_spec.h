// Fault mechanisms of the simulator: five categories (paper section 4.2), several
// mechanisms each, every one with magnitude, onset, duration and target.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace teller::sim {

enum class FaultCategory { kMemory, kCudaKernel, kRuntimeDriver, kCommunication, kScheduling };
inline constexpr FaultCategory kAllCategories[] = {
    FaultCategory::kMemory, FaultCategory::kCudaKernel, FaultCategory::kRuntimeDriver,
    FaultCategory::kCommunication, FaultCategory::kScheduling};
// "memory_resource", "cuda_kernel", "runtime_driver", "communication_network",
// "scheduling_software": the fault_type strings of labels.json.
std::string_view CategoryName(FaultCategory category);

enum class Mechanism {
  // memory/resource
  kKvCachePressure,
  kHostMemoryPressure,
  kAllocatorSlowPath,
  kMemoryFragmentation,
  kOutOfMemory,
  // CUDA/kernel
  kGpuThrottle,
  kKernelSlowdown,
  kKernelContention,
  kIllegalMemoryAccess,
  // runtime/driver
  kLaunchLatency,
  kMemcpyLatency,
  kSyncLatency,
  kDriverRetry,
  // communication/network
  kLinkDegradation,
  kStragglerRank,
  kNcclTimeout,
  // scheduling/software
  kOperatorReorder,
  kStarvedRequest,
  kDecodeMisroute,
  kEnginePause,
};

struct MechanismInfo {
  Mechanism mechanism;
  std::string_view name;  // CLI and labels name, snake_case
  FaultCategory category;
  double default_magnitude;  // mild end: tens of percent, or the unit the doc names
  std::string_view magnitude_unit;
  int32_t default_duration_steps;
  bool leaves_logs;  // whether the engine's logs usually show it
  std::string_view summary;
  // Drawn by the dataset presets. A mechanism added after the results of docs/results.md
  // were drawn stays out until they are drawn again (it would reshuffle every draw).
  bool drawn_by_presets = true;
};

std::span<const MechanismInfo> AllMechanisms();
const MechanismInfo& InfoOf(Mechanism mechanism);
base::StatusOr<Mechanism> ParseMechanism(std::string_view name);

// One injected fault. Negative targets mean "the simulator picks from the seed".
struct FaultSpec {
  Mechanism mechanism = Mechanism::kGpuThrottle;
  double magnitude = -1;        // <0: the mechanism's default
  int32_t onset_step = -1;      // engine step where it starts (<0: picked)
  int32_t duration_steps = -1;  // how many steps it lasts (<0: default)
  int32_t rank = -1;            // target rank (GPU) for per-rank mechanisms
  int32_t node = -1;            // target node (link, host memory)
  std::string family;           // target operator family (kernel_slowdown): gemm,
                                // attention, norm, activation, rotary, ...
  std::string request;          // target request id (starved_request, misroute)
};

// Parses "mech[:key=value,...][;mech...]". Keys: magnitude|mag, onset, duration|dur,
// rank, node, family, request. Errors name the fragment and the expected keys.
base::StatusOr<std::vector<FaultSpec>> ParseFaults(std::string_view text);
// Round-trips through ParseFaults.
std::string FormatFault(const FaultSpec& fault);

}  // namespace teller::sim
