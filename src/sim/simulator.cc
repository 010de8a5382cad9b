#include "sim/simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "sim/log_emitter.h"
#include "sim/time_units.h"
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
  return m == Mechanism::kIllegalMemoryAccess || m == Mechanism::kNcclTimeout;
}

// The same run without faults, not written, to place fault onsets in its steps.
int32_t EstimateSteps(const SimConfig& config) {
  SimConfig clean = config;
  clean.faults.clear();
  SimOptions options;
  options.dry_run = true;
  auto run = RunSimulation(clean, "", options);
  const int32_t warm = config.warmup ? config.engine_spec.graph_capture_steps : 0;
  return run.ok() ? std::max(run->steps - warm, 2) : 8;
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
  std::vector<ResolvedFault> out;
  if (config.faults.empty()) return out;
  Rng rng(MixSeed(config.seed, 3));
  const int32_t warm = config.warmup ? config.engine_spec.graph_capture_steps : 0;
  const int32_t n = EstimateSteps(config);
  const ClusterSpec& cl = config.cluster;
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
        s.mechanism == Mechanism::kIllegalMemoryAccess ||
        s.mechanism == Mechanism::kStragglerRank || s.mechanism == Mechanism::kNcclTimeout ||
        s.mechanism == Mechanism::kLaunchLatency || s.mechanism == Mechanism::kMemcpyLatency ||
        s.mechanism == Mechanism::kSyncLatency || s.mechanism == Mechanism::kDriverRetry ||
        s.mechanism == Mechanism::kAllocatorSlowPath ||
        s.mechanism == Mechanism::kMemoryFragmentation;
    if (per_rank && s.rank < 0) s.rank = static_cast<int32_t>(rng.UniformInt(0, cl.world() - 1));
    if (s.mechanism == Mechanism::kEnginePause) s.rank = 0;
    if (s.mechanism == Mechanism::kSyncLatency && config.engine != EngineKind::kTorchFsdp &&
        spec.rank < 0) {
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
      const bool fsdp = config.engine == EngineKind::kTorchFsdp;
      const int32_t per_stage = config.model.layers / (fsdp ? 1 : cl.pp);
      const int32_t stage = fsdp ? 0 : s.rank / cl.tp;
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

base::StatusOr<RunSummary> RunSimulation(const SimConfig& config, const std::string& directory,
                                         const SimOptions& options) {
  TELLER_RETURN_IF_ERROR(ValidateConfig(config));
  const ClusterSpec& cl = config.cluster;
  const int32_t world = cl.world();
  const bool fsdp = config.engine == EngineKind::kTorchFsdp;
  Rng workload_rng(MixSeed(config.seed, 1));
  Rng emit_rng(MixSeed(config.seed, 2));
  Rng log_rng(MixSeed(config.seed, 4));
  Rng misc_rng(MixSeed(config.seed, 5));

  RunSummary summary;
  summary.directory = directory;
  summary.engine = config.engine;
  summary.faults = ResolveFaults(config);
  std::vector<ResolvedFault>& faults = summary.faults;

  // Clocks, pids, hosts.
  std::vector<NodeClock> clocks(static_cast<size_t>(cl.nodes));
  for (int32_t n = 0; n < cl.nodes; ++n) {
    NodeClock& c = clocks[static_cast<size_t>(n)];
    c.monotonic_base = (1800 + 3600 * n) * kSec + misc_rng.UniformInt(0, kSec);
    c.gpu_base = config.start_realtime_ns + misc_rng.UniformInt(-3 * kMs, 3 * kMs);
    c.monotonic_ppm = n == 0 ? 0 : misc_rng.UniformInt(-15, 15);
    c.gpu_ppm = misc_rng.UniformInt(-25, 25);
    c.realtime_skew = n == 0 ? 0 : misc_rng.UniformInt(-180, 180) * kUs;
  }
  std::vector<int64_t> pids(static_cast<size_t>(world));
  std::vector<int64_t> realtime_offset(static_cast<size_t>(world));
  for (int32_t r = 0; r < world; ++r) {
    pids[static_cast<size_t>(r)] = 2000 + 137 * r + misc_rng.UniformInt(0, 99);
    realtime_offset[static_cast<size_t>(r)] =
        config.start_realtime_ns + clocks[static_cast<size_t>(NodeOfRank(cl, r))].realtime_skew;
  }
  auto host_name = [](int32_t node) { return fmt::format("node{}", node); };

  std::unique_ptr<wire::BundleWriter> bundle;
  std::vector<wire::ProcessWriter*> procs(static_cast<size_t>(world), nullptr);
  std::vector<wire::LogWriter*> logs(static_cast<size_t>(world), nullptr);
  const std::string command =
      config.engine == EngineKind::kSglang
          ? fmt::format("python3 -m sglang.launch_server --model-path {} --tp {} --nnodes {}",
                        config.model.name, cl.tp, cl.nodes)
          : (fsdp ? fmt::format("torchrun --nnodes {} --nproc-per-node {} serve_fsdp.py --model {}",
                                cl.nodes, cl.gpus_per_node, config.model.name)
                  : (config.engine == EngineKind::kVllmV1Offline
                         ? fmt::format("python3 offline_infer.py --model {} -tp {} -pp {}",
                                       config.model.name, cl.tp, cl.pp)
                         : fmt::format("vllm serve {} --tensor-parallel-size {} "
                                       "--pipeline-parallel-size {}",
                                       config.model.name, cl.tp, cl.pp)));
  if (!options.dry_run) {
    wire::BundleMeta meta;
    meta.tool_version = "0.1.0";
    meta.host = host_name(0);
    meta.command = {"teller",
                    "synth",
                    "run",
                    "--engine",
                    std::string(EngineName(config.engine)),
                    "--seed",
                    std::to_string(config.seed)};
    meta.start_time_ns = config.start_realtime_ns;
    for (int32_t r = 0; r < world; ++r) {
      meta.ranks.push_back({r, LocalRankOf(cl, r), host_name(NodeOfRank(cl, r)),
                            pids[static_cast<size_t>(r)], LocalRankOf(cl, r)});
    }
    for (int32_t n = 0; n < cl.nodes; ++n) {
      for (int32_t g = 0; g < cl.gpus_per_node; ++g) {
        meta.devices.push_back(
            {host_name(n), g, cl.gpu_name,
             fmt::format("GPU-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
                         MixSeed(config.seed, 100 + n * 16 + g) & 0xffffffff, n, g, 0x5a5a,
                         MixSeed(config.seed, 200 + n * 16 + g) & 0xffffffffffffull)});
      }
    }
    meta.capture = {{"cupti_activity", true, ""},
                    {"nvtx", true, ""},
                    {"python_hooks", true, ""},
                    {"stdout", true, ""}};
    meta.notes = {fmt::format("synthetic run {} written by teller synth (engine {}, seed {})",
                              config.run_id, EngineName(config.engine), config.seed)};
    TELLER_ASSIGN_OR_RETURN(bundle, wire::BundleWriter::Create(directory, std::move(meta)));
    for (int32_t r = 0; r < world; ++r) {
      wire::ProcessInfoRecord info;
      info.pid = pids[static_cast<size_t>(r)];
      info.rank = r;
      info.local_rank = LocalRankOf(cl, r);
      info.world_size = world;
      info.device = LocalRankOf(cl, r);
      const std::string host = host_name(NodeOfRank(cl, r));
      info.host = host;
      info.name = "python3";
      info.command = command;
      TELLER_ASSIGN_OR_RETURN(procs[static_cast<size_t>(r)], bundle->OpenProcess(info));
      TELLER_RETURN_IF_ERROR(procs[static_cast<size_t>(r)]->Append(
          wire::ThreadInfoRecord{info.pid, r == 0 ? "MainThread" : "VllmWorker"}));
      TELLER_ASSIGN_OR_RETURN(logs[static_cast<size_t>(r)],
                              bundle->OpenLog(fmt::format("rank{}", r)));
    }
  }

  EngineScheduler scheduler(config, &workload_rng);
  StepEmitter emitter(config, &emit_rng);
  LogEmitter log(config, &log_rng, pids, realtime_offset);
  LabelBuilder labels(config);
  labels.SetFaults(&faults);

  std::vector<RankBuffer> buffers;
  std::vector<AffectedInstance> affected;
  std::vector<int32_t> request_steps(scheduler.requests().size(), 0);
  std::vector<int64_t> request_nodes(scheduler.requests().size(), 0);
  int64_t written_logs = 0;

  auto write_logs = [&]() -> base::Status {
    for (SimLogLine& line : log.Drain()) {
      ++written_logs;
      if (options.keep_logs) summary.logs.push_back(line);
      if (options.dry_run) continue;
      const int32_t r = line.rank;
      wire::LogLineRecord rec;
      rec.ts_ns = realtime_offset[static_cast<size_t>(r)] + line.true_ns;
      rec.clock = wire::ClockDomain::kRealtime;
      rec.pid = pids[static_cast<size_t>(r)];
      rec.stream = line.stderr_stream ? "stderr" : "stdout";
      rec.text = line.text;
      rec.rank = r;
      const std::string host = host_name(NodeOfRank(cl, r));
      rec.host = host;
      TELLER_RETURN_IF_ERROR(logs[static_cast<size_t>(r)]->Append(rec));
    }
    return base::OkStatus();
  };

  auto write_step = [&](const std::vector<RankBuffer>& bufs) -> base::Status {
    if (options.dry_run) return base::OkStatus();
    for (const RankBuffer& b : bufs) {
      wire::ProcessWriter* w = procs[static_cast<size_t>(b.rank)];
      const NodeClock& c = clocks[static_cast<size_t>(NodeOfRank(cl, b.rank))];
      const int64_t tid = pids[static_cast<size_t>(b.rank)];
      for (wire::HostRangeRecord h : b.ranges) {
        h.tid = tid;
        h.start_ns = c.Monotonic(h.start_ns);
        h.end_ns = c.Monotonic(h.end_ns);
        TELLER_RETURN_IF_ERROR(w->Append(h));
      }
      for (wire::ApiCallRecord a : b.api_calls) {
        a.tid = tid;
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
  };

  log.Startup(0);
  int64_t now = 300 * kMs;  // engine ready after start-up
  int32_t step = 0;
  std::vector<uint8_t> arrived(scheduler.requests().size(), 0);
  auto announce_arrivals = [&](int64_t until) {
    for (const Request& r : scheduler.requests()) {
      if (!arrived[static_cast<size_t>(r.index)] && r.arrival_ns <= until) {
        arrived[static_cast<size_t>(r.index)] = 1;
        log.RequestArrived(r, std::max<int64_t>(r.arrival_ns, 0) + 300 * kMs);
      }
    }
  };
  // Requests arrive on the engine's clock after start-up.
  for (Request& r : scheduler.mutable_requests()) r.arrival_ns += 300 * kMs;

  auto finish_step = [&](const StepPlan& plan, const StepResult& result, bool anomaly,
                         int32_t fault_index, std::string_view benign) -> base::Status {
    int64_t events = 0;
    for (const RankBuffer& b : buffers) events += static_cast<int64_t>(b.EventCount());
    summary.events += events;
    summary.step_events.push_back(events);
    summary.step_ns.push_back(result.end_ns - now);
    summary.step_anomaly.push_back(anomaly);
    summary.step_benign.push_back(!benign.empty());
    labels.AddStep(plan, scheduler.requests(), anomaly, fault_index, benign, events);
    for (const StepEntry& e : plan.entries) {
      ++request_steps[static_cast<size_t>(e.request)];
      request_nodes[static_cast<size_t>(e.request)] +=
          fsdp ? static_cast<int64_t>(buffers[static_cast<size_t>(e.dp_rank)].EventCount())
               : events;
    }
    if (options.on_step) options.on_step(plan, buffers);
    TELLER_RETURN_IF_ERROR(write_step(buffers));
    return base::OkStatus();
  };

  // Warm-up: CUDA-graph capture / dummy runs before the first request (benign).
  const int32_t warm = config.warmup ? config.engine_spec.graph_capture_steps : 0;
  for (int32_t w = 0; w < warm; ++w) {
    StepPlan plan;
    plan.step = step;
    plan.warmup = true;
    plan.phase = StepPhase::kDecode;
    StepResult result = emitter.EmitStep(plan, scheduler.requests(), now, {}, false, 0, &buffers);
    TELLER_RETURN_IF_ERROR(finish_step(plan, result, false, -1, "graph_capture"));
    now = result.end_ns + 2 * kMs;
    ++step;
  }
  if (now < 350 * kMs) now = 350 * kMs;

  bool first_real = true;
  bool misroute_armed = false;
  bool crashed = false;
  StepPlan plan;
  std::vector<ActiveFault> active;
  auto on_now = [&](const FaultSpec& s) {
    return step >= s.onset_step && step < s.onset_step + s.duration_steps;
  };
  while (!scheduler.Done() && step < config.max_steps) {
    // Scheduling faults for this step.
    active.clear();
    misroute_armed = false;
    double kv_factor = 1.0;
    int32_t fault_index = -1;
    for (size_t i = 0; i < faults.size(); ++i) {
      ResolvedFault& f = faults[i];
      const FaultSpec& s = f.spec;
      // KV pressure needs load to show: it waits for two running requests.
      if (s.mechanism == Mechanism::kKvCachePressure && step == s.onset_step &&
          scheduler.running_count() < 2 && !scheduler.Done()) {
        ++f.spec.onset_step;
      }
      const bool on = step >= s.onset_step && step < s.onset_step + s.duration_steps;
      // A misroute needs a new request: it stays armed until one shows up.
      if (s.mechanism == Mechanism::kDecodeMisroute &&
          (on_now(s) || (step >= s.onset_step && f.anomalous_steps.empty()))) {
        misroute_armed = true;
      }
      if (s.mechanism == Mechanism::kStarvedRequest) {
        if (on && f.starved_request < 0) {
          // The next request still waiting or still to arrive gets starved.
          for (const Request& r : scheduler.requests()) {
            if (r.first_step < 0 && r.state != RequestState::kAborted) {
              f.starved_request = r.index;
              break;
            }
          }
        }
        scheduler.SetStarvedRequest(on ? f.starved_request : -1);
      }
      if (!on) continue;
      fault_index = static_cast<int32_t>(i);
      if (s.mechanism == Mechanism::kKvCachePressure) kv_factor = 1.0 - s.magnitude;
      ActiveFault a;
      a.mechanism = s.mechanism;
      a.magnitude = s.magnitude;
      a.rank = s.rank;
      a.node = s.node;
      a.family = ParseFamily(s.family);
      a.crash_layer = f.crash_layer;
      active.push_back(a);
    }
    scheduler.SetKvCapacityFactor(kv_factor);
    scheduler.SetMisrouteNext(misroute_armed);

    announce_arrivals(now);
    if (!scheduler.Schedule(step, now, &plan)) {
      const int64_t next = scheduler.NextArrivalNs();
      if (next < 0) break;  // nothing can ever run (should not happen)
      now = std::max(now + 200 * kUs, next + 150 * kUs);
      continue;
    }
    for (int32_t p : plan.preempted) {
      log.Preempted(scheduler.requests()[static_cast<size_t>(p)], now,
                    scheduler.total_preemptions());
    }

    // Benign pauses: occasional garbage collection in the engine loop.
    double gc_ms = 0;
    std::string_view benign;
    if (misc_rng.Bernoulli(0.03)) {
      gc_ms = misc_rng.Uniform(2.0, 9.0);
      benign = "gc_pause";
    }
    if (first_real) benign = "cold_start";
    int32_t longest = 0;
    for (const StepEntry& e : plan.entries) longest = std::max(longest, e.tokens);
    if (benign.empty() && longest >= 1500) benign = "long_prompt";

    StepResult result =
        emitter.EmitStep(plan, scheduler.requests(), now, active, first_real, gc_ms, &buffers);
    first_real = false;

    // Which fault, if any, shows in this step, and whom it touched.
    bool anomaly = false;
    int32_t shown = -1;
    for (size_t i = 0; i < faults.size(); ++i) {
      ResolvedFault& f = faults[i];
      const FaultSpec& s = f.spec;
      const bool on = step >= s.onset_step && step < s.onset_step + s.duration_steps;
      bool hit = false;
      std::set<int32_t> touched;
      switch (s.mechanism) {
        case Mechanism::kKvCachePressure:
          for (int32_t p : plan.preempted) touched.insert(p);
          for (const StepEntry& e : plan.entries) {
            const Request& r = scheduler.requests()[static_cast<size_t>(e.request)];
            if (e.prefill && r.preemptions > 0) touched.insert(e.request);
          }
          hit = !touched.empty() &&
                (on || !plan.preempted.empty() || step < s.onset_step + 4 * s.duration_steps);
          break;
        case Mechanism::kStarvedRequest:
          if (on && f.starved_request >= 0) {
            const Request& r = scheduler.requests()[static_cast<size_t>(f.starved_request)];
            if (r.state == RequestState::kWaiting) {
              hit = true;
              touched.insert(f.starved_request);
            }
          }
          break;
        case Mechanism::kDecodeMisroute:
          for (const StepEntry& e : plan.entries) {
            if (e.misrouted) {
              hit = true;
              touched.insert(e.request);
              f.spec.request = scheduler.requests()[static_cast<size_t>(e.request)].id;
            }
          }
          break;
        default:
          if (on) {
            for (const RankBuffer& b : buffers) hit |= b.any_hit;
            if (IsCrash(s.mechanism)) hit = result.crashed;
            if (hit) {
              for (const StepEntry& e : plan.entries) touched.insert(e.request);
            }
          }
      }
      if (!hit) continue;
      anomaly = true;
      shown = static_cast<int32_t>(i);
      f.anomalous_steps.insert(step);
      f.faulty_requests.insert(touched.begin(), touched.end());
      if (f.first_effect_ns < 0) f.first_effect_ns = now;
      f.last_effect_ns = result.end_ns;
    }
    (void)fault_index;
    if (anomaly) {
      affected.clear();
      for (const RankBuffer& b : buffers) CollectAffected(step, b, &affected);
      for (const AffectedInstance& a : affected)
        faults[static_cast<size_t>(shown)].families.insert(a.family);
      labels.AddAffected(std::move(affected));
      affected = {};
    }
    if (result.link_spikes > 0) {
      for (int32_t i = 0; i < result.link_spikes; ++i) {
        if (log_rng.Bernoulli(0.35)) {
          log.LinkRetry(static_cast<int32_t>(log_rng.UniformInt(0, world - 1)),
                        result.end_ns - 200 * kUs);
          if (shown >= 0) ++faults[static_cast<size_t>(shown)].log_lines;
        }
      }
    }
    TELLER_RETURN_IF_ERROR(
        finish_step(plan, result, anomaly, anomaly ? shown : -1, anomaly ? "" : benign));
    ++step;

    if (result.crashed) {
      crashed = true;
      for (size_t i = 0; i < faults.size(); ++i) {
        ResolvedFault& f = faults[i];
        if (!IsCrash(f.spec.mechanism) || !f.anomalous_steps.count(step - 1)) continue;
        if (f.spec.mechanism == Mechanism::kIllegalMemoryAccess) {
          log.IllegalAccess(result.crash_rank, result.end_ns, result.crash_kernel);
          f.log_lines += 8;
        } else {
          const int32_t group = fsdp ? world : cl.tp;
          const int32_t first_rank = fsdp ? 0 : (result.crash_rank / cl.tp) * cl.tp;
          log.NcclTimeout(result.crash_rank, result.end_ns, result.crash_collective,
                          result.crash_sequence, result.crash_numel, group, first_rank);
          f.log_lines += 3 * (group - 1);
        }
        for (int32_t a : scheduler.AbortAll(result.end_ns + 10 * kMs)) {
          f.faulty_requests.insert(a);
          log.RequestAborted(scheduler.requests()[static_cast<size_t>(a)],
                             result.end_ns + 10 * kMs);
        }
      }
      now = result.end_ns + 20 * kMs;
      break;
    }
    for (int32_t r : scheduler.Complete(plan, result.end_ns)) {
      log.RequestFinished(scheduler.requests()[static_cast<size_t>(r)], result.end_ns);
    }
    log.StepDone(plan, scheduler, result.end_ns);
    now = result.end_ns + static_cast<int64_t>(misc_rng.Uniform(30, 120) * kUs);
    TELLER_RETURN_IF_ERROR(write_logs());
  }
  log.Finish(now + 5 * kMs);
  TELLER_RETURN_IF_ERROR(write_logs());
  summary.crashed = crashed;
  summary.steps = step;
  summary.log_lines = written_logs;

  // Per-request summary for the dataset statistics.
  for (const Request& r : scheduler.requests()) {
    RequestSummary rs;
    rs.id = r.id;
    rs.steps = request_steps[static_cast<size_t>(r.index)];
    rs.nodes = request_nodes[static_cast<size_t>(r.index)];
    rs.arrival_ns = r.arrival_ns;
    rs.finish_ns = r.finish_ns;
    for (const ResolvedFault& f : faults) {
      if (f.faulty_requests.count(r.index)) {
        rs.is_fault = true;
        rs.fault_type = std::string(CategoryName(InfoOf(f.spec.mechanism).category));
      }
    }
    summary.requests.push_back(std::move(rs));
  }
  if (!options.dry_run) {
    const std::string json = labels.Finalize(scheduler.requests(), config.start_realtime_ns);
    TELLER_RETURN_IF_ERROR(bundle->WriteLabels(json));
    // Clock pairs every 0.5 s over the run, per node.
    const int64_t end = now + kSec;
    for (int32_t n = 0; n < cl.nodes; ++n) {
      const NodeClock& c = clocks[static_cast<size_t>(n)];
      std::vector<wire::ClockPair> pairs;
      for (int64_t t = 0; t <= end; t += kSec / 2) {
        pairs.push_back({config.start_realtime_ns + t + c.realtime_skew, c.Monotonic(t), c.Gpu(t)});
      }
      if (n == 0) {
        bundle->mutable_meta()->clock_pairs = std::move(pairs);
      } else {
        bundle->mutable_meta()->hosts.push_back({host_name(n), std::move(pairs)});
      }
    }
    TELLER_RETURN_IF_ERROR(bundle->Close());
  }
  return summary;
}

}  // namespace teller::sim
