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

std::string SupportedList() {
  std::string out;
  for (const sim::MechanismInfo& info : sim::AllMechanisms()) {
    if (PerturbSupports(info.mechanism)) out += (out.empty() ? "" : ", ") + std::string(info.name);
  }
  return out;
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

// The simulator's phrasings of a GPU throttle compare the GPU with its peers; a
// one-rank replay has none, so its references say what the trace itself shows.
void OneRankExplanations(wire::LabelsFault* fault) {
  if (fault->mechanism != sim::InfoOf(sim::Mechanism::kGpuThrottle).name) return;
  const int pct = static_cast<int>(fault->magnitude * 100 + 0.5);
  const std::string when =
      fault->affected_steps.empty()
          ? fmt::format("step {}", fault->onset_step)
          : fmt::format("steps {}-{}", fault->affected_steps.front(), fault->affected_steps.back());
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
    config.cluster.nodes = config.cluster.gpus_per_node = 1;
    config.cluster.tp = config.cluster.pp = 1;
    config.cluster.gpu_name = "";
    config.seed = options_.seed;
    config.run_id = options_.run_id;
    config.start_realtime_ns = options_.start_realtime_ns;
    return config;
  }
  base::Status Open();
  base::Status Step(int32_t step);
  base::Status Write(const ReplayedStep& r, const StepTemplate& t, int32_t step);
  base::Status Finish();

  const TraceTemplates& templates_;
  const PerturbOptions& options_;
  sim::LabelBuilder labels_;
  std::vector<sim::ResolvedFault> faults_;
  std::optional<StepFault> step_fault_;
  std::unique_ptr<wire::BundleWriter> bundle_;
  wire::ProcessWriter* process_ = nullptr;
  ReplayedStep faulty_, twin_;
  sim::StepChange change_;
  int64_t cursor_ = 0;
  PerturbSummary summary_;
};

base::Status PerturbRun::Open() {
  wire::BundleMeta meta;
  meta.tool_version = "0.1.0";
  meta.host = "real-trace";
  meta.command = {"teller", "synth", "perturb", "--seed", std::to_string(options_.seed)};
  meta.start_time_ns = options_.start_realtime_ns;
  meta.ranks.push_back({0, 0, "real-trace", kPid, 0});
  meta.devices.push_back({"real-trace", 0, "", "GPU-00000000-0000-0000-0000-000000000000"});
  meta.capture = {{"cupti_activity", true, ""}, {"nvtx", true, ""}};
  meta.notes = templates_.notes;
  // The fault is named in labels.json only, so that a run whose fault changed nothing
  // is the fault-free run byte for byte.
  meta.notes.push_back(fmt::format("perturb: {} steps replayed from {} template(s) of {} (seed {})",
                                   options_.steps, templates_.steps.size(), templates_.source,
                                   options_.seed));
  TELLER_ASSIGN_OR_RETURN(bundle_, wire::BundleWriter::Create(summary_.directory, std::move(meta)));
  wire::ProcessInfoRecord info;
  info.pid = kPid;
  info.rank = 0;
  info.local_rank = 0;
  info.world_size = 1;
  info.device = 0;
  info.host = "real-trace";
  info.name = "python3";
  info.command = "teller synth perturb";
  TELLER_ASSIGN_OR_RETURN(process_, bundle_->OpenProcess(info));
  for (const HostThread& h : templates_.threads) {
    TELLER_RETURN_IF_ERROR(process_->Append(wire::ThreadInfoRecord{h.tid, h.name}));
  }
  return base::OkStatus();
}

base::Status PerturbRun::Write(const ReplayedStep& r, const StepTemplate& t, int32_t step) {
  const sim::RankBuffer& b = r.buffer;
  const std::array<wire::Arg, 2> args = {wire::Arg::Int(wire::kStepArgStep, step),
                                         wire::Arg::String(wire::kStepArgPhase, t.phase)};
  for (size_t i = 0; i < b.ranges.size(); ++i) {
    wire::HostRangeRecord h = b.ranges[i];
    if (i == 0) h.args = args;
    TELLER_RETURN_IF_ERROR(process_->Append(h));
  }
  for (const wire::ApiCallRecord& a : b.api_calls) TELLER_RETURN_IF_ERROR(process_->Append(a));
  for (const wire::KernelRecord& k : b.kernels) TELLER_RETURN_IF_ERROR(process_->Append(k));
  for (const wire::MemcpyRecord& m : b.memcpys) TELLER_RETURN_IF_ERROR(process_->Append(m));
  for (const wire::MemsetRecord& m : r.memsets) TELLER_RETURN_IF_ERROR(process_->Append(m));
  for (const wire::SyncRecord& s : b.syncs) TELLER_RETURN_IF_ERROR(process_->Append(s));
  return base::OkStatus();
}

base::Status PerturbRun::Step(int32_t step) {
  const StepTemplate& t = templates_.steps[static_cast<size_t>(step) % templates_.steps.size()];
  const int64_t start = cursor_;
  const uint64_t correlation_base = kCorrelationStride * static_cast<uint64_t>(step + 1);
  bool active = false;
  sim::ActiveFault active_fault;
  if (!faults_.empty()) {
    const sim::FaultSpec& s = faults_[0].spec;
    active = step >= s.onset_step && step < s.onset_step + s.duration_steps;
    active_fault = {s.mechanism, s.magnitude, 0, 0, step_fault_->family, -1};
  }
  ReplayStep(templates_, t, options_.seed, step, start, correlation_base, nullptr, &twin_);
  const bool changed = active && step_fault_;
  if (changed) {
    ReplayStep(templates_, t, options_.seed, step, start, correlation_base, &*step_fault_,
               &faulty_);
  }
  const ReplayedStep& run = changed ? faulty_ : twin_;
  sim::ClusterSpec cluster = Config().cluster;
  std::vector<sim::RankBuffer> faulty_buffers{run.buffer}, twin_buffers{twin_.buffer};
  change_ = sim::DiffStep(
      faulty_buffers, twin_buffers, start,
      active ? std::vector<sim::ActiveFault>{active_fault} : std::vector<sim::ActiveFault>{},
      cluster);
  const bool anomaly = active && change_.any();
  if (anomaly) {
    sim::ResolvedFault& f = faults_[0];
    f.anomalous_steps.insert(step);
    if (f.first_effect_ns < 0) f.first_effect_ns = start - options_.start_realtime_ns;
    f.last_effect_ns = run.end_ns - options_.start_realtime_ns;
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
  outcome.events = run.events;
  outcome.duration_ns = run.end_ns - start;
  outcome.twin_ns = twin_.end_ns - start;
  outcome.change = &change_;
  labels_.AddStep(plan, {}, outcome);
  summary_.events += run.events;
  cursor_ = run.end_ns + kStepGapNs;
  return Write(run, t, step);
}

base::Status PerturbRun::Finish() {
  summary_.step_truth = labels_.StepTruths();
  std::string json = labels_.Finalize({}, options_.start_realtime_ns);
  TELLER_ASSIGN_OR_RETURN(wire::Labels labels, wire::ParseLabels(json, "labels.json"));
  labels.engine = summary_.engine;
  labels.model = {templates_.source, 0, 0};
  labels.cluster = {1, 1, 1, 1, ""};
  if (!labels.faults.empty()) {
    OneRankExplanations(&labels.faults[0]);
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
    TELLER_ASSIGN_OR_RETURN(sim::FaultSpec spec, ResolveFault(*options_.fault, templates_,
                                                              options_.steps, options_.seed));
    sim::ResolvedFault f;
    f.spec = spec;
    faults_.push_back(std::move(f));
    StepFault sf;
    sf.mechanism = spec.mechanism;
    sf.magnitude = spec.magnitude;
    if (!spec.family.empty())
      sf.family = ParseFamily(spec.family).value_or(sim::Family::kAttention);
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
                                            uint64_t seed) {
  const sim::MechanismInfo& info = sim::InfoOf(spec.mechanism);
  switch (spec.mechanism) {
    case sim::Mechanism::kStragglerRank:
    case sim::Mechanism::kLinkDegradation:
    case sim::Mechanism::kNcclTimeout:
      return base::InvalidArgument(
          "--fault {}: needs several ranks, and {} is replayed as one rank (supported: {})",
          info.name, templates.source, SupportedList());
    default:
      break;
  }
  if (!PerturbSupports(spec.mechanism)) {
    return base::InvalidArgument("--fault {}: not injected into real traces (supported: {})",
                                 info.name, SupportedList());
  }
  if (spec.rank > 0 || spec.node > 0) {
    return base::InvalidArgument("--fault {}: rank/node {} does not exist in a one-rank replay",
                                 info.name, std::max(spec.rank, spec.node));
  }
  if (steps < 1) return base::InvalidArgument("--steps must be at least 1, got {}", steps);
  sim::FaultSpec f = spec;
  f.rank = 0;
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
  PerturbRun run(templates, options, directory);
  return run.Run();
}

}  // namespace teller::perturb
