#include "perturb/perturb.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>

#include "perturb/replay.h"
#include "sim/labels.h"
#include "sim/rng.h"
#include "sim/scheduler.h"
#include "sim/twin_diff.h"
#include "wire/bundle_writer.h"
#include "wire/labels_file.h"

namespace teller::perturb {
namespace {

constexpr int64_t kStepGapNs = 50'000;
constexpr uint64_t kCorrelationStride = 1ull << 32;
constexpr uint64_t kOnsetStream = 0x0a5e7;
constexpr uint64_t kRankPickStream = 0x4a4b;
constexpr int32_t kPid = 4242;

std::optional<sim::Family> ParseFamily(std::string_view name) {
  for (int f = 0; f <= static_cast<int>(sim::Family::kHost); ++f) {
    if (sim::FamilyName(static_cast<sim::Family>(f)) == name) return static_cast<sim::Family>(f);
  }
  return std::nullopt;
}

sim::StepPhase PhaseOf(std::string_view phase) {
  if (phase == "prefill") return sim::StepPhase::kPrefill;
  if (phase == "decode") return sim::StepPhase::kDecode;
  return sim::StepPhase::kMixed;
}

std::string SupportedList(int32_t ranks) {
  std::string out;
  for (const sim::MechanismInfo& info : sim::AllMechanisms()) {
    if (!PerturbSupports(info.mechanism)) continue;
    if (ranks < 2 && NeedsSeveralRanks(info.mechanism)) continue;
    out += (out.empty() ? "" : ", ") + std::string(info.name);
  }
  return out;
}

bool HasCollective(const TraceTemplates& templates) {
  for (const StepTemplate& t : templates.steps) {
    for (const TemplateEvent& e : t.events) {
      if (e.kind == EventKind::kKernel && e.layer == model::Layer::kComm) return true;
    }
  }
  return false;
}

// Whether the mechanism acts on every rank of the replay (its ranks share one node).
bool ActsOnEveryRank(sim::Mechanism mechanism) {
  return mechanism == sim::Mechanism::kLinkDegradation ||
         mechanism == sim::Mechanism::kHostMemoryPressure;
}

// The rank a fault acts on: 0 on one rank; -1 (every rank) for the link and the node's
// host memory; else the given rank, or rank 0 for an engine pause (the engine loop runs
// there), or one picked from the seed.
int32_t TargetRank(const sim::FaultSpec& spec, int32_t ranks, uint64_t seed) {
  if (ranks == 1) return 0;
  if (ActsOnEveryRank(spec.mechanism)) return -1;
  if (spec.rank >= 0) return spec.rank;
  if (spec.mechanism == sim::Mechanism::kEnginePause) return 0;
  sim::Rng rng(sim::MixSeed(seed, kRankPickStream));
  return static_cast<int32_t>(rng.UniformInt(0, ranks - 1));
}

// Which ranks and collectives the mechanism needs, and whether the target exists.
base::Status CheckTargets(const sim::FaultSpec& spec, const TraceTemplates& templates,
                          int32_t ranks) {
  const std::string_view name = sim::InfoOf(spec.mechanism).name;
  if (NeedsSeveralRanks(spec.mechanism)) {
    if (ranks < 2) {
      return base::InvalidArgument(
          "--fault {}: needs several ranks, and {} is replayed as one rank (give --ranks 2 or "
          "more; supported on one rank: {})",
          name, templates.source, SupportedList(1));
    }
    if (!HasCollective(templates)) {
      return base::InvalidArgument("--fault {}: {} has no collective kernel (layer COMM)", name,
                                   templates.source);
    }
  }
  if (spec.node > 0) {
    return base::InvalidArgument("--fault {}: node {} does not exist: the replay has one node",
                                 name, spec.node);
  }
  if (spec.rank >= ranks) {
    return base::InvalidArgument("--fault {}: rank {} does not exist in a replay of {} rank(s)",
                                 name, spec.rank, ranks);
  }
  if (ranks > 1 && spec.rank >= 0 && ActsOnEveryRank(spec.mechanism)) {
    return base::InvalidArgument("--fault {}: acts on every rank of the replay; leave out rank",
                                 name);
  }
  return base::OkStatus();
}

// Kernel time per family over the templates (collectives left out).
std::map<sim::Family, int64_t> FamilyTime(const TraceTemplates& templates) {
  std::map<sim::Family, int64_t> time;
  for (const StepTemplate& t : templates.steps) {
    for (const TemplateEvent& e : t.events) {
      if (e.kind == EventKind::kKernel && e.family != sim::Family::kCommunication) {
        time[e.family] += e.dur_ns;
      }
    }
  }
  return time;
}

base::Status ResolveFamily(const TraceTemplates& templates, sim::FaultSpec* f) {
  const std::map<sim::Family, int64_t> time = FamilyTime(templates);
  if (!f->family.empty()) {
    const std::optional<sim::Family> family = ParseFamily(f->family);
    if (!family) {
      return base::InvalidArgument(
          "--fault kernel_slowdown: family '{}' is not one of gemm, "
          "attention, norm, rotary, activation, kv_cache, embedding, "
          "sampling, elementwise",
          f->family);
    }
    if (!time.count(*family)) {
      return base::InvalidArgument("--fault kernel_slowdown: {} has no kernel of family '{}'",
                                   templates.source, f->family);
    }
    return base::OkStatus();
  }
  if (time.count(sim::Family::kAttention)) {
    f->family = "attention";
    return base::OkStatus();
  }
  sim::Family best = sim::Family::kElementwise;
  int64_t most = -1;
  for (const auto& [family, ns] : time) {
    if (ns > most) {
      best = family;
      most = ns;
    }
  }
  if (most < 0) return base::InvalidArgument("{}: no kernel to slow down", templates.source);
  f->family = std::string(sim::FamilyName(best));
  return base::OkStatus();
}

std::string WhenOf(const wire::LabelsFault& fault) {
  return fault.affected_steps.empty() ? fmt::format("step {}", fault.onset_step)
                                      : fmt::format("steps {}-{}", fault.affected_steps.front(),
                                                    fault.affected_steps.back());
}

// The simulator's phrasings of a degraded link speak of links between nodes; a replay's
// ranks share one node, and the fault slows the transfer of every collective.
void ReplayedLinkExplanations(int32_t ranks, wire::LabelsFault* fault) {
  if (fault->mechanism != sim::InfoOf(sim::Mechanism::kLinkDegradation).name) return;
  const int pct = static_cast<int>(fault->magnitude * 100 + 0.5);
  const std::string when = WhenOf(*fault);
  fault->explanations = {
      fmt::format("The GPU interconnect degraded during {}: every collective kernel took about "
                  "{}% longer on all {} ranks at once, while the ranks reached the collectives "
                  "together and compute kernels kept their durations. Check NVLink/NIC error "
                  "counters and link speeds (nvidia-smi nvlink -s, ibstat).",
                  when, pct, ranks),
      fmt::format("{}: collectives slow on every rank (~{}%), no rank arrives late; the link "
                  "between the GPUs, not a straggler. Run nccl-tests to confirm.",
                  when, pct),
      fmt::format("Communication fault ({}): degraded link. Evidence: matched collectives are "
                  "longer on all ranks and end together, compute is unchanged. Action: link "
                  "diagnostics, reseat cables or drain the node.",
                  when)};
}

// The simulator's phrasings of a GPU throttle compare the GPU with its peers; a
// one-rank replay has none, so its references say what the trace itself shows.
void OneRankExplanations(wire::LabelsFault* fault) {
  if (fault->mechanism != sim::InfoOf(sim::Mechanism::kGpuThrottle).name) return;
  const int pct = static_cast<int>(fault->magnitude * 100 + 0.5);
  const std::string when = WhenOf(*fault);
  fault->explanations = {
      fmt::format("GPU throttling on rank 0 (GPU 0): from {} every kernel ran about {}% slower "
                  "than the same kernels in the run's other steps, while host ranges and launch "
                  "calls kept their durations. Check nvidia-smi clocks and throttle reasons "
                  "(power, thermal) for that GPU.",
                  when, pct),
      fmt::format("GPU 0 was throttled ({}): every kernel family stretched by ~{}% at once; the "
                  "host side did not change. Inspect cooling and power capping of that GPU.",
                  when, pct),
      fmt::format("CUDA/kernel fault: a slow GPU, rank 0 ({}). Evidence: identical kernels are "
                  "uniformly longer than in the steps before and after; log shows nothing. "
                  "Action: nvidia-smi -q -d PERFORMANCE, reseat or drain the GPU.",
                  when)};
}

class PerturbRun {
 public:
  PerturbRun(const TraceTemplates& templates, const PerturbOptions& options,
             const std::string& directory)
      : templates_(templates), options_(options), labels_(Config()) {
    summary_.directory = directory;
  }

  base::StatusOr<PerturbSummary> Run();

 private:
  sim::SimConfig Config() const {
    sim::SimConfig config;
    config.cluster.nodes = config.cluster.pp = 1;
    config.cluster.gpus_per_node = config.cluster.tp = options_.ranks;
    config.cluster.gpu_name = "";
    config.seed = options_.seed;
    config.run_id = options_.run_id;
    config.start_realtime_ns = options_.start_realtime_ns;
    return config;
  }
  base::Status Open();
  base::Status Step(int32_t step);
  base::Status Write(const ReplayedStep& r, const StepTemplate& t, int32_t step,
                     wire::ProcessWriter* process);
  base::Status Finish();

  const TraceTemplates& templates_;
  const PerturbOptions& options_;
  sim::LabelBuilder labels_;
  std::vector<sim::ResolvedFault> faults_;
  std::optional<StepFault> step_fault_;
  std::unique_ptr<wire::BundleWriter> bundle_;
  std::vector<wire::ProcessWriter*> processes_;  // by rank
  std::vector<ReplayedStep> faulty_, twin_;      // by rank
  sim::StepChange change_;
  int64_t cursor_ = 0;
  PerturbSummary summary_;
};

base::Status PerturbRun::Open() {
  wire::BundleMeta meta;
  meta.tool_version = "0.1.0";
  meta.host = "real-trace";
  const int32_t ranks = options_.ranks;
  meta.command = {"teller", "synth", "perturb", "--seed", std::to_string(options_.seed)};
  if (ranks > 1) {
    meta.command.push_back("--ranks");
    meta.command.push_back(std::to_string(ranks));
  }
  meta.start_time_ns = options_.start_realtime_ns;
  for (int32_t r = 0; r < ranks; ++r) {
    meta.ranks.push_back({r, r, "real-trace", kPid + r, r});
    meta.devices.push_back(
        {"real-trace", r, "", fmt::format("GPU-00000000-0000-0000-0000-{:012d}", r)});
  }
  meta.capture = {{"cupti_activity", true, ""}, {"nvtx", true, ""}};
  meta.notes = templates_.notes;
  // The fault is named in labels.json only, so that a run whose fault changed nothing
  // is the fault-free run byte for byte.
  meta.notes.push_back(fmt::format("perturb: {} steps replayed from {} template(s) of {} (seed {})",
                                   options_.steps, templates_.steps.size(), templates_.source,
                                   options_.seed));
  if (ranks > 1) {
    meta.notes.push_back(fmt::format(
        "perturb: the templates replayed on {} ranks, each with its own jitter; collective "
        "kernels end together on every rank, when the last rank has arrived",
        ranks));
  }
  TELLER_ASSIGN_OR_RETURN(bundle_, wire::BundleWriter::Create(summary_.directory, std::move(meta)));
  for (int32_t r = 0; r < ranks; ++r) {
    wire::ProcessInfoRecord info;
    info.pid = kPid + r;
    info.rank = r;
    info.local_rank = r;
    info.world_size = ranks;
    info.device = r;
    info.host = "real-trace";
    info.name = "python3";
    info.command = "teller synth perturb";
    TELLER_ASSIGN_OR_RETURN(wire::ProcessWriter * process, bundle_->OpenProcess(info));
    for (const HostThread& h : templates_.threads) {
      TELLER_RETURN_IF_ERROR(process->Append(wire::ThreadInfoRecord{h.tid, h.name}));
    }
    processes_.push_back(process);
  }
  return base::OkStatus();
}

base::Status PerturbRun::Write(const ReplayedStep& r, const StepTemplate& t, int32_t step,
                               wire::ProcessWriter* process) {
  const sim::RankBuffer& b = r.buffer;
  const std::array<wire::Arg, 2> args = {wire::Arg::Int(wire::kStepArgStep, step),
                                         wire::Arg::String(wire::kStepArgPhase, t.phase)};
  for (size_t i = 0; i < b.ranges.size(); ++i) {
    wire::HostRangeRecord h = b.ranges[i];
    if (i == 0) h.args = args;
    TELLER_RETURN_IF_ERROR(process->Append(h));
  }
  for (const wire::ApiCallRecord& a : b.api_calls) TELLER_RETURN_IF_ERROR(process->Append(a));
  for (const wire::KernelRecord& k : b.kernels) TELLER_RETURN_IF_ERROR(process->Append(k));
  for (const wire::MemcpyRecord& m : b.memcpys) TELLER_RETURN_IF_ERROR(process->Append(m));
  for (const wire::MemsetRecord& m : r.memsets) TELLER_RETURN_IF_ERROR(process->Append(m));
  for (const wire::SyncRecord& s : b.syncs) TELLER_RETURN_IF_ERROR(process->Append(s));
  return base::OkStatus();
}

// The end of a step over its ranks, and the events it has.
int64_t EndOf(const std::vector<ReplayedStep>& ranks) {
  int64_t end = 0;
  for (const ReplayedStep& r : ranks) end = std::max(end, r.end_ns);
  return end;
}

int64_t EventsOf(const std::vector<ReplayedStep>& ranks) {
  int64_t events = 0;
  for (const ReplayedStep& r : ranks) events += r.events;
  return events;
}

std::vector<sim::RankBuffer> BuffersOf(const std::vector<ReplayedStep>& ranks) {
  std::vector<sim::RankBuffer> buffers;
  buffers.reserve(ranks.size());
  for (const ReplayedStep& r : ranks) buffers.push_back(r.buffer);
  return buffers;
}

base::Status PerturbRun::Step(int32_t step) {
  const StepTemplate& t = templates_.steps[static_cast<size_t>(step) % templates_.steps.size()];
  const int64_t start = cursor_;
  const ReplayAt at{options_.seed, step, start,
                    kCorrelationStride * static_cast<uint64_t>(step + 1)};
  bool active = false;
  sim::ActiveFault active_fault;
  if (!faults_.empty()) {
    const sim::FaultSpec& s = faults_[0].spec;
    active = step >= s.onset_step && step < s.onset_step + s.duration_steps;
    active_fault = {s.mechanism, s.magnitude, s.rank, s.node, step_fault_->family, -1};
  }
  ReplayRanks(templates_, t, at, options_.ranks, nullptr, &twin_);
  const bool changed = active && step_fault_;
  if (changed) ReplayRanks(templates_, t, at, options_.ranks, &*step_fault_, &faulty_);
  const std::vector<ReplayedStep>& run = changed ? faulty_ : twin_;
  const int64_t run_end = EndOf(run);
  change_ = sim::DiffStep(
      BuffersOf(run), BuffersOf(twin_), start,
      active ? std::vector<sim::ActiveFault>{active_fault} : std::vector<sim::ActiveFault>{},
      Config().cluster);
  const bool anomaly = active && change_.any();
  if (anomaly) {
    sim::ResolvedFault& f = faults_[0];
    f.anomalous_steps.insert(step);
    if (f.first_effect_ns < 0) f.first_effect_ns = start - options_.start_realtime_ns;
    f.last_effect_ns = run_end - options_.start_realtime_ns;
    for (const sim::InstanceChange& c : change_.instances) {
      if (c.culprit) f.families.insert(c.family);
    }
    summary_.abnormal_steps.push_back(step);
  }
  sim::StepPlan plan;
  plan.step = step;
  plan.phase = PhaseOf(t.phase);
  sim::StepOutcome outcome;
  outcome.is_anomaly = anomaly;
  outcome.fault = anomaly ? 0 : -1;
  outcome.events = EventsOf(run);
  outcome.duration_ns = run_end - start;
  outcome.twin_ns = EndOf(twin_) - start;
  outcome.change = &change_;
  labels_.AddStep(plan, {}, outcome);
  summary_.events += outcome.events;
  cursor_ = run_end + kStepGapNs;
  for (size_t r = 0; r < run.size(); ++r) {
    TELLER_RETURN_IF_ERROR(Write(run[r], t, step, processes_[r]));
  }
  return base::OkStatus();
}

base::Status PerturbRun::Finish() {
  summary_.step_truth = labels_.StepTruths();
  std::string json = labels_.Finalize({}, options_.start_realtime_ns);
  TELLER_ASSIGN_OR_RETURN(wire::Labels labels, wire::ParseLabels(json, "labels.json"));
  labels.engine = summary_.engine;
  labels.model = {templates_.source, 0, 0};
  labels.cluster = {1, options_.ranks, options_.ranks, 1, ""};
  if (!labels.faults.empty()) {
    if (options_.ranks == 1) OneRankExplanations(&labels.faults[0]);
    if (options_.ranks > 1) ReplayedLinkExplanations(options_.ranks, &labels.faults[0]);
    summary_.effect = labels.faults[0].effect;
    summary_.manifested = labels.faults[0].manifested;
  }
  for (const wire::LabelsOperator& op : labels.affected_operators) {
    summary_.labelled_instances += static_cast<int64_t>(op.ordinals.size());
  }
  TELLER_RETURN_IF_ERROR(bundle_->WriteLabels(wire::WriteLabelsJson(labels)));
  const int64_t begin = options_.start_realtime_ns;
  const int64_t end = cursor_ + 1'000'000'000;
  for (int64_t t : {begin, end}) bundle_->AddClockPair({t, t, t});
  return bundle_->Close();
}

base::StatusOr<PerturbSummary> PerturbRun::Run() {
  summary_.steps = options_.steps;
  summary_.templates = static_cast<int32_t>(templates_.steps.size());
  summary_.engine = EngineOfTemplates(templates_);
  summary_.device_sigma = templates_.device_sigma;
  summary_.sigma_method = templates_.sigma_method;
  if (options_.fault) {
    TELLER_ASSIGN_OR_RETURN(
        sim::FaultSpec spec,
        ResolveFault(*options_.fault, templates_, options_.steps, options_.seed, options_.ranks));
    sim::ResolvedFault f;
    f.spec = spec;
    faults_.push_back(std::move(f));
    StepFault sf;
    sf.mechanism = spec.mechanism;
    sf.magnitude = spec.magnitude;
    if (!spec.family.empty())
      sf.family = ParseFamily(spec.family).value_or(sim::Family::kAttention);
    sf.rank = spec.rank;
    step_fault_ = sf;
    summary_.fault = spec;
    labels_.SetFaults(&faults_);
  }
  TELLER_RETURN_IF_ERROR(Open());
  cursor_ = options_.start_realtime_ns + 1'000'000;
  for (int32_t step = 0; step < options_.steps; ++step) TELLER_RETURN_IF_ERROR(Step(step));
  TELLER_RETURN_IF_ERROR(Finish());
  return std::move(summary_);
}

}  // namespace

std::string EngineOfTemplates(const TraceTemplates& templates) {
  std::string source = templates.source;
  for (char& c : source) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (std::string_view engine : {"vllm", "sglang"}) {
    if (source.find(engine) != std::string::npos) return std::string(engine);
  }
  for (const std::string& name : templates.names) {
    if (name.find("vllm") != std::string::npos) return "vllm";
    if (name.find("sglang") != std::string::npos) return "sglang";
  }
  return "pytorch";
}

base::StatusOr<sim::FaultSpec> ResolveFault(const sim::FaultSpec& spec,
                                            const TraceTemplates& templates, int32_t steps,
                                            uint64_t seed, int32_t ranks) {
  const sim::MechanismInfo& info = sim::InfoOf(spec.mechanism);
  if (ranks < 1) return base::InvalidArgument("--ranks must be at least 1, got {}", ranks);
  if (!PerturbSupports(spec.mechanism)) {
    return base::InvalidArgument("--fault {}: not injected into real traces (supported: {})",
                                 info.name, SupportedList(ranks));
  }
  TELLER_RETURN_IF_ERROR(CheckTargets(spec, templates, ranks));
  if (steps < 1) return base::InvalidArgument("--steps must be at least 1, got {}", steps);
  sim::FaultSpec f = spec;
  f.rank = TargetRank(spec, ranks, seed);
  f.node = 0;
  if (f.magnitude < 0) f.magnitude = info.default_magnitude;
  if (f.duration_steps < 0) f.duration_steps = info.default_duration_steps;
  if (f.onset_step < 0) {
    sim::Rng rng(sim::MixSeed(seed, kOnsetStream));
    const int32_t lo = steps / 3;
    const int32_t hi = std::max(lo, 2 * steps / 3 - 1);
    f.onset_step = static_cast<int32_t>(rng.UniformInt(lo, hi));
  }
  if (f.onset_step >= steps) {
    return base::InvalidArgument("--fault {}: onset {} is past the last step {}", info.name,
                                 f.onset_step, steps - 1);
  }
  f.duration_steps = std::min(f.duration_steps, steps - f.onset_step);
  if (f.mechanism == sim::Mechanism::kKernelSlowdown) {
    TELLER_RETURN_IF_ERROR(ResolveFamily(templates, &f));
  } else {
    f.family.clear();
  }
  return f;
}

base::StatusOr<PerturbSummary> RunPerturb(const TraceTemplates& templates,
                                          const PerturbOptions& options,
                                          const std::string& directory) {
  if (templates.steps.empty()) {
    return base::InvalidArgument("{}: no step template to replay", templates.source);
  }
  if (options.steps < 1) {
    return base::InvalidArgument("--steps must be at least 1, got {}", options.steps);
  }
  if (options.ranks < 1) {
    return base::InvalidArgument("--ranks must be at least 1, got {}", options.ranks);
  }
  PerturbRun run(templates, options, directory);
  return run.Run();
}

}  // namespace teller::perturb
