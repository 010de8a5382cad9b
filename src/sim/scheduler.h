// EngineScheduler: the batching model of each engine (the BatchingPolicy of its
// EngineProfile). It owns the requests and the KV-block budget and decides, step by
// step, which requests run with how many tokens: continuous batching with a token
// budget, chunked prefill (vLLM v1), prefill-first batches (vLLM v0, SGLang),
// radix-cache hits (SGLang), static batches per data-parallel rank (Torch FSDP),
// preemption with recompute when KV blocks run out. Scheduling faults (KV pressure, starvation,
// misrouting) act here; timing faults act in the step emitter.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/fault_spec.h"
#include "sim/rng.h"
#include "sim/sim_config.h"

namespace teller::sim {

enum class RequestState { kPending, kWaiting, kRunning, kFinished, kAborted };
enum class StepPhase { kPrefill, kDecode, kMixed };
std::string_view PhaseName(StepPhase phase);

struct Request {
  std::string id;
  int32_t index = 0;
  int64_t arrival_ns = 0;  // true time since run start
  int32_t prompt_tokens = 0;
  int32_t output_tokens = 0;  // tokens it will generate
  int32_t prefix_tokens = 0;  // shared system-prompt tokens (radix/prefix cache)
  int32_t dp_rank = 0;        // FSDP: the rank that serves it
  RequestState state = RequestState::kPending;
  int32_t computed_tokens = 0;  // tokens whose KV exists
  int32_t generated = 0;
  int32_t blocks = 0;
  int32_t preemptions = 0;
  int32_t first_step = -1;
  int32_t last_step = -1;
  int64_t first_token_ns = -1;
  int64_t finish_ns = -1;
  bool misrouted = false;
  bool starved = false;
  int32_t cached_hit_tokens = 0;  // radix-cache hit at its last prefill
  int32_t TotalTokens() const { return prompt_tokens + generated; }
  // Prompt (or recompute) work left: a decoding request has every token but the
  // last sampled one computed.
  bool InPrefill() const { return computed_tokens < TotalTokens() - (generated > 0 ? 1 : 0); }
};

struct StepEntry {
  int32_t request = 0;         // index into requests()
  int32_t tokens = 0;          // tokens computed this step
  int32_t context_before = 0;  // tokens with KV before the step
  bool prefill = false;        // a prompt (or recompute) chunk
  bool samples = false;        // emits a token this step
  bool misrouted = false;      // new request sent down the decode path
  int32_t cached_tokens = 0;   // radix/prefix-cache hit counted at its first chunk
  int32_t dp_rank = 0;
};

struct StepPlan {
  int32_t step = 0;
  std::vector<StepEntry> entries;
  StepPhase phase = StepPhase::kDecode;
  std::vector<int32_t> preempted;  // requests preempted before this step
  std::vector<int32_t> added;      // requests scheduled for the first time
  int32_t prefill_tokens = 0;
  int32_t decode_tokens = 0;
  bool warmup = false;  // CUDA-graph capture / dummy run, no requests
  int32_t kv_blocks_used = 0;
  int32_t kv_blocks_total = 0;
  int32_t waiting = 0;
  int32_t running = 0;
  // FSDP: entries of one data-parallel rank.
  StepPhase PhaseOfRank(int32_t dp_rank) const;
};

class EngineScheduler {
 public:
  EngineScheduler(const SimConfig& config, Rng* rng);

  // Time of the next arrival after now_ns, or -1 when none is left.
  int64_t NextArrivalNs() const;
  bool Done() const;
  // Builds the next step at now_ns; false when nothing can run now (idle).
  bool Schedule(int32_t step, int64_t now_ns, StepPlan* plan);
  // Applies a finished step: tokens computed, sampled tokens, finished requests.
  // Returns the requests that finished in it.
  std::vector<int32_t> Complete(const StepPlan& plan, int64_t end_ns);
  // Aborts every request that has not finished (the engine died).
  std::vector<int32_t> AbortAll(int64_t now_ns);

  const std::vector<Request>& requests() const { return requests_; }
  std::vector<Request>& mutable_requests() { return requests_; }
  int32_t kv_blocks_total() const { return effective_blocks_; }
  int32_t kv_blocks_used() const { return used_blocks_; }
  int64_t total_preemptions() const { return total_preemptions_; }
  int32_t running_count() const { return static_cast<int32_t>(running_.size()); }

  // Scheduling faults, set by the simulator for the current step.
  void SetKvCapacityFactor(double factor) { kv_factor_ = factor; }
  void SetStarvedRequest(int32_t request) { starved_request_ = request; }
  void SetMisrouteNext(bool misroute) { misroute_next_ = misroute; }
  bool misroute_pending() const { return misroute_next_; }

 private:
  void Admit(int64_t now_ns);
  int32_t BlocksFor(int32_t tokens) const;
  bool TryGrow(Request* request, int32_t new_total_tokens);
  void Preempt(int32_t index, StepPlan* plan);
  // Makes room for tokens more of the running request at position, preempting the
  // newest running requests first; preempts the request itself (returns false)
  // when even that is not enough.
  bool GrowOrPreempt(Request* request, size_t position, int32_t tokens, StepPlan* plan);
  bool ScheduleChunked(StepPlan* plan);
  bool SchedulePrefillFirst(StepPlan* plan);
  bool ScheduleStatic(StepPlan* plan);
  void AddEntry(StepPlan* plan, Request* request, int32_t tokens, bool prefill);

  SimConfig config_;
  std::vector<Request> requests_;
  std::vector<int32_t> waiting_;  // FCFS
  std::vector<int32_t> running_;  // in admission order
  int32_t used_blocks_ = 0;
  int32_t effective_blocks_ = 0;
  double kv_factor_ = 1.0;
  int32_t starved_request_ = -1;
  bool misroute_next_ = false;
  int64_t total_preemptions_ = 0;
  std::vector<int32_t> fsdp_batch_;  // per dp rank: requests left in its static batch
  int32_t dp_size_ = 1;
};

// Request ids in each engine's style (cmpl-..., hex rids, "0", "1", ...); draws two
// words whatever the style.
std::string MakeRequestId(EngineKind engine, const std::string& run_id, int32_t index, Rng* rng);

}  // namespace teller::sim
