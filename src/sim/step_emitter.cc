#include "sim/step_emitter.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "sim/engine_profile.h"
#include "sim/interpreter.h"
#include "sim/op_list.h"
#include "sim/step_ops.h"

namespace teller::sim {

std::string_view FamilyName(Family family) {
  switch (family) {
    case Family::kGemm:
      return "gemm";
    case Family::kAttention:
      return "attention";
    case Family::kNorm:
      return "norm";
    case Family::kRotary:
      return "rotary";
    case Family::kActivation:
      return "activation";
    case Family::kKvCache:
      return "kv_cache";
    case Family::kEmbedding:
      return "embedding";
    case Family::kSampling:
      return "sampling";
    case Family::kElementwise:
      return "elementwise";
    case Family::kCommunication:
      return "communication";
    case Family::kSsm:
      return "ssm";
    case Family::kMemory:
      return "memory";
    case Family::kSync:
      return "sync";
    case Family::kLaunch:
      return "launch";
    case Family::kHost:
      return "host";
  }
  return "other";
}

std::string_view AllocationSiteName(AllocationSite site) {
  switch (site) {
    case AllocationSite::kNone:
      return "";
    case AllocationSite::kAttention:
      return "attention workspace";
    case AllocationSite::kLogits:
      return "logits";
    case AllocationSite::kInputs:
      return "input tensors";
  }
  return "";
}

void RankBuffer::Clear() {
  ranges.clear();
  api_calls.clear();
  kernels.clear();
  memcpys.clear();
  syncs.clear();
  collectives.clear();
  range_hit.clear();
  api_hit.clear();
  kernel_hit.clear();
  memcpy_hit.clear();
  sync_hit.clear();
  collective_hit.clear();
  kernel_family.clear();
  step_requests.clear();
  any_hit = false;
}

StepEmitter::StepEmitter(const SimConfig& config, Rng* rng, Rng* fault_rng)
    : config_(config), profile_(ProfileFor(config.engine)), rng_(rng), fault_rng_(fault_rng) {
  const ClusterSpec& c = config.cluster;
  world_ = c.world();
  dp_size_ = profile_.DataParallelSize(c);
  state_.gpu_speed.resize(static_cast<size_t>(world_));
  for (double& s : state_.gpu_speed) s = std::clamp(rng->Normal(1.0, 0.025), 0.93, 1.07);
  host_ns_.assign(static_cast<size_t>(world_), 0);
  stream_ns_.assign(static_cast<size_t>(world_), 0);
  comm_stream_ns_.assign(static_cast<size_t>(world_), 0);
  state_.correlation.assign(static_cast<size_t>(world_), 1);
  const int32_t comms = profile_.CommunicatorCount(c);
  state_.sequence.assign(static_cast<size_t>(comms), 0);
  for (int32_t i = 0; i < comms; ++i) {
    state_.communicators.push_back(fmt::format("0x{:016x}", MixSeed(config.seed, 1000 + i)));
  }
}

// The work of the step per data-parallel rank; shape: the union over those ranks, which
// decides the structure of the op list.
void StepEmitter::BuildContexts(const StepPlan& plan, std::vector<StepContext>* ctx,
                                StepContext* shape) const {
  const bool data_parallel = profile_.data_parallel() || dp_size_ > 1;
  ctx->assign(static_cast<size_t>(dp_size_), StepContext());
  for (const StepEntry& e : plan.entries) {
    StepContext& c = (*ctx)[static_cast<size_t>(data_parallel ? e.dp_rank : 0)];
    c.tokens += e.tokens;
    if (e.samples) ++c.seqs;
    if (e.prefill && !e.misrouted) {
      c.has_prefill = true;
      c.prefill_tokens += e.tokens;
      c.prefill_attn += e.tokens * (e.context_before + e.tokens / 2.0);
    } else {
      c.has_decode = true;
      ++c.decode_seqs;
      c.decode_ctx += e.context_before + e.tokens;
      if (e.misrouted) c.has_misroute = true;
    }
  }
  for (StepContext& c : *ctx) {
    if (c.tokens == 0) {  // warm-up or an idle FSDP rank: a dummy decode batch
      c.tokens = plan.warmup ? 8 : 1;
      c.seqs = c.tokens;
      c.decode_seqs = c.tokens;
      c.decode_ctx = 16.0 * c.tokens;
      c.has_decode = true;
    }
    shape->tokens = std::max(shape->tokens, c.tokens);
    shape->seqs = std::max(shape->seqs, c.seqs);
    shape->has_prefill |= c.has_prefill;
    shape->has_decode |= c.has_decode;
    shape->has_misroute |= c.has_misroute;
  }
  // Expert-parallel replicas pad their batches to the largest (vLLM's DP padding), so
  // that every rank's all-to-all carries the same token count.
  if (config_.cluster.expert_parallel) {
    for (StepContext& c : *ctx) c.tokens = shape->tokens;
  }
}

void StepEmitter::InitRanks(int64_t start_ns, bool cold_start, std::vector<RankBuffer>* buffers,
                            std::vector<RankState>* st) const {
  buffers->resize(static_cast<size_t>(world_));
  for (int32_t r = 0; r < world_; ++r) {
    (*buffers)[static_cast<size_t>(r)].Clear();
    (*buffers)[static_cast<size_t>(r)].rank = r;
  }
  st->assign(static_cast<size_t>(world_), RankState());
  for (int32_t r = 0; r < world_; ++r) {
    RankState& s = (*st)[static_cast<size_t>(r)];
    s.rank = r;
    s.dp = profile_.data_parallel() ? r : r / (config_.cluster.tp * config_.cluster.pp);
    s.buf = &(*buffers)[static_cast<size_t>(r)];
    s.host = std::max(host_ns_[static_cast<size_t>(r)], start_ns);
    s.stream = stream_ns_[static_cast<size_t>(r)];
    s.comm_stream = comm_stream_ns_[static_cast<size_t>(r)];
    if (cold_start) {
      s.host_factor = 1.5;
      s.allocator_slow = true;
      s.alloc_fraction = 0.12;
    }
  }
}

namespace {

// What one timing/structural fault does to one rank in this step.
void ApplyRankFault(const ActiveFault& f, const ClusterSpec& cl, RankState& s) {
  const bool target = f.rank < 0 || f.rank == s.rank;
  switch (f.mechanism) {
    case Mechanism::kGpuThrottle:
      if (target) {
        s.kernel_factor *= 1.0 + f.magnitude;
        s.kernel_hit = true;
      }
      break;
    case Mechanism::kKernelSlowdown:
      if (target) {
        s.slow_family = f.family;
        s.family_factor = 1.0 + f.magnitude;
      }
      break;
    case Mechanism::kKernelContention:
      if (target) s.contention = f.magnitude;
      break;
    case Mechanism::kIllegalMemoryAccess:
      if (f.rank == s.rank) s.crash_layer = f.crash_layer;
      break;
    case Mechanism::kOutOfMemory:
      if (f.rank == s.rank) {
        s.oom_layer = f.crash_layer;
        s.oom_gib = f.magnitude;
      }
      break;
    case Mechanism::kLaunchLatency:
      if (target) s.launch_factor = 1.0 + f.magnitude;
      break;
    case Mechanism::kMemcpyLatency:
      if (target) {
        s.copy_factor = 1.0 + f.magnitude;
        s.copy_hit = true;
      }
      break;
    case Mechanism::kSyncLatency:
      if (target) {
        s.sync_extra = f.magnitude;
        s.sync_hit = true;
      }
      break;
    case Mechanism::kDriverRetry:
      if (target) s.retry_p = f.magnitude;
      break;
    case Mechanism::kHostMemoryPressure:
      if (NodeOfRank(cl, s.rank) == f.node) {
        s.host_factor *= 1.0 + f.magnitude;
        s.host_pressure = true;
        s.copy_hit = true;
      }
      break;
    case Mechanism::kAllocatorSlowPath:
    case Mechanism::kMemoryFragmentation:
      if (target) {
        s.allocator_slow = true;
        s.fragmentation = f.mechanism == Mechanism::kMemoryFragmentation;
        s.alloc_fraction = f.magnitude;
        s.alloc_hit = true;
      }
      break;
    case Mechanism::kStragglerRank:
      if (f.rank == s.rank) {
        s.host_factor *= 1.0 + f.magnitude;
        s.straggler = true;
      }
      break;
    case Mechanism::kNcclTimeout:
      if (f.rank == s.rank) s.hang_layer = f.crash_layer;
      break;
    default:
      break;
  }
}

wire::HostRangeRecord FeRange(std::string_view name, int64_t start, int64_t end) {
  wire::HostRangeRecord h;
  h.clock = wire::ClockDomain::kMonotonic;
  h.start_ns = start;
  h.end_ns = end;
  h.layer = wire::RangeLayer::kFe;
  h.name = name;
  return h;
}

}  // namespace

StepEmitter::StepFaults StepEmitter::ApplyFaults(const std::vector<ActiveFault>& faults,
                                                 double benign_pause_ms,
                                                 std::vector<RankState>* st) {
  StepFaults out;
  out.pause_ns = static_cast<int64_t>(benign_pause_ms * kMs);
  const int64_t typical_step = state_.last_step_ns > 0 ? state_.last_step_ns : 20 * kMs;
  for (const ActiveFault& f : faults) {
    for (RankState& s : *st) ApplyRankFault(f, config_.cluster, s);
    switch (f.mechanism) {
      case Mechanism::kLinkDegradation:
        out.link_factor = 1.0 + f.magnitude;
        out.loss_p = 0.12;
        break;
      case Mechanism::kOperatorReorder:
        out.reorder_p = f.magnitude;
        break;
      case Mechanism::kEnginePause:
        out.pause_ns +=
            static_cast<int64_t>(f.magnitude * typical_step * fault_rng_->Uniform(0.7, 1.3));
        out.pause_hit = true;
        break;
      default:
        break;
    }
  }
  return out;
}

// Each engine core drives its ranks: it schedules its requests (and pauses there), then
// broadcasts the step to its workers. Data-parallel replicas of vLLM and SGLang are engine
// cores of their own, each with its scheduler (they keep in step only through the
// collectives); Torch FSDP's rank 0 drives every rank. A pause (a fault's, a benign GC
// pause) holds every core. Returns when each rank starts the step.
std::vector<int64_t> StepEmitter::Dispatch(const StepPlan& plan, const StepFaults& faults,
                                           std::vector<RankState>* st) {
  std::vector<int64_t> step_start(static_cast<size_t>(world_));
  const int32_t cores = EngineCores();
  const int32_t core_ranks = world_ / cores;
  for (int32_t core = 0; core < cores; ++core) {
    const int32_t first = core * core_ranks;
    RankState& driver = (*st)[static_cast<size_t>(first)];
    step_start[static_cast<size_t>(first)] = driver.host;
    const int64_t sched_start = driver.host + static_cast<int64_t>(rng_->Uniform(5, 20) * kUs);
    int64_t dur = static_cast<int64_t>((120.0 + 6.0 * EntriesOfCore(plan, core)) * kUs *
                                       rng_->LogNormal(0, 0.2) * driver.host_factor);
    dur += faults.pause_ns;
    driver.buf->ranges.push_back(
        FeRange(profile_.ranges().schedule, sched_start, sched_start + dur));
    driver.buf->range_hit.push_back(faults.pause_hit);
    if (faults.pause_hit) driver.buf->any_hit = true;
    driver.host = sched_start + dur + 5 * kUs;
    const int64_t dispatch = driver.host;
    for (int32_t r = first + 1; r < first + core_ranks; ++r) {
      RankState& s = (*st)[static_cast<size_t>(r)];
      s.host = std::max(s.host, dispatch + static_cast<int64_t>(rng_->Uniform(25, 90) * kUs));
      step_start[static_cast<size_t>(r)] = s.host;
    }
  }
  return step_start;
}

int32_t StepEmitter::EngineCores() const {
  return profile_.data_parallel() ? 1 : dp_size_;
}

// The requests of the step an engine core serves: all of them when it is the only one.
size_t StepEmitter::EntriesOfCore(const StepPlan& plan, int32_t core) const {
  if (EngineCores() == 1) return plan.entries.size();
  return static_cast<size_t>(std::count_if(plan.entries.begin(), plan.entries.end(),
                                           [core](const StepEntry& e) { return e.dp_rank == core; }));
}

// Builds and interprets each pipeline stage's op list in turn (Torch FSDP: one stage over
// every rank). A crashed rank's open ranges point into ops until KillRanks closes them.
void StepEmitter::RunStages(const std::vector<StepContext>& ctx, const StepContext& shape,
                            ForwardMode mode, const StepFaults& faults, std::vector<Op>* ops,
                            std::vector<RankState>* st, StepResult* result) {
  const ClusterSpec& cl = config_.cluster;
  const bool data_parallel = profile_.data_parallel();
  std::vector<PendingSend> pp_in(static_cast<size_t>(cl.tp)), pp_out(static_cast<size_t>(cl.tp));
  const int32_t stages = profile_.PipelineStages(cl);
  for (int32_t stage = 0; stage < stages; ++stage) {
    StageRun run;
    if (data_parallel || dp_size_ > 1) {  // replicas in lock step (dp_size_ > 1: pp is 1)
      for (RankState& s : *st) {
        run.group.push_back(&s);
        run.ctx.push_back(&ctx[static_cast<size_t>(s.dp)]);
      }
    } else {
      for (int32_t t = 0; t < cl.tp; ++t) {
        run.group.push_back(&(*st)[static_cast<size_t>(stage * cl.tp + t)]);
        run.ctx.push_back(&ctx[0]);
      }
    }
    // Illegal access / hang: the fault's layer index is within the stage's layers.
    BuildStageOps(profile_, config_, stage, data_parallel || dp_size_ > 1 ? shape : ctx[0], mode,
                  faults.reorder_p, fault_rng_, &names_, ops);
    std::swap(pp_in, pp_out);
    for (auto& p : pp_out) p = PendingSend();
    run.ops = ops;
    run.mode = mode;
    run.link_factor = faults.link_factor;
    run.link_loss_p = faults.loss_p;
    run.pp_in = &pp_in;
    run.pp_out = &pp_out;
    run.communicator = data_parallel ? 0 : stage;
    InterpretStage(config_, rng_, fault_rng_, &state_, run, result);
  }
}

// Closes what a crash left open, at the time the engine kills its workers; returns that time.
int64_t StepEmitter::KillRanks(std::vector<RankState>* st) const {
  int64_t kill_ns = 0;
  for (const RankState& s : *st) kill_ns = std::max({kill_ns, s.host, s.stream, s.comm_stream});
  for (RankState& s : *st) {
    s.host = std::max(s.host, kill_ns);
    while (!s.open.empty()) {
      auto [op, start] = s.open.back();
      s.open.pop_back();
      s.open_hit.pop_back();
      wire::HostRangeRecord h;
      h.clock = wire::ClockDomain::kMonotonic;
      h.start_ns = start;
      h.end_ns = kill_ns;
      h.layer = op->layer;
      h.name = op->name;
      s.buf->ranges.push_back(h);
      s.buf->range_hit.push_back(false);
    }
  }
  return kill_ns;
}

// An engine core has its output once its last stage synchronized; its driver processes it.
void StepEmitter::ProcessOutput(const StepPlan& plan, std::vector<RankState>* st) {
  const int32_t cores = EngineCores();
  const int32_t core_ranks = world_ / cores;
  const int32_t last_stage_first =
      profile_.data_parallel() ? 0 : (config_.cluster.pp - 1) * config_.cluster.tp;
  for (int32_t core = 0; core < cores; ++core) {
    const int32_t first = core * core_ranks;
    int64_t output_ns = 0;
    for (int32_t r = first + last_stage_first; r < first + core_ranks; ++r) {
      output_ns = std::max(output_ns, (*st)[static_cast<size_t>(r)].host);
    }
    RankState& driver = (*st)[static_cast<size_t>(first)];
    driver.host =
        std::max(driver.host, output_ns + static_cast<int64_t>(rng_->Uniform(20, 60) * kUs));
    const int64_t dur = static_cast<int64_t>((60.0 + 9.0 * EntriesOfCore(plan, core)) * kUs *
                                             rng_->LogNormal(0, 0.2) * driver.host_factor);
    driver.buf->ranges.push_back(
        FeRange(profile_.ranges().process_output, driver.host, driver.host + dur));
    driver.buf->range_hit.push_back(false);
    driver.host += dur + 3 * kUs;
  }
}

// STEP ranges with the request ids and phase of each rank's batch; saves the rank clocks.
void StepEmitter::CloseSteps(const StepPlan& plan, const std::vector<Request>& requests,
                             const std::vector<int64_t>& step_start, bool crashed, int64_t kill_ns,
                             std::vector<RankState>* st) {
  const bool data_parallel = profile_.data_parallel() || dp_size_ > 1;
  // An engine core records what it scheduled: its replica's tokens (Torch FSDP's driver,
  // the step's).
  const bool own_tokens = EngineCores() > 1;
  for (RankState& s : *st) {
    RankBuffer& buf = *s.buf;
    int64_t tokens = own_tokens ? 0 : plan.prefill_tokens + plan.decode_tokens;
    for (const StepEntry& e : plan.entries) {
      if (data_parallel && e.dp_rank != s.dp) continue;
      buf.step_requests.push_back(requests[static_cast<size_t>(e.request)].id);
      if (own_tokens) tokens += e.tokens;
    }
    const StepPhase phase = data_parallel ? plan.PhaseOfRank(s.dp) : plan.phase;
    buf.step_args = {wire::Arg::Int(wire::kStepArgStep, plan.step),
                     wire::Arg::String(wire::kStepArgPhase, PhaseName(phase)),
                     wire::Arg::StringList(wire::kStepArgRequests, buf.step_requests),
                     wire::Arg::Int(wire::kStepArgTokens, tokens)};
    s.host = std::max(s.host, crashed ? kill_ns : s.host) + 4 * kUs;
    wire::HostRangeRecord h;
    h.clock = wire::ClockDomain::kMonotonic;
    h.start_ns = step_start[static_cast<size_t>(s.rank)];
    h.end_ns = s.host;
    h.layer = wire::RangeLayer::kStep;
    h.name = profile_.ranges().step;
    h.range_id = static_cast<uint64_t>(plan.step) + 1;
    h.args = buf.step_args;
    buf.ranges.push_back(h);
    buf.range_hit.push_back(false);
    host_ns_[static_cast<size_t>(s.rank)] = s.host;
    stream_ns_[static_cast<size_t>(s.rank)] = s.stream;
    comm_stream_ns_[static_cast<size_t>(s.rank)] = s.comm_stream;
  }
}

StepResult StepEmitter::EmitStep(const StepPlan& plan, const std::vector<Request>& requests,
                                 int64_t start_ns, const std::vector<ActiveFault>& faults,
                                 bool cold_start, double benign_pause_ms,
                                 std::vector<RankBuffer>* buffers) {
  StepResult result;
  std::vector<StepContext> ctx;
  StepContext shape;
  BuildContexts(plan, &ctx, &shape);
  std::vector<RankState> st;
  InitRanks(start_ns, cold_start, buffers, &st);
  const StepFaults step_faults = ApplyFaults(faults, benign_pause_ms, &st);
  const std::vector<int64_t> step_start = Dispatch(plan, step_faults, &st);

  ForwardMode mode = plan.phase == StepPhase::kDecode ? config_.engine_spec.decode_mode
                                                      : config_.engine_spec.prefill_mode;
  if (cold_start) mode = ForwardMode::kEager;
  std::vector<Op> ops;
  RunStages(ctx, shape, mode, step_faults, &ops, &st, &result);

  const int64_t kill_ns = result.crashed ? KillRanks(&st) : 0;
  if (!result.crashed) ProcessOutput(plan, &st);
  CloseSteps(plan, requests, step_start, result.crashed, kill_ns, &st);
  const int32_t core_ranks = world_ / EngineCores();
  for (int32_t first = 0; first < world_; first += core_ranks) {
    result.end_ns = std::max(result.end_ns, st[static_cast<size_t>(first)].host);
  }
  for (size_t i = 0; i < st[0].buf->kernels.size(); ++i) {
    result.gpu_busy_ns += st[0].buf->kernels[i].end_ns - st[0].buf->kernels[i].start_ns;
  }
  if (!plan.warmup && !cold_start && !result.crashed && faults.empty()) {
    state_.last_step_ns = result.end_ns - start_ns;
  }
  return result;
}

}  // namespace teller::sim
