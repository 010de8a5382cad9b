// The op list of one pipeline stage (what the engine's Python code and kernels do in a
// step, in order) and the per-rank state it runs with. Shared by the op-list builder
// (op_list.cc), the interpreter (interpreter.cc) and the step emitter; not a public API.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/sim_config.h"
#include "sim/step_emitter.h"
#include "sim/time_units.h"
#include "wire/records.h"

namespace teller::sim {

inline constexpr int64_t kComputeStream = 7;
inline constexpr int64_t kNcclStream = 13;
// Relative noise (log-normal sigma) of a device op's and of a host call's duration.
inline constexpr double kDeviceNoiseSigma = 0.06;
inline constexpr double kHostNoiseSigma = 0.35;
inline constexpr int64_t kNcclTimeoutNs = 600LL * 1000 * kMs;  // torch default 10 min
inline constexpr int64_t kKillDelayNs = 2 * 1000 * kMs;

enum class OpKind : uint8_t {
  kOpen,
  kClose,
  kKernel,
  kCollective,
  kCopyIn,
  kCopyOut,
  kSyncOut,
  kSend,
  kRecv,
};
enum class Work : uint8_t {
  kNone,
  kGemm,
  kLmHead,
  kAttention,
  kAttnCombine,
  kElem,
  kCache,
  kSsmScan,
  kSsmUpdate,
  kConv,
  kEmbed,
  kSample,
  kAllReduce,
  kAllGather,
  kParamGather,
  kSendRecv,
  // The modern preset (appended so the kinds above keep their values).
  kMoeGemm,        // grouped expert GEMM: n, k of one expert over the routed tokens
  kMoeRoute,       // routing, alignment, finalize: elementwise over tokens x experts
  kNvlsAllReduce,  // NVLS multimem all-reduce (no NCCL record)
  kAllToAll,       // expert-parallel dispatch / combine over every rank
};
enum class Api : uint8_t { kLaunch, kLaunchEx, kDriverEx, kNone };
// kWorld: every rank of a lock-step data-parallel serving engine (expert parallelism).
enum class Comm : uint8_t { kTp, kPp, kDp, kWorld };

inline bool IsMamba(const ModelSpec& model, int32_t layer) {
  return model.mamba_period > 0 && layer % model.mamba_period == 0;
}

// One entry of a stage's op list.
struct Op {
  OpKind kind = OpKind::kKernel;
  wire::RangeLayer layer = wire::RangeLayer::kFe;
  std::string_view name;
  Api api = Api::kLaunch;
  Family family = Family::kElementwise;
  Work work = Work::kNone;
  int64_t n = 0, k = 0;     // gemm dims, element width, attention part mask
  bool graph_full = true;   // captured in a full CUDA graph
  bool graph_piece = true;  // captured in a piecewise graph (attention is not)
  Comm comm = Comm::kTp;
  int16_t layer_index = -1;
  bool send = false;         // kSendRecv: true send, false recv
  bool decode_path = false;  // a decode-path kernel (misroute evidence)
  bool reordered = false;    // moved by the operator-reorder fault
  std::string_view coll_op;  // "all_reduce", ...
};

// Per data-parallel rank: the work of the step.
struct StepContext {
  int64_t tokens = 0;
  int64_t seqs = 0;  // sequences that sample
  int64_t prefill_tokens = 0;
  int64_t decode_seqs = 0;
  double prefill_attn = 0;  // sum tokens * (context + tokens / 2)
  double decode_ctx = 0;    // sum context of decode sequences
  bool has_prefill = false;
  bool has_decode = false;
  bool has_misroute = false;
};

struct RankState {
  int32_t rank = 0;
  int32_t dp = 0;
  RankBuffer* buf = nullptr;
  int64_t host = 0;
  int64_t stream = 0;
  int64_t comm_stream = 0;
  bool stopped = false;
  std::vector<std::pair<const Op*, int64_t>> open;  // open ranges, start times
  std::vector<uint8_t> open_hit;
  // graph replay state
  bool in_graph = false;
  uint64_t graph_corr = 0;
  uint32_t graph_id = 0;
  uint64_t graph_node = 0;
  int64_t graph_gpu = 0;
  // fault factors for this step
  double host_factor = 1.0;
  double kernel_factor = 1.0;
  double contention = 0.0;
  double launch_factor = 1.0;
  double copy_factor = 1.0;
  double sync_extra = 0.0;
  double retry_p = 0.0;
  Family slow_family = Family::kHost;
  double family_factor = 1.0;
  bool allocator_slow = false;
  bool fragmentation = false;
  bool alloc_hit = false;
  int32_t alloc_bursts = 0;
  double alloc_fraction = 0.0;
  bool straggler = false;
  bool host_pressure = false;
  bool launch_hit = false;
  bool copy_hit = false;
  bool sync_hit = false;
  bool kernel_hit = false;
  int32_t crash_layer = -1;  // illegal access here
  int32_t hang_layer = -1;   // NCCL hang here
  int32_t oom_layer = -1;    // an allocation fails here (its attention's workspace)
  double oom_gib = 0.0;      // what that allocation asked for
  // A kernel of a graph replay faulted at this device time: the device runs nothing more,
  // and the host learns of it at its first CUDA call after it (-1: no fault).
  int64_t device_fault_ns = -1;
  double reorder_p = 0.0;
  size_t stage_send_kernel = SIZE_MAX;  // index of the PP send kernel in buf
};

}  // namespace teller::sim
