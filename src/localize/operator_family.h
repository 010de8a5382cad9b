// Operator families: names that mean the same operation on every GPU, vendor
// library and engine (a GEMM is a GEMM whether cuBLAS, CUTLASS, hipBLASLt or a
// Triton matmul), so what is learned on one deployment transfers to another.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/layer.h"
#include "model/trace.h"

namespace teller::localize {

enum class OperatorFamily : uint8_t {
  kUnnamed,  // no rule matched
  // Device compute.
  kGemm,
  kConv,
  kAttention,
  kNorm,
  kSoftmax,
  kRotary,
  kActivation,
  kElementwise,
  kReduction,
  kSampling,
  kQuantization,
  kMoe,
  kEmbedding,
  kKvCache,
  kOptimizer,
  kPooling,
  kSort,
  kIndexing,  // gather / scatter / cat / index / permute
  kFused,     // compiler-generated (Triton / Inductor) kernels with no better name
  // Device copies.
  kMemcpy,
  kMemset,
  // Collectives (device kernels and host records).
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kSendRecv,
  kBroadcast,
  kCollectiveOther,
  // Host side.
  kSync,          // stream / event / device synchronization
  kLaunch,        // kernel launch calls (runtime or driver)
  kGraphLaunch,   // CUDA/HIP graph launch
  kCopy,          // host memcpy / memset calls
  kAlloc,         // cudaMalloc / cudaFree / host alloc
  kRuntimeOther,  // other runtime / driver calls
  kHostOp,        // backend op (aten::*, library call): fallback for BE
  kFrontend,      // engine step and framework ranges (STEP / FE)
};
inline constexpr int kOperatorFamilyCount = static_cast<int>(OperatorFamily::kFrontend) + 1;

std::string_view OperatorFamilyName(OperatorFamily family);

// Family of an event from its layer and name: case-insensitive substring rules,
// first match wins (see kRules in operator_family.cc and docs/localize.md).
OperatorFamily ClassifyOperator(model::Layer layer, std::string_view name);

// True for families of work on a GPU (kernels, device copies, collectives).
bool IsDeviceFamily(OperatorFamily family);
bool IsCollectiveFamily(OperatorFamily family);
// Device compute kernels (kGemm to kFused): no copies, no collectives.
bool IsComputeFamily(OperatorFamily family);

// How much device time (kernels, device copies, collective kernels) of a trace
// falls into a named family.
struct FamilyCoverage {
  int64_t device_events = 0;
  int64_t device_time_ns = 0;
  int64_t named_time_ns = 0;
  std::vector<int64_t> time_by_family_ns;  // kOperatorFamilyCount entries
  // Unnamed kernels by total time, longest first.
  std::vector<std::pair<std::string, int64_t>> top_unnamed;
  double named_share() const {
    return device_time_ns > 0 ? static_cast<double>(named_time_ns) / device_time_ns : 1.0;
  }
};

FamilyCoverage ComputeFamilyCoverage(const model::Trace& trace, size_t top_unnamed_count);

// The family of every distinct name of a trace, indexed by StringId and layer,
// so hot loops classify each name once.
class FamilyCache {
 public:
  explicit FamilyCache(const model::Trace& trace) : trace_(trace) {}
  OperatorFamily Get(model::EventRow row);

 private:
  const model::Trace& trace_;
  // (layer * strings) flattened lazily; 0xff = not classified yet.
  std::vector<uint8_t> families_;
};

}  // namespace teller::localize
