#include "sim/simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <set>

#include "sim/engine_profile.h"
#include "sim/log_emitter.h"
#include "sim/time_units.h"
#include "sim/twin_diff.h"
#include "wire/bundle_writer.h"

namespace teller::sim {
namespace {

// One node's clocks against true time t (ns since run start).
struct NodeClock {
  int64_t monotonic_base = 0;
  int64_t gpu_base = 0;
  int64_t monotonic_ppm = 0;
  int64_t gpu_ppm = 0;
  int64_t realtime_skew = 0;  // residual NTP error: not in the clock pairs
  int64_t Monotonic(int64_t t) const {
    return monotonic_base + t + t / 1000 * monotonic_ppm / 1000;
  }
  int64_t Gpu(int64_t t) const { return gpu_base + t + t / 1000 * gpu_ppm / 1000; }
};

bool IsCrash(Mechanism m) {
  return m == Mechanism::kIllegalMemoryAccess || m == Mechanism::kNcclTimeout ||
         m == Mechanism::kOutOfMemory;
}

// The same run without faults, not written: it places fault onsets in its steps, and
// its requests' latencies are what the faulty run's are measured against.
RunSummary CleanRun(const SimConfig& config) {
  SimConfig clean = config;
  clean.faults.clear();
  SimOptions options;
  options.dry_run = true;
  auto run = RunSimulation(clean, "", options);
  return run.ok() ? std::move(*run) : RunSummary{};
}

int32_t EstimateSteps(const SimConfig& config, const RunSummary& clean) {
  const int32_t warm = config.warmup ? config.engine_spec.graph_capture_steps : 0;
  return clean.steps > 0 ? std::max(clean.steps - warm, 2) : 8;
}

Family ParseFamily(std::string_view name) {
  for (Family f : {Family::kGemm, Family::kAttention, Family::kNorm, Family::kRotary,
                   Family::kActivation, Family::kKvCache, Family::kEmbedding, Family::kSampling,
                   Family::kCommunication, Family::kSsm}) {
    if (FamilyName(f) == name) return f;
  }
  return Family::kAttention;
}

}  // namespace

std::vector<ResolvedFault> ResolveFaults(const SimConfig& config) {
  return ResolveFaults(config, CleanRun(config));
}

std::vector<ResolvedFault> ResolveFaults(const SimConfig& config, const RunSummary& clean) {
  std::vector<ResolvedFault> out;
  if (config.faults.empty()) return out;
  Rng rng(MixSeed(config.seed, 3));
  const int32_t warm = config.warmup ? config.engine_spec.graph_capture_steps : 0;
  const int32_t n = EstimateSteps(config, clean);
  const ClusterSpec& cl = config.cluster;
  const EngineProfile& profile = ProfileFor(config.engine);
  for (const FaultSpec& spec : config.faults) {
    ResolvedFault f;
    f.spec = spec;
    FaultSpec& s = f.spec;
    const MechanismInfo& info = InfoOf(s.mechanism);
    if (s.magnitude < 0) s.magnitude = info.default_magnitude;
    if (s.duration_steps < 0) {
      s.duration_steps = info.default_duration_steps;
      if (config.fault_window_fraction > 0) {
        s.duration_steps =
            std::max(s.duration_steps, static_cast<int32_t>(config.fault_window_fraction * n));
      }
    }
    if (s.onset_step < 0) {
      const double lo = s.mechanism == Mechanism::kDecodeMisroute ? 0.05 : 0.15;
      const double hi = s.mechanism == Mechanism::kDecodeMisroute ? 0.35 : 0.55;
      s.onset_step = warm + 1 + static_cast<int32_t>(rng.Uniform(lo, hi) * n);
    }
    const bool per_rank =
        s.mechanism == Mechanism::kGpuThrottle || s.mechanism == Mechanism::kKernelContention ||
        s.mechanism == Mechanism::kIllegalMemoryAccess || s.mechanism == Mechanism::kOutOfMemory ||
        s.mechanism == Mechanism::kStragglerRank || s.mechanism == Mechanism::kNcclTimeout ||
        s.mechanism == Mechanism::kLaunchLatency || s.mechanism == Mechanism::kMemcpyLatency ||
        s.mechanism == Mechanism::kSyncLatency || s.mechanism == Mechanism::kDriverRetry ||
        s.mechanism == Mechanism::kAllocatorSlowPath ||
        s.mechanism == Mechanism::kMemoryFragmentation;
    if (per_rank && s.rank < 0) s.rank = static_cast<int32_t>(rng.UniformInt(0, cl.world() - 1));
    if (s.mechanism == Mechanism::kEnginePause) s.rank = 0;
    if (s.mechanism == Mechanism::kSyncLatency && !profile.data_parallel() && spec.rank < 0) {
      s.rank = (cl.pp - 1) * cl.tp + static_cast<int32_t>(rng.UniformInt(0, cl.tp - 1));
    }
    if (s.mechanism == Mechanism::kHostMemoryPressure && s.node < 0) {
      s.node = static_cast<int32_t>(rng.UniformInt(0, cl.nodes - 1));
    }
    if (s.rank >= 0 && s.rank >= cl.world()) s.rank = cl.world() - 1;
    if (s.rank >= 0 && s.mechanism != Mechanism::kHostMemoryPressure)
      s.node = NodeOfRank(cl, s.rank);
    if (s.mechanism == Mechanism::kKernelSlowdown && s.family.empty()) {
      static constexpr std::string_view kFamilies[] = {"attention", "gemm", "norm", "activation"};
      s.family = std::string(kFamilies[rng.UniformInt(0, 3)]);
    }
    if (IsCrash(s.mechanism)) {
      s.duration_steps = 1;
      const int32_t per_stage = config.model.layers / profile.PipelineStages(cl);
      const int32_t stage = profile.data_parallel() ? 0 : s.rank % (cl.tp * cl.pp) / cl.tp;
      int32_t layer = -1;
      for (int tries = 0; tries < 64; ++tries) {
        const int32_t candidate =
            stage * per_stage + static_cast<int32_t>(rng.UniformInt(0, per_stage - 1));
        if (config.model.mamba_period == 0 || candidate % config.model.mamba_period != 0) {
          layer = candidate;
          break;
        }
      }
      f.crash_layer = layer < 0 ? stage * per_stage + 1 : layer;
    }
    out.push_back(std::move(f));
  }
  return out;
}

namespace {

std::string HostName(int32_t node) { return fmt::format("node{}", node); }

// One run of the simulator: the engine's step loop over the scheduler, the step emitter
// and the log emitter, fault activation and attribution, and the bundle's writers.
class SimulationRun {
 public:
  SimulationRun(const SimConfig& config, const std::string& directory, const SimOptions& options)
      : config_(config),
        profile_(ProfileFor(config.engine)),
        cl_(config.cluster),
        world_(config.cluster.world()),
        options_(options),
        workload_rng_(MixSeed(config.seed, 1)),
        emit_rng_(MixSeed(config.seed, 2)),
        log_rng_(MixSeed(config.seed, 4)),
        misc_rng_(MixSeed(config.seed, 5)),
        twin_rng_(MixSeed(config.seed, 2)),
        clean_(config.faults.empty() ? RunSummary{} : CleanRun(config)),
        summary_(NewSummary(config, directory, clean_)),
        clocks_(MakeClocks()),
        scheduler_(config, &workload_rng_),
        emitter_(config, &emit_rng_, &fault_rng_),
        twin_emitter_(config, &twin_rng_, &twin_fault_rng_),
        log_(config, &log_rng_, pids_, realtime_offset_),
        labels_(config) {
    labels_.SetFaults(&summary_.faults);
    request_steps_.assign(scheduler_.requests().size(), 0);
    request_nodes_.assign(scheduler_.requests().size(), 0);
    arrived_.assign(scheduler_.requests().size(), 0);
  }

  base::StatusOr<RunSummary> Run();

 private:
  static RunSummary NewSummary(const SimConfig& config, const std::string& directory,
                               const RunSummary& clean);
  void SeedStep();
  StepResult EmitStep(const StepPlan& plan, const std::vector<ActiveFault>& faults, bool cold_start,
                      double gc_ms);
  std::vector<NodeClock> MakeClocks();
  base::Status OpenBundle();
  base::Status WriteLogs();
  base::Status WriteStep();
  void AnnounceArrivals(int64_t until);
  base::Status FinishStep(const StepPlan& plan, const StepResult& result, bool anomaly,
                          int32_t fault_index, std::string_view benign);
  base::Status RunWarmup();
  void ActivateFaults();
  base::StatusOr<bool> RunStep();
  int32_t AttributeFaults(const StepResult& result);
  bool FaultShows(ResolvedFault& f, const StepResult& result, std::set<int32_t>* touched);
  void LogCrash(const StepResult& result);
  void MeasureRequests();
  base::StatusOr<RunSummary> Finish();

  const SimConfig& config_;
  const EngineProfile& profile_;
  const ClusterSpec& cl_;
  const int32_t world_;
  const SimOptions& options_;
  Rng workload_rng_;
  Rng emit_rng_;
  Rng log_rng_;
  Rng misc_rng_;
  Rng fault_rng_;  // draws only faults make
  Rng twin_rng_;   // the twin's copy of emit_rng_
  Rng twin_fault_rng_;
  RunSummary clean_;  // the run without faults (empty when there are none)
  RunSummary summary_;
  std::vector<int64_t> pids_;
  std::vector<int64_t> realtime_offset_;
  std::vector<NodeClock> clocks_;  // per node
  EngineScheduler scheduler_;
  StepEmitter emitter_;
  StepEmitter twin_emitter_;  // each step again, without the faults
  LogEmitter log_;
  LabelBuilder labels_;
  std::string command_;
  std::unique_ptr<wire::BundleWriter> bundle_;
  std::vector<wire::ProcessWriter*> procs_;
  std::vector<wire::LogWriter*> logs_;
  std::vector<uint8_t> watchdog_named_;  // per rank: the watchdog thread's name is written

  std::vector<RankBuffer> buffers_;
  std::vector<RankBuffer> twin_buffers_;
  StepChange change_;  // what the faults changed in the current step
  int64_t twin_end_ns_ = 0;
  std::vector<int32_t> request_steps_;
  std::vector<int64_t> request_nodes_;
  std::vector<uint8_t> arrived_;
  int64_t written_logs_ = 0;
  int64_t now_ = 0;
  int32_t step_ = 0;
  bool first_real_ = true;
  bool crashed_ = false;
  StepPlan plan_;
  std::vector<ActiveFault> active_;
};

RunSummary SimulationRun::NewSummary(const SimConfig& config, const std::string& directory,
                                     const RunSummary& clean) {
  RunSummary summary;
  summary.directory = directory;
  summary.engine = config.engine;
  summary.faults = ResolveFaults(config, clean);
  return summary;
}

// Every step draws from streams of its own, so that a step's draws do not depend on
// what earlier steps drew, and the twin draws exactly what the faulty run draws.
void SimulationRun::SeedStep() {
  const uint64_t step = static_cast<uint64_t>(step_);
  emit_rng_ = Rng(MixSeed(MixSeed(config_.seed, 2), step));
  fault_rng_ = Rng(MixSeed(MixSeed(config_.seed, 13), step));
  twin_rng_ = emit_rng_;
  twin_fault_rng_ = fault_rng_;
}

// The step with the faults into buffers_, and, when the run has faults, the same step
// without them into twin_buffers_ and what differs into change_.
StepResult SimulationRun::EmitStep(const StepPlan& plan, const std::vector<ActiveFault>& faults,
                                   bool cold_start, double gc_ms) {
  SeedStep();
  StepResult result =
      emitter_.EmitStep(plan, scheduler_.requests(), now_, faults, cold_start, gc_ms, &buffers_);
  change_ = StepChange{};
  twin_end_ns_ = result.end_ns;
  if (summary_.faults.empty()) {
    for (const RankBuffer& b : buffers_) change_.ranks.push_back({b.rank, 0, 0, false});
    return result;
  }
  StepPlan twin_plan = plan;
  for (StepEntry& e : twin_plan.entries) e.misrouted = false;
  twin_end_ns_ =
      twin_emitter_
          .EmitStep(twin_plan, scheduler_.requests(), now_, {}, cold_start, gc_ms, &twin_buffers_)
          .end_ns;
  change_ = DiffStep(buffers_, twin_buffers_, now_, faults, cl_);
  return result;
}

// Clocks per node; pids and realtime offsets per rank.
std::vector<NodeClock> SimulationRun::MakeClocks() {
  std::vector<NodeClock> clocks(static_cast<size_t>(cl_.nodes));
  for (int32_t n = 0; n < cl_.nodes; ++n) {
    NodeClock& c = clocks[static_cast<size_t>(n)];
    c.monotonic_base = (1800 + 3600 * n) * kSec + misc_rng_.UniformInt(0, kSec);
    c.gpu_base = config_.start_realtime_ns + misc_rng_.UniformInt(-3 * kMs, 3 * kMs);
    c.monotonic_ppm = n == 0 ? 0 : misc_rng_.UniformInt(-15, 15);
    c.gpu_ppm = misc_rng_.UniformInt(-25, 25);
    c.realtime_skew = n == 0 ? 0 : misc_rng_.UniformInt(-180, 180) * kUs;
  }
  pids_.resize(static_cast<size_t>(world_));
  realtime_offset_.resize(static_cast<size_t>(world_));
  for (int32_t r = 0; r < world_; ++r) {
    pids_[static_cast<size_t>(r)] = 2000 + 137 * r + misc_rng_.UniformInt(0, 99);
    realtime_offset_[static_cast<size_t>(r)] =
        config_.start_realtime_ns + clocks[static_cast<size_t>(NodeOfRank(cl_, r))].realtime_skew;
  }
  return clocks;
}

base::Status SimulationRun::OpenBundle() {
  procs_.assign(static_cast<size_t>(world_), nullptr);
  logs_.assign(static_cast<size_t>(world_), nullptr);
  watchdog_named_.assign(static_cast<size_t>(world_), 0);
  command_ = profile_.LaunchCommand(config_);
  if (options_.dry_run) return base::OkStatus();
  wire::BundleMeta meta;
  meta.tool_version = "0.1.0";
  meta.host = HostName(0);
  meta.command = {"teller",
                  "synth",
                  "run",
                  "--engine",
                  std::string(EngineName(config_.engine)),
                  "--seed",
                  std::to_string(config_.seed)};
  meta.start_time_ns = config_.start_realtime_ns;
  for (int32_t r = 0; r < world_; ++r) {
    meta.ranks.push_back({r, LocalRankOf(cl_, r), HostName(NodeOfRank(cl_, r)),
                          pids_[static_cast<size_t>(r)], LocalRankOf(cl_, r)});
  }
  for (int32_t n = 0; n < cl_.nodes; ++n) {
    for (int32_t g = 0; g < cl_.gpus_per_node; ++g) {
      meta.devices.push_back(
          {HostName(n), g, cl_.gpu_name,
           fmt::format("GPU-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
                       MixSeed(config_.seed, 100 + n * 16 + g) & 0xffffffff, n, g, 0x5a5a,
                       MixSeed(config_.seed, 200 + n * 16 + g) & 0xffffffffffffull)});
    }
  }
  meta.capture = {{"cupti_activity", true, ""},
                  {"nvtx", true, ""},
                  {"python_hooks", true, ""},
                  {"stdout", true, ""}};
  meta.notes = {fmt::format("synthetic run {} written by teller synth (engine {}, seed {})",
                            config_.run_id, EngineName(config_.engine), config_.seed)};
  TELLER_ASSIGN_OR_RETURN(bundle_, wire::BundleWriter::Create(summary_.directory, std::move(meta)));
  for (int32_t r = 0; r < world_; ++r) {
    wire::ProcessInfoRecord info;
    info.pid = pids_[static_cast<size_t>(r)];
    info.rank = r;
    info.local_rank = LocalRankOf(cl_, r);
    info.world_size = world_;
    info.device = LocalRankOf(cl_, r);
    const std::string host = HostName(NodeOfRank(cl_, r));
    info.host = host;
    info.name = "python3";
    info.command = command_;
    TELLER_ASSIGN_OR_RETURN(procs_[static_cast<size_t>(r)], bundle_->OpenProcess(info));
    TELLER_RETURN_IF_ERROR(procs_[static_cast<size_t>(r)]->Append(
        wire::ThreadInfoRecord{info.pid, r == 0 ? "MainThread" : "VllmWorker"}));
    TELLER_ASSIGN_OR_RETURN(logs_[static_cast<size_t>(r)],
                            bundle_->OpenLog(fmt::format("rank{}", r)));
  }
  return base::OkStatus();
}

base::Status SimulationRun::WriteLogs() {
  for (SimLogLine& line : log_.Drain()) {
    ++written_logs_;
    if (options_.keep_logs) summary_.logs.push_back(line);
    if (options_.dry_run) continue;
    const int32_t r = line.rank;
    wire::LogLineRecord rec;
    rec.ts_ns = realtime_offset_[static_cast<size_t>(r)] + line.true_ns;
    rec.clock = wire::ClockDomain::kRealtime;
    rec.pid = pids_[static_cast<size_t>(r)];
    rec.stream = line.stderr_stream ? "stderr" : "stdout";
    rec.text = line.text;
    rec.rank = r;
    const std::string host = HostName(NodeOfRank(cl_, r));
    rec.host = host;
    TELLER_RETURN_IF_ERROR(logs_[static_cast<size_t>(r)]->Append(rec));
  }
  return base::OkStatus();
}

// The step's events, converted to each node's clocks.
base::Status SimulationRun::WriteStep() {
  if (options_.dry_run) return base::OkStatus();
  for (const RankBuffer& b : buffers_) {
    wire::ProcessWriter* w = procs_[static_cast<size_t>(b.rank)];
    const NodeClock& c = clocks_[static_cast<size_t>(NodeOfRank(cl_, b.rank))];
    const int64_t tid = pids_[static_cast<size_t>(b.rank)];
    for (wire::HostRangeRecord h : b.ranges) {
      h.tid = tid;
      h.start_ns = c.Monotonic(h.start_ns);
      h.end_ns = c.Monotonic(h.end_ns);
      TELLER_RETURN_IF_ERROR(w->Append(h));
    }
    for (wire::ApiCallRecord a : b.api_calls) {
      if (a.tid == kNcclWatchdogThread) {
        // ProcessGroupNCCL's watchdog thread (c10::setThreadName "pt_nccl_watchdg").
        a.tid = tid + 3;
        if (!watchdog_named_[static_cast<size_t>(b.rank)]) {
          watchdog_named_[static_cast<size_t>(b.rank)] = true;
          TELLER_RETURN_IF_ERROR(w->Append(wire::ThreadInfoRecord{a.tid, "pt_nccl_watchdg"}));
        }
      } else {
        a.tid = tid;
      }
      a.start_ns = c.Gpu(a.start_ns);
      a.end_ns = c.Gpu(a.end_ns);
      TELLER_RETURN_IF_ERROR(w->Append(a));
    }
    for (wire::KernelRecord k : b.kernels) {
      k.start_ns = c.Gpu(k.start_ns);
      k.end_ns = c.Gpu(k.end_ns);
      TELLER_RETURN_IF_ERROR(w->Append(k));
    }
    for (wire::MemcpyRecord m : b.memcpys) {
      m.start_ns = c.Gpu(m.start_ns);
      m.end_ns = c.Gpu(m.end_ns);
      TELLER_RETURN_IF_ERROR(w->Append(m));
    }
    for (wire::SyncRecord s : b.syncs) {
      s.tid = tid;
      s.start_ns = c.Gpu(s.start_ns);
      s.end_ns = c.Gpu(s.end_ns);
      TELLER_RETURN_IF_ERROR(w->Append(s));
    }
    for (wire::CollectiveRecord k : b.collectives) {
      k.start_ns = c.Gpu(k.start_ns);
      k.end_ns = c.Gpu(k.end_ns);
      TELLER_RETURN_IF_ERROR(w->Append(k));
    }
  }
  return base::OkStatus();
}

void SimulationRun::AnnounceArrivals(int64_t until) {
  for (const Request& r : scheduler_.requests()) {
    if (!arrived_[static_cast<size_t>(r.index)] && r.arrival_ns <= until) {
      arrived_[static_cast<size_t>(r.index)] = 1;
      log_.RequestArrived(r, std::max<int64_t>(r.arrival_ns, 0));  // already on the engine clock
    }
  }
}

base::Status SimulationRun::FinishStep(const StepPlan& plan, const StepResult& result, bool anomaly,
                                       int32_t fault_index, std::string_view benign) {
  int64_t events = 0;
  for (const RankBuffer& b : buffers_) events += static_cast<int64_t>(b.EventCount());
  summary_.events += events;
  summary_.step_events.push_back(events);
  summary_.step_ns.push_back(result.end_ns - now_);
  summary_.step_anomaly.push_back(anomaly);
  summary_.step_benign.push_back(!benign.empty());
  StepOutcome outcome;
  outcome.is_anomaly = anomaly;
  outcome.fault = fault_index;
  outcome.benign = benign;
  outcome.events = events;
  outcome.duration_ns = result.end_ns - now_;
  outcome.twin_ns = twin_end_ns_ - now_;
  outcome.change = &change_;
  labels_.AddStep(plan, scheduler_.requests(), outcome);
  for (const StepEntry& e : plan.entries) {
    ++request_steps_[static_cast<size_t>(e.request)];
    request_nodes_[static_cast<size_t>(e.request)] +=
        profile_.data_parallel()
            ? static_cast<int64_t>(buffers_[static_cast<size_t>(e.dp_rank)].EventCount())
            : events;
  }
  if (options_.on_step) options_.on_step(plan, buffers_);
  return WriteStep();
}

// Warm-up: CUDA-graph capture / dummy runs before the first request (benign).
base::Status SimulationRun::RunWarmup() {
  const int32_t warm = config_.warmup ? config_.engine_spec.graph_capture_steps : 0;
  for (int32_t w = 0; w < warm; ++w) {
    StepPlan plan;
    plan.step = step_;
    plan.warmup = true;
    plan.phase = StepPhase::kDecode;
    StepResult result = EmitStep(plan, {}, false, 0);
    TELLER_RETURN_IF_ERROR(FinishStep(plan, result, false, -1, "graph_capture"));
    now_ = result.end_ns + 2 * kMs;
    ++step_;
  }
  if (now_ < 350 * kMs) now_ = 350 * kMs;
  return base::OkStatus();
}

// The faults on in this step: scheduling ones go to the scheduler, the rest to active_.
void SimulationRun::ActivateFaults() {
  active_.clear();
  bool misroute_armed = false;
  double kv_factor = 1.0;
  for (ResolvedFault& f : summary_.faults) {
    const FaultSpec& s = f.spec;
    // KV pressure needs load to show: it waits for two running requests.
    if (s.mechanism == Mechanism::kKvCachePressure && step_ == s.onset_step &&
        scheduler_.running_count() < 2 && !scheduler_.Done()) {
      ++f.spec.onset_step;
    }
    // An allocation fails where one is made: an out-of-memory fault stays armed from its
    // onset until a step allocates on its rank (eager attention), then ends the run.
    const bool armed_oom = s.mechanism == Mechanism::kOutOfMemory && step_ >= s.onset_step &&
                           f.anomalous_steps.empty();
    const bool on = armed_oom || (step_ >= s.onset_step && step_ < s.onset_step + s.duration_steps);
    // A misroute needs a new request: it stays armed until one shows up.
    if (s.mechanism == Mechanism::kDecodeMisroute &&
        (on || (step_ >= s.onset_step && f.anomalous_steps.empty()))) {
      misroute_armed = true;
    }
    if (s.mechanism == Mechanism::kStarvedRequest) {
      if (on && f.starved_request < 0) {
        // The next request still waiting or still to arrive gets starved.
        for (const Request& r : scheduler_.requests()) {
          if (r.first_step < 0 && r.state != RequestState::kAborted) {
            f.starved_request = r.index;
            break;
          }
        }
      }
      scheduler_.SetStarvedRequest(on ? f.starved_request : -1);
    }
    if (!on) continue;
    if (s.mechanism == Mechanism::kKvCachePressure) kv_factor = 1.0 - s.magnitude;
    ActiveFault a;
    a.mechanism = s.mechanism;
    a.magnitude = s.magnitude;
    a.rank = s.rank;
    a.node = s.node;
    a.family = ParseFamily(s.family);
    a.crash_layer = f.crash_layer;
    active_.push_back(a);
  }
  scheduler_.SetKvCapacityFactor(kv_factor);
  scheduler_.SetMisrouteNext(misroute_armed);
}

// Whether fault f made this step abnormal, and the requests it touched. Timing and
// structural faults show where the step differs from its twin (and one step after their
// window, where a backlog spills over); scheduling faults where they changed the
// schedule: re-prefills after preemption, misrouted requests. A starved request's step is
// not abnormal (nothing in it changed); the request is faulty by its waiting time.
bool SimulationRun::FaultShows(ResolvedFault& f, const StepResult& result,
                               std::set<int32_t>* touched) {
  const FaultSpec& s = f.spec;
  const bool on = step_ >= s.onset_step && step_ < s.onset_step + s.duration_steps;
  switch (s.mechanism) {
    case Mechanism::kKvCachePressure: {
      for (int32_t p : plan_.preempted) touched->insert(p);
      bool recompute = false;
      for (const StepEntry& e : plan_.entries) {
        const Request& r = scheduler_.requests()[static_cast<size_t>(e.request)];
        if (e.prefill && r.preemptions > 0) {
          touched->insert(e.request);
          recompute = true;
        }
      }
      // A request prefilling again is in the trace: the oracle sees the recompute.
      if (recompute && step_ >= s.onset_step) change_.visible = true;
      return recompute && step_ >= s.onset_step;
    }
    case Mechanism::kStarvedRequest:
      if (on && f.starved_request >= 0) {
        const Request& r = scheduler_.requests()[static_cast<size_t>(f.starved_request)];
        if (r.state == RequestState::kWaiting) touched->insert(f.starved_request);
      }
      return false;
    case Mechanism::kDecodeMisroute: {
      bool misrouted = false;
      for (const StepEntry& e : plan_.entries) {
        if (e.misrouted) {
          misrouted = true;
          touched->insert(e.request);
          f.spec.request = scheduler_.requests()[static_cast<size_t>(e.request)].id;
        }
      }
      return misrouted && change_.any();
    }
    default: {
      const bool late_oom = s.mechanism == Mechanism::kOutOfMemory && result.crashed &&
                            result.crash_rank == s.rank && step_ >= s.onset_step;
      if (!late_oom && (step_ < s.onset_step || step_ > s.onset_step + s.duration_steps))
        return false;
      if (IsCrash(s.mechanism) && !result.crashed && !change_.any()) return false;
      if (!change_.any()) return false;
      for (const StepEntry& e : plan_.entries) {
        const size_t rank = static_cast<size_t>(e.dp_rank);
        if (!profile_.data_parallel() ||
            (rank < change_.ranks.size() && change_.ranks[rank].changed))
          touched->insert(e.request);
      }
      return true;
    }
  }
}

// Records which faults showed in the step; returns the last one (-1: the step is normal).
int32_t SimulationRun::AttributeFaults(const StepResult& result) {
  int32_t shown = -1;
  for (size_t i = 0; i < summary_.faults.size(); ++i) {
    ResolvedFault& f = summary_.faults[i];
    std::set<int32_t> touched;
    const bool shows = FaultShows(f, result, &touched);
    f.faulty_requests.insert(touched.begin(), touched.end());
    if (!shows) continue;
    shown = static_cast<int32_t>(i);
    f.anomalous_steps.insert(step_);
    if (f.first_effect_ns < 0) f.first_effect_ns = now_;
    f.last_effect_ns = result.end_ns;
  }
  if (shown >= 0) {
    for (const InstanceChange& c : change_.instances) {
      if (c.culprit) summary_.faults[static_cast<size_t>(shown)].families.insert(c.family);
    }
  }
  return shown;
}

// The crash's log lines and the requests it aborted.
void SimulationRun::LogCrash(const StepResult& result) {
  for (ResolvedFault& f : summary_.faults) {
    if (!IsCrash(f.spec.mechanism) || !f.anomalous_steps.count(step_ - 1)) continue;
    if (f.spec.mechanism == Mechanism::kIllegalMemoryAccess) {
      f.crash_call = result.crash_call;
      f.crash_in_graph = result.crash_in_graph;
      f.log_lines += log_.IllegalAccess(result.crash_rank, result.end_ns, result.crash_call,
                                        result.crash_rank % profile_.CollectiveGroupSize(cl_));
    } else if (f.spec.mechanism == Mechanism::kOutOfMemory) {
      f.oom_site = result.oom_site;
      f.log_lines += log_.OutOfMemory(result.crash_rank, result.end_ns, f.spec.magnitude,
                                      result.crash_rank % cl_.gpus_per_node, result.oom_site);
    } else {
      const int32_t group = profile_.CollectiveGroupSize(cl_);
      const int32_t first_rank = (result.crash_rank / group) * group;
      log_.NcclTimeout(result.crash_rank, result.end_ns, result.crash_collective,
                       result.crash_sequence, result.crash_numel, group, first_rank);
      f.log_lines += 3 * (group - 1);
    }
    for (int32_t a : scheduler_.AbortAll(result.end_ns + 10 * kMs)) {
      f.faulty_requests.insert(a);
      log_.RequestAborted(scheduler_.requests()[static_cast<size_t>(a)], result.end_ns + 10 * kMs);
    }
  }
}

// Emits, attributes and writes the scheduled step plan_; true when the engine crashed in it.
base::StatusOr<bool> SimulationRun::RunStep() {
  for (int32_t p : plan_.preempted) {
    log_.Preempted(scheduler_.requests()[static_cast<size_t>(p)], now_,
                   scheduler_.total_preemptions());
  }
  // Benign pauses: occasional garbage collection in the engine loop.
  double gc_ms = 0;
  std::string_view benign;
  if (misc_rng_.Bernoulli(0.03)) {
    gc_ms = misc_rng_.Uniform(2.0, 9.0);
    benign = "gc_pause";
  }
  if (first_real_) benign = "cold_start";
  int32_t longest = 0;
  for (const StepEntry& e : plan_.entries) longest = std::max(longest, e.tokens);
  if (benign.empty() && longest >= 1500) benign = "long_prompt";

  StepResult result = EmitStep(plan_, active_, first_real_, gc_ms);
  first_real_ = false;
  const int32_t shown = AttributeFaults(result);
  const bool anomaly = shown >= 0;
  for (int32_t i = 0; i < result.link_spikes; ++i) {
    if (log_rng_.Bernoulli(0.35)) {
      log_.LinkRetry(static_cast<int32_t>(log_rng_.UniformInt(0, world_ - 1)),
                     result.end_ns - 200 * kUs);
      if (shown >= 0) ++summary_.faults[static_cast<size_t>(shown)].log_lines;
    }
  }
  TELLER_RETURN_IF_ERROR(FinishStep(plan_, result, anomaly, shown, anomaly ? "" : benign));
  ++step_;
  if (result.crashed) {
    crashed_ = true;
    LogCrash(result);
    now_ = result.end_ns + 20 * kMs;
    return true;
  }
  for (int32_t r : scheduler_.Complete(plan_, result.end_ns)) {
    log_.RequestFinished(scheduler_.requests()[static_cast<size_t>(r)], result.end_ns);
  }
  log_.StepDone(plan_, scheduler_, result.end_ns);
  now_ = result.end_ns + static_cast<int64_t>(misc_rng_.Uniform(30, 120) * kUs);
  TELLER_RETURN_IF_ERROR(WriteLogs());
  return false;
}

base::StatusOr<RunSummary> SimulationRun::Run() {
  TELLER_RETURN_IF_ERROR(OpenBundle());
  log_.Startup(0);
  now_ = 300 * kMs;  // engine ready after start-up
  // Requests arrive on the engine's clock after start-up.
  for (Request& r : scheduler_.mutable_requests()) r.arrival_ns += 300 * kMs;
  TELLER_RETURN_IF_ERROR(RunWarmup());
  while (!scheduler_.Done() && step_ < config_.max_steps) {
    ActivateFaults();
    AnnounceArrivals(now_);
    if (!scheduler_.Schedule(step_, now_, &plan_)) {
      const int64_t next = scheduler_.NextArrivalNs();
      if (next < 0) break;  // nothing can ever run (should not happen)
      now_ = std::max(now_ + 200 * kUs, next + 150 * kUs);
      continue;
    }
    TELLER_ASSIGN_OR_RETURN(const bool crashed, RunStep());
    if (crashed) break;
  }
  return Finish();
}

// Each request's latency and time to first token against the run without faults; a
// request whose either moved by more than max(10%, 5 ms) is faulty, for the latest fault
// that had begun by its finish (a starved request for its own fault).
void SimulationRun::MeasureRequests() {
  if (clean_.requests.size() != scheduler_.requests().size()) return;
  std::vector<RequestDelta> deltas(scheduler_.requests().size());
  auto moved = [](int64_t delta, int64_t base) {
    return std::llabs(delta) > std::max<int64_t>(5 * kMs, base / 10);
  };
  for (const Request& r : scheduler_.requests()) {
    const RequestSummary& c = clean_.requests[static_cast<size_t>(r.index)];
    RequestDelta& d = deltas[static_cast<size_t>(r.index)];
    bool changed = false;
    if (r.finish_ns >= 0 && c.finish_ns >= 0) {
      d.latency_ns = (r.finish_ns - r.arrival_ns) - (c.finish_ns - c.arrival_ns);
      changed |= moved(*d.latency_ns, c.finish_ns - c.arrival_ns);
    }
    if (r.first_token_ns >= 0 && c.first_token_ns >= 0) {
      d.first_token_ns = (r.first_token_ns - r.arrival_ns) - (c.first_token_ns - c.arrival_ns);
      changed |= moved(*d.first_token_ns, c.first_token_ns - c.arrival_ns);
    }
    if (!changed) continue;
    for (size_t i = summary_.faults.size(); i-- > 0;) {
      ResolvedFault& f = summary_.faults[i];
      const bool starved = f.spec.mechanism == Mechanism::kStarvedRequest;
      if (starved ? f.starved_request == r.index
                  : f.first_effect_ns >= 0 && f.first_effect_ns <= r.finish_ns) {
        f.faulty_requests.insert(r.index);
        if (starved && f.first_effect_ns < 0) {
          f.first_effect_ns = r.arrival_ns;
          f.last_effect_ns = r.first_token_ns;
        }
        break;
      }
    }
  }
  labels_.SetRequestDeltas(std::move(deltas));
}

base::StatusOr<RunSummary> SimulationRun::Finish() {
  log_.Finish(now_ + 5 * kMs);
  TELLER_RETURN_IF_ERROR(WriteLogs());
  MeasureRequests();
  summary_.step_truth = labels_.StepTruths();
  summary_.crashed = crashed_;
  summary_.steps = step_;
  summary_.log_lines = written_logs_;
  // Per-request summary for the dataset statistics.
  for (const Request& r : scheduler_.requests()) {
    RequestSummary rs;
    rs.id = r.id;
    rs.steps = request_steps_[static_cast<size_t>(r.index)];
    rs.nodes = request_nodes_[static_cast<size_t>(r.index)];
    rs.arrival_ns = r.arrival_ns;
    rs.first_token_ns = r.first_token_ns;
    rs.finish_ns = r.finish_ns;
    for (const ResolvedFault& f : summary_.faults) {
      if (f.faulty_requests.count(r.index)) {
        rs.is_fault = true;
        rs.fault_type = std::string(CategoryName(InfoOf(f.spec.mechanism).category));
      }
    }
    summary_.requests.push_back(std::move(rs));
  }
  if (options_.dry_run) return std::move(summary_);
  const std::string json = labels_.Finalize(scheduler_.requests(), config_.start_realtime_ns);
  TELLER_RETURN_IF_ERROR(bundle_->WriteLabels(json));
  // Clock pairs every 0.5 s over the run, per node.
  const int64_t end = now_ + kSec;
  for (int32_t n = 0; n < cl_.nodes; ++n) {
    const NodeClock& c = clocks_[static_cast<size_t>(n)];
    std::vector<wire::ClockPair> pairs;
    for (int64_t t = 0; t <= end; t += kSec / 2) {
      pairs.push_back({config_.start_realtime_ns + t + c.realtime_skew, c.Monotonic(t), c.Gpu(t)});
    }
    if (n == 0) {
      bundle_->mutable_meta()->clock_pairs = std::move(pairs);
    } else {
      bundle_->mutable_meta()->hosts.push_back({HostName(n), std::move(pairs)});
    }
  }
  TELLER_RETURN_IF_ERROR(bundle_->Close());
  return std::move(summary_);
}

}  // namespace

base::StatusOr<RunSummary> RunSimulation(const SimConfig& config, const std::string& directory,
                                         const SimOptions& options) {
  TELLER_RETURN_IF_ERROR(ValidateConfig(config));
  SimulationRun run(config, directory, options);
  return run.Run();
}

}  // namespace teller::sim
