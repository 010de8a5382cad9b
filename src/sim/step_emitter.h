// StepEmitter: turns one scheduled engine step into the cross-layer events of
// every rank (STEP/FE/BE host ranges, runtime/driver calls, kernels, copies,
// synchronizations, NCCL collectives) with a duration model, noise, and the
// timing faults of the step: it sets each rank's fault factors, writes the driver's
// ranges, and has each pipeline stage's op list (op_list.h) run by the interpreter
// (interpreter.h). Times in the buffers are true time (ns since run start); the
// simulator converts them to each node's clocks when it writes.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "sim/rng.h"
#include "sim/scheduler.h"
#include "sim/sim_config.h"
#include "wire/records.h"

namespace teller::sim {

// Operator families of labels.json ("affected_families").
enum class Family : uint8_t {
  kGemm,
  kAttention,
  kNorm,
  kRotary,
  kActivation,
  kKvCache,
  kEmbedding,
  kSampling,
  kElementwise,
  kCommunication,
  kSsm,
  kMemory,
  kSync,
  kLaunch,
  kHost,
};
std::string_view FamilyName(Family family);

// The tid of an API call made on ProcessGroupNCCL's watchdog thread rather than the rank's
// main thread (0); the writer gives that thread a tid of its own.
inline constexpr int64_t kNcclWatchdogThread = 1;

// Which table of a RankBuffer an event lives in.
enum class EventTable : uint8_t { kRange, kApi, kKernel, kMemcpy, kSync, kCollective };

// Events of one rank for one step; reused from step to step.
struct RankBuffer {
  int32_t rank = 0;
  std::vector<wire::HostRangeRecord> ranges;
  std::vector<wire::ApiCallRecord> api_calls;
  std::vector<wire::KernelRecord> kernels;
  std::vector<wire::MemcpyRecord> memcpys;
  std::vector<wire::SyncRecord> syncs;
  std::vector<wire::CollectiveRecord> collectives;
  // Affected-by-the-fault flags, parallel to the tables above.
  std::vector<uint8_t> range_hit, api_hit, kernel_hit, memcpy_hit, sync_hit, collective_hit;
  std::vector<Family> kernel_family;  // family of each kernel
  // Storage the STEP range's args point into.
  std::array<wire::Arg, 4> step_args;
  std::vector<std::string_view> step_requests;
  bool any_hit = false;

  void Clear();
  size_t EventCount() const {
    return ranges.size() + api_calls.size() + kernels.size() + memcpys.size() + syncs.size() +
           collectives.size();
  }
};

// What a fault does to the current step's timing and structure.
struct ActiveFault {
  Mechanism mechanism = Mechanism::kGpuThrottle;
  double magnitude = 0;
  int32_t rank = -1;  // -1: every rank
  int32_t node = -1;
  Family family = Family::kAttention;
  int32_t crash_layer = -1;  // illegal access / NCCL hang: layer where it happens
};

// Where an out-of-memory fault's failed allocation was made. A CUDA-graph replay allocates
// nothing (its memory came from the graph's private pool at capture), so on a graph step it
// is the first eager allocation outside the graph.
enum class AllocationSite : uint8_t {
  kNone,
  kAttention,  // the eager attention kernel's workspace (eager or piecewise forward)
  kLogits,     // the logits after a full-graph replay (the LM head's output)
  kInputs,     // the step's input tensors (a pipeline stage with no logits, full graph)
};
std::string_view AllocationSiteName(AllocationSite site);

struct StepResult {
  int64_t end_ns = 0;       // when the engine has the step's output
  int64_t gpu_busy_ns = 0;  // summed kernel time, rank 0
  bool crashed = false;     // illegal memory access, out of memory or NCCL timeout ended the run
  int32_t crash_rank = -1;
  std::string crash_kernel;  // faulting kernel (illegal access)
  // Illegal access: the CUDA call that returned the error (cudaLaunchKernel, cudaMemcpyAsync,
  // cudaStreamSynchronize, or the NCCL watchdog's cudaEventQuery), and whether the faulting
  // kernel was a node of a CUDA-graph replay.
  std::string crash_call;
  bool crash_in_graph = false;
  AllocationSite oom_site = AllocationSite::kNone;  // out of memory: the failed allocation
  std::string crash_collective;                     // hung collective op (NCCL timeout)
  int64_t crash_sequence = -1;
  int64_t crash_numel = 0;
  int32_t crash_group_size = 0;
  int32_t retries = 0;      // driver retries in the step
  int32_t link_spikes = 0;  // loss retransmits in the step
};

// What the step emitter carries from step to step and the interpreter updates.
struct EmitterState {
  std::vector<double> gpu_speed;      // per rank, fixed for the run
  std::vector<uint64_t> correlation;  // per rank next correlation id
  std::vector<int64_t> sequence;      // per communicator
  std::vector<std::string> communicators;
  uint32_t next_graph_id = 1;
  int64_t last_step_ns = 0;  // a normal step's length (0 until one ran)
};

class EngineProfile;
struct Op;
struct RankState;
struct StepContext;

class StepEmitter {
 public:
  // rng: every draw of a step; fault_rng: the draws only faults make.
  StepEmitter(const SimConfig& config, Rng* rng, Rng* fault_rng);

  // Emits step plan starting at start_ns (true time) into one buffer per rank.
  // faults: the faults active in this step (timing/structure ones).
  StepResult EmitStep(const StepPlan& plan, const std::vector<Request>& requests, int64_t start_ns,
                      const std::vector<ActiveFault>& faults, bool cold_start,
                      double benign_pause_ms, std::vector<RankBuffer>* buffers);

  int32_t world() const { return world_; }
  // Rough duration of a normal step (for pause-size faults).
  int64_t last_step_ns() const { return state_.last_step_ns; }

 private:
  // Step-wide effects of the active faults.
  struct StepFaults {
    double link_factor = 1.0;
    double loss_p = 0.0;
    double reorder_p = 0.0;
    int64_t pause_ns = 0;  // engine pause (and benign pause) in the scheduler
    bool pause_hit = false;
  };

  void BuildContexts(const StepPlan& plan, std::vector<StepContext>* ctx, StepContext* shape) const;
  void InitRanks(int64_t start_ns, bool cold_start, std::vector<RankBuffer>* buffers,
                 std::vector<RankState>* st) const;
  StepFaults ApplyFaults(const std::vector<ActiveFault>& faults, double benign_pause_ms,
                         std::vector<RankState>* st);
  std::vector<int64_t> Dispatch(const StepPlan& plan, const StepFaults& faults,
                                std::vector<RankState>* st);
  void RunStages(const std::vector<StepContext>& ctx, const StepContext& shape, ForwardMode mode,
                 const StepFaults& faults, std::vector<Op>* ops, std::vector<RankState>* st,
                 StepResult* result);
  int64_t KillRanks(std::vector<RankState>* st) const;
  void ProcessOutput(const StepPlan& plan, std::vector<RankState>* st);
  // Engine cores, each with its scheduler and its share of the ranks.
  int32_t EngineCores() const;
  size_t EntriesOfCore(const StepPlan& plan, int32_t core) const;
  void CloseSteps(const StepPlan& plan, const std::vector<Request>& requests,
                  const std::vector<int64_t>& step_start, bool crashed, int64_t kill_ns,
                  std::vector<RankState>* st);

  SimConfig config_;
  const EngineProfile& profile_;
  Rng* rng_;
  Rng* fault_rng_;
  int32_t world_ = 1;
  int32_t dp_size_ = 1;
  EmitterState state_;
  std::vector<int64_t> host_ns_;    // per rank host cursor
  std::vector<int64_t> stream_ns_;  // per rank compute stream free time
  std::vector<int64_t> comm_stream_ns_;
  std::deque<std::string> names_;  // model class names of the op lists, kept for the run
};

}  // namespace teller::sim
