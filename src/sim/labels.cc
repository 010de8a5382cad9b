#include "sim/labels.h"

#include "sim/ceiling.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <tuple>

#include "base/robust.h"
#include "model/classify.h"
#include "model/layer.h"
#include "wire/labels_file.h"

namespace teller::sim {
void LabelBuilder::AddStep(const StepPlan& plan, const std::vector<Request>& requests,
                           const StepOutcome& outcome) {
  StepLabel s;
  s.step = plan.step;
  s.phase = std::string(PhaseName(plan.phase));
  s.is_anomaly = outcome.is_anomaly;
  s.fault = outcome.fault;
  s.benign = std::string(outcome.benign);
  s.events = outcome.events;
  s.duration_ns = outcome.duration_ns;
  s.twin_ns = outcome.twin_ns;
  s.requests_count = static_cast<int32_t>(plan.entries.size());
  s.warmup = plan.warmup;
  for (const StepEntry& e : plan.entries)
    s.requests.push_back(requests[static_cast<size_t>(e.request)].id);
  if (outcome.is_anomaly) {
    s.visible = outcome.change->visible;
    for (const InstanceChange& c : outcome.change->instances) {
      ++(c.culprit ? s.culprits : s.victims);
      if (!wire::IsScoredInstance(c.culprit ? "culprit" : "victim", ChangeKindName(c.kind)))
        continue;
      ++s.scored;
      s.scored_visible += c.visible;
    }
  }
  for (const RankStepChange& r : outcome.change->ranks) {
    s.ranks.push_back({r.rank, outcome.is_anomaly && r.changed, r.delta_ns, false});
    s.rank_twin_ns.push_back(r.twin_ns);
  }
  steps_.push_back(std::move(s));
  if (outcome.is_anomaly) AddChanges(plan.step, *outcome.change);
}

// The step's changed instances, grouped by (rank, layer, name, role, kind). Victims
// that only started later (everything behind a pause or a slow kernel) are counted in
// the fault's effect, not listed.
void LabelBuilder::AddChanges(int32_t step, const StepChange& change) {
  std::map<std::tuple<int32_t, model::Layer, std::string, bool, ChangeKind>, size_t> group;
  for (const InstanceChange& c : change.instances) {
    if (!c.culprit && c.kind == ChangeKind::kMoved) continue;
    auto key = std::make_tuple(c.rank, c.layer, c.name, c.culprit, c.kind);
    auto [it, inserted] = group.emplace(key, affected_.size());
    if (inserted) {
      wire::LabelsOperator op;
      op.step = step;
      op.rank = c.rank;
      op.layer = std::string(model::LayerName(c.layer));
      op.name = c.name;
      op.family = c.family;
      op.role = c.culprit ? "culprit" : "victim";
      op.kind = std::string(ChangeKindName(c.kind));
      affected_.push_back(std::move(op));
    }
    wire::LabelsOperator& op = affected_[it->second];
    op.ordinals.push_back(c.ordinal);
    op.delta_ns.push_back(c.delta_ns);
    op.ratio.push_back(std::round(c.ratio * 1000.0) / 1000.0);
  }
}

namespace {

wire::LabelsFault FaultLabel(const SimConfig& config, const ResolvedFault& f, size_t index,
                             const std::vector<Request>& requests, int64_t start_realtime_ns) {
  const MechanismInfo& info = InfoOf(f.spec.mechanism);
  wire::LabelsFault j;
  j.index = index;
  j.mechanism = std::string(info.name);
  j.category = std::string(CategoryName(info.category));
  j.magnitude = f.spec.magnitude;
  j.magnitude_unit = std::string(info.magnitude_unit);
  j.onset_step = f.spec.onset_step;
  j.duration_steps = f.spec.duration_steps;
  wire::LabelsTarget& target = j.target;
  if (f.spec.rank >= 0) target.rank = f.spec.rank;
  if (f.spec.node >= 0) target.node = f.spec.node;
  if (f.spec.rank >= 0) target.gpu = LocalRankOf(config.cluster, f.spec.rank);
  if (!f.spec.family.empty()) target.family = f.spec.family;
  if (!f.spec.request.empty()) target.request = f.spec.request;
  // An out-of-memory fault outside eager attention failed at no layer of the model.
  const bool layerless_oom =
      f.oom_site == AllocationSite::kLogits || f.oom_site == AllocationSite::kInputs;
  if (f.crash_layer >= 0 && !layerless_oom) target.layer_index = f.crash_layer;
  j.leaves_logs = info.leaves_logs;
  j.log_lines = f.log_lines;
  j.manifested = !f.anomalous_steps.empty() || !f.faulty_requests.empty();
  j.affected_steps.assign(f.anomalous_steps.begin(), f.anomalous_steps.end());
  for (int32_t r : f.faulty_requests) {
    j.affected_requests.push_back(requests[static_cast<size_t>(r)].id);
  }
  j.affected_families.assign(f.families.begin(), f.families.end());
  if (f.first_effect_ns >= 0) {
    j.window_realtime_ns =
        std::make_pair(start_realtime_ns + f.first_effect_ns, start_realtime_ns + f.last_effect_ns);
  }
  return j;
}

// Robust sigma (base::SigmaOfMad) of the relative change between consecutive twin steps that
// did the same kind of work (same phase and batch size): the run's step-to-step noise.
double RelativeStepNoise(const std::vector<int64_t>& twin_ns, const std::vector<std::string>& phase,
                         const std::vector<int32_t>& batch, const std::vector<uint8_t>& warmup) {
  std::vector<double> changes;
  for (size_t k = 1; k < twin_ns.size(); ++k) {
    if (warmup[k] || warmup[k - 1] || phase[k] != phase[k - 1] || batch[k] != batch[k - 1] ||
        twin_ns[k - 1] <= 0) {
      continue;
    }
    changes.push_back(static_cast<double>(twin_ns[k]) / static_cast<double>(twin_ns[k - 1]) - 1);
  }
  if (changes.size() < 3) return 0;
  const double median = MedianOf(changes);
  for (double& c : changes) c = std::abs(c - median);
  return base::SigmaOfMad(MedianOf(changes));
}

}  // namespace

std::vector<wire::LabelsRequest> LabelBuilder::RequestLabels(const std::vector<Request>& requests,
                                                             int64_t start_realtime_ns) const {
  std::vector<wire::LabelsRequest> out;
  for (const Request& r : requests) {
    wire::LabelsRequest j;
    j.id = r.id;
    int32_t fault = -1;
    if (faults_ != nullptr) {
      for (size_t i = 0; i < faults_->size(); ++i) {
        if ((*faults_)[i].faulty_requests.count(r.index)) fault = static_cast<int32_t>(i);
      }
    }
    j.is_fault = fault >= 0;
    if (fault >= 0) {
      j.fault_type = std::string(
          CategoryName(InfoOf((*faults_)[static_cast<size_t>(fault)].spec.mechanism).category));
      j.fault = fault;
    }
    for (const StepLabel& s : steps_) {
      if (std::find(s.requests.begin(), s.requests.end(), r.id) != s.requests.end()) {
        j.steps.push_back(s.step);
      }
    }
    j.prompt_tokens = r.prompt_tokens;
    j.output_tokens = r.output_tokens;
    j.generated_tokens = r.generated;
    j.preemptions = r.preemptions;
    j.state = r.state == RequestState::kFinished  ? "finished"
              : r.state == RequestState::kAborted ? "aborted"
                                                  : "unfinished";
    j.arrival_realtime_ns = start_realtime_ns + r.arrival_ns;
    if (r.finish_ns >= 0) j.finish_realtime_ns = start_realtime_ns + r.finish_ns;
    j.dp_rank = r.dp_rank;
    if (static_cast<size_t>(r.index) < request_deltas_.size()) {
      const RequestDelta& d = request_deltas_[static_cast<size_t>(r.index)];
      j.latency_delta_ns = d.latency_ns;
      j.queue_delta_ns = d.first_token_ns;
    }
    out.push_back(std::move(j));
  }
  return out;
}

std::string LabelBuilder::Finalize(const std::vector<Request>& requests,
                                   int64_t start_realtime_ns) const {
  wire::Labels labels;
  labels.run_id = config_.run_id;
  labels.engine = std::string(EngineName(config_.engine));
  labels.seed = config_.seed;
  labels.model = {config_.model.name, config_.model.layers, config_.model.mamba_period};
  labels.cluster = {config_.cluster.nodes, config_.cluster.gpus_per_node, config_.cluster.tp,
                    config_.cluster.pp, config_.cluster.gpu_name};
  if (faults_ != nullptr) {
    for (size_t i = 0; i < faults_->size(); ++i) {
      labels.faults.push_back(FaultLabel(config_, (*faults_)[i], i, requests, start_realtime_ns));
    }
  }
  labels.requests = RequestLabels(requests, start_realtime_ns);
  labels.steps = StepLabels(&labels.twin);
  labels.affected_operators = affected_;
  for (wire::LabelsFault& f : labels.faults) {
    f.effect = EffectOf(static_cast<int32_t>(f.index), labels);
    // What the references say it cost is what the twin measured.
    f.explanations = ExplainFault(config_, (*faults_)[f.index], requests, f.effect);
  }
  return wire::WriteLabelsJson(labels);
}

// Steps with their twin deltas; a duration moved when it changed by more than
// max(5%, 2 sigma of the run's step-to-step noise).
double LabelBuilder::StepNoise() const {
  std::vector<int64_t> twin_ns;
  std::vector<std::string> phase;
  std::vector<int32_t> batch;
  std::vector<uint8_t> warmup;
  for (const StepLabel& s : steps_) {
    twin_ns.push_back(s.twin_ns);
    phase.push_back(s.phase);
    batch.push_back(s.requests_count);
    warmup.push_back(s.warmup);
  }
  return std::round(RelativeStepNoise(twin_ns, phase, batch, warmup) * 1e5) / 1e5;
}

namespace {

// Whether delta moved a duration of base past max(5%, 2 noise).
bool DurationMoved(int64_t delta, int64_t base, double noise) {
  const double threshold = std::max(0.05, 2 * noise);
  return base > 0 && std::abs(static_cast<double>(delta)) > threshold * static_cast<double>(base);
}

}  // namespace

std::vector<StepTruth> LabelBuilder::StepTruths() const {
  const double noise = StepNoise();
  std::vector<StepTruth> out;
  for (const StepLabel& s : steps_) {
    StepTruth t;
    t.abnormal = s.is_anomaly;
    t.duration_moved = DurationMoved(s.duration_ns - s.twin_ns, s.twin_ns, noise);
    t.visible = s.visible || (s.is_anomaly && t.duration_moved);
    t.scored = s.scored;
    t.scored_visible = s.scored_visible;
    t.culprits = s.culprits;
    t.victims = s.victims;
    if (s.twin_ns > 0) {
      t.relative_delta =
          static_cast<double>(s.duration_ns - s.twin_ns) / static_cast<double>(s.twin_ns);
    }
    out.push_back(t);
  }
  return out;
}

std::vector<wire::LabelsStep> LabelBuilder::StepLabels(wire::LabelsTwin* twin) const {
  twin->step_noise = StepNoise();
  auto moved = [&](int64_t delta, int64_t base) {
    return DurationMoved(delta, base, twin->step_noise);
  };
  std::vector<wire::LabelsStep> out;
  for (const StepLabel& s : steps_) {
    wire::LabelsStep j;
    j.step = s.step;
    j.phase = s.phase;
    j.is_anomaly = s.is_anomaly;
    if (s.fault >= 0) j.fault = s.fault;
    if (!s.benign.empty()) j.benign = s.benign;
    j.requests = s.requests;
    j.events = s.events;
    j.delta_ns = s.duration_ns - s.twin_ns;
    j.duration_moved = moved(j.delta_ns, s.twin_ns);
    j.ranks = s.ranks;
    for (size_t r = 0; r < j.ranks.size(); ++r) {
      j.ranks[r].duration_moved = moved(j.ranks[r].delta_ns, s.rank_twin_ns[r]);
    }
    ++twin->paired_steps;
    out.push_back(std::move(j));
  }
  return out;
}

// What fault `index` changed, from the finished labels.
wire::LabelsEffect LabelBuilder::EffectOf(int32_t index, const wire::Labels& labels) const {
  wire::LabelsEffect effect;
  std::vector<double> deltas;
  std::set<int64_t> steps;
  for (const wire::LabelsStep& s : labels.steps) {
    if (s.fault != index || !s.is_anomaly) continue;
    steps.insert(s.step);
    ++effect.abnormal_steps;
    effect.moved_steps += s.duration_moved;
  }
  for (const StepLabel& s : steps_) {
    if (steps.count(s.step) && s.twin_ns > 0) {
      deltas.push_back(static_cast<double>(s.duration_ns - s.twin_ns) /
                       static_cast<double>(s.twin_ns));
    }
  }
  effect.median_step_delta = std::round(MedianOf(deltas) * 1e4) / 1e4;
  for (const StepLabel& s : steps_) {
    if (!steps.count(s.step)) continue;
    effect.culprit_instances += s.culprits;
    effect.victim_instances += s.victims;
  }
  return effect;
}

namespace {

// What every phrasing of one fault names.
struct FaultWords {
  const FaultSpec& s;
  const ResolvedFault& f;
  int pct;        // magnitude in percent
  int32_t first;  // first affected step
  std::string where;
  std::string when;
  std::string request;
};

// Where an out-of-memory fault's allocation failed, for its phrasings.
std::string OomSiteWords(const ResolvedFault& f) {
  switch (f.oom_site) {
    case AllocationSite::kLogits:
      return "(the logits after the step's CUDA-graph replay, which allocates nothing of its own)";
    case AllocationSite::kInputs:
      return "(the step's input tensors, before its CUDA-graph replay)";
    default:
      return fmt::format("(the attention workspace of layer {})", f.crash_layer);
  }
}

// Where an illegal access faulted and where its error came back, for its phrasings.
std::string IllegalAccessWords(const ResolvedFault& f) {
  const std::string call = f.crash_call.empty() ? "the next CUDA call" : f.crash_call;
  if (!f.crash_in_graph) {
    return fmt::format("the attention kernel of layer {} faulted; the error came back at {}",
                       f.crash_layer, call);
  }
  return fmt::format(
      "the attention kernel of layer {}, a node of the step's CUDA-graph replay "
      "(cudaGraphLaunch), faulted; the error came back at {}{}",
      f.crash_layer, call,
      f.crash_call == "cudaEventQuery" ? " on ProcessGroupNCCL's watchdog thread" : "");
}

// Phrasings of the memory and resource faults.
std::vector<std::string> ExplainMemoryFault(const FaultWords& w) {
  const auto& [s, f, pct, first, where, when, request] = w;
  switch (s.mechanism) {
    case Mechanism::kKvCachePressure:
      return {
          fmt::format("Memory pressure on the KV cache: from {} about {}% of the KV blocks were "
                      "unavailable, so the scheduler preempted running requests and recomputed "
                      "their prompts; the preempted requests show repeated prefill chunks. "
                      "Check what else holds GPU memory and raise gpu_memory_utilization or "
                      "lower max_num_seqs.",
                      when, pct),
          fmt::format("The KV cache ran out of blocks during {}: requests were evicted and "
                      "re-prefilled (recompute preemption), which lengthened their latency. "
                      "Free GPU memory or reduce concurrency.",
                      when),
          fmt::format("Root cause: KV-cache capacity shrank by ~{}% ({}); evidence: preempted "
                      "requests re-enter prefill steps and KV usage sits near 100%. Action: "
                      "find the co-located memory consumer, give the engine more KV memory.",
                      pct, when)};
    case Mechanism::kHostMemoryPressure:
      return {
          fmt::format("Host memory pressure on node{} slowed CPU-side work by about {}% during "
                      "{}: Python ranges, launches and host-to-device copies of its ranks took "
                      "longer while GPU kernels were unchanged. Check swap and page-cache "
                      "pressure on that node.",
                      s.node, pct, when),
          fmt::format("On node{} the host was starved of memory ({}): every CPU-side operator of "
                      "its ranks stretched by ~{}% and HtoD copies slowed, kernels did not. "
                      "Look at free -m / vmstat and other processes on the node.",
                      s.node, when, pct),
          fmt::format("Memory/resource fault: node{} host memory pressure, {}; the host timeline "
                      "(FE/BE ranges, cudaMemcpyAsync) is slower, the device timeline is not. "
                      "Reduce host memory use or move the job.",
                      s.node, when)};
    case Mechanism::kAllocatorSlowPath:
      return {
          fmt::format("The CUDA caching allocator missed on {} during {}: cudaMalloc and cudaFree "
                      "calls appear inside the steps and add about {}% to the step time. Set "
                      "PYTORCH_CUDA_ALLOC_CONF (expandable_segments) or pre-allocate.",
                      where, when, pct),
          fmt::format("{}: allocator slow path on {}; synchronous cudaMalloc calls inside aten "
                      "ops stall the host. Check for new tensor shapes each step and allocator "
                      "settings.",
                      when, where),
          fmt::format("Memory/resource fault on {} ({}): device allocations in the hot path "
                      "(cudaMalloc/cudaFree under aten::empty). Warm the allocator or fix the "
                      "varying shapes.",
                      where, when)};
    case Mechanism::kMemoryFragmentation:
      return {fmt::format("GPU memory fragmentation on {} during {}: the allocator released cached "
                          "blocks (cudaDeviceSynchronize + cudaFree) and re-allocated them, adding "
                          "about {}% to the steps. Use expandable segments or restart the worker.",
                          where, when, pct),
              fmt::format("{}: fragmented GPU memory on {}; device-wide synchronizations and frees "
                          "inside the step stall both host and GPU. Reduce fragmentation "
                          "(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True).",
                          when, where),
              fmt::format("Memory/resource fault ({}): {} had to defragment its caching allocator "
                          "mid-step; evidence is cudaDeviceSynchronize and cudaFree in the step "
                          "tree. Action: allocator settings, fewer shape changes.",
                          when, where)};
    case Mechanism::kOutOfMemory:
      return {
          fmt::format("An allocation of {:.2f} GiB failed on {} in step {} {}: the GPU "
                      "was full, the caching allocator freed its cache and retried in vain, "
                      "OutOfMemoryError killed the engine and every unfinished request was "
                      "aborted. Lower the engine's memory demand (gpu-memory-utilization, "
                      "max-num-seqs, max-model-len).",
                      s.magnitude, where, first, OomSiteWords(f)),
          fmt::format("Step {} died on {}: 'CUDA out of memory. Tried to allocate {:.2f} GiB'; "
                      "cudaMalloc returned error 2 twice around a cache flush (device sync and "
                      "cudaFree). The card was full of PyTorch's own memory.",
                      first, where, s.magnitude),
          fmt::format("Memory/resource fault, fatal: out of memory on {} at step {}. Evidence: "
                      "failed cudaMalloc calls, the OutOfMemoryError in the log. Action: reduce "
                      "the batch or KV-cache budget, or shard the model over more GPUs.",
                      where, first)};
    default:
      return {};
  }
}

// Phrasings of the CUDA/kernel faults.
std::vector<std::string> ExplainKernelFault(const FaultWords& w) {
  const auto& [s, f, pct, first, where, when, request] = w;
  switch (s.mechanism) {
    case Mechanism::kGpuThrottle:
      return {
          fmt::format("GPU throttling on {}: from {} its kernels ran about {}% slower than the "
                      "same kernels on its peers, and the peers waited for it inside the NCCL "
                      "all-reduce. Check nvidia-smi clocks and throttle reasons (power, "
                      "thermal) for that GPU.",
                      where, when, pct),
          fmt::format("{} was throttled ({}): every kernel family on it stretched by ~{}% while "
                      "the other ranks' compute stayed normal; their collective kernels grew "
                      "instead. Inspect cooling and power capping of that GPU.",
                      where, when, pct),
          fmt::format("CUDA/kernel fault: a slow GPU, {} ({}). Evidence: per-rank kernel "
                      "durations diverge for identical kernels; log shows nothing. Action: "
                      "nvidia-smi -q -d PERFORMANCE, reseat or drain the GPU.",
                      where, when)};
    case Mechanism::kKernelSlowdown:
      return {fmt::format("The {} kernels slowed down by about {}% on {} during {}, while other "
                          "kernel families kept their usual durations. Check for a changed kernel "
                          "build or backend selection for that family.",
                          s.family, pct, where, when),
              fmt::format("{}: only the {} family is slower (~{}%) on {}; GEMMs and norms are "
                          "unchanged. Compare the kernel versions/configs of that operator.",
                          when, s.family, pct, where),
              fmt::format("CUDA/kernel fault in the {} operator family ({}, {}): a kernel-level "
                          "regression. Roll back the attention/kernel backend or pin the previous "
                          "kernel.",
                          s.family, where, when)};
    case Mechanism::kKernelContention:
      return {
          fmt::format("A co-located workload contended for the SMs of {} during {}: its kernels "
                      "were slowed in bursts (about {}% on average, very uneven). Check for other "
                      "processes on that GPU (nvidia-smi pmon) and isolate it.",
                      where, when, pct),
          fmt::format("{}: bursty kernel slowdowns on {} only, unlike steady throttling: "
                      "another process shares the GPU. Enable MPS limits or move the other job.",
                      when, where),
          fmt::format("CUDA/kernel fault: GPU contention on {} ({}). Durations of identical "
                      "kernels scatter widely on that rank. Action: find and evict the "
                      "co-tenant.",
                      where, when)};
    case Mechanism::kIllegalMemoryAccess:
      return {fmt::format("A kernel on {} hit an illegal memory access in step {} (layer {}); the "
                          "error surfaced at {}, the engine died and every "
                          "unfinished request was aborted. Rerun with CUDA_LAUNCH_BLOCKING=1 and "
                          "compute-sanitizer to find the faulting kernel.",
                          where, first, f.crash_layer,
                          f.crash_call.empty() ? "the next CUDA call" : f.crash_call),
              fmt::format("Step {} crashed on {}: {} ('CUDA error: an illegal memory access was "
                          "encountered'); peers hung in their next collective until the workers "
                          "were killed. Check the kernel's inputs (block tables, slot mapping) for "
                          "out-of-range indices.",
                          first, where, IllegalAccessWords(f)),
              fmt::format(
                  "CUDA/kernel fault, fatal: illegal address on {} at step {}. Evidence: the "
                  "kernel ends microseconds after it starts, {} returns error "
                  "700, {} follows. Action: sanitizer run, then fix the kernel or "
                  "its indices.",
                  where, first,
                  f.crash_in_graph ? "the graph's later kernels never run, the next call"
                                   : "the next launch",
                  f.crash_call == "cudaEventQuery" ? "the NCCL watchdog's abort" : "a traceback")};
    default:
      return {};
  }
}

// Phrasings of the runtime/driver faults.
std::vector<std::string> ExplainRuntimeFault(const FaultWords& w) {
  const auto& [s, f, pct, first, where, when, request] = w;
  switch (s.mechanism) {
    case Mechanism::kLaunchLatency:
      return {
          fmt::format("Kernel launches on {} took about {}% longer during {}: the runtime/driver "
                      "launch calls stretched while kernel durations stayed normal. Look for "
                      "driver lock contention or CPU frequency drops.",
                      where, pct, when),
          fmt::format("{}: slow cudaLaunchKernel/cuLaunchKernelEx on {} (~{}%); the GPU waits "
                      "in gaps between kernels. Check the driver version and CPU contention.",
                      when, where, pct),
          fmt::format("Runtime/driver fault ({}, {}): launch-call latency; evidence is longer "
                      "RT/DRV nodes and wider GPU idle gaps. Use CUDA graphs or fix the host.",
                      where, when)};
    case Mechanism::kMemcpyLatency:
      return {fmt::format("cudaMemcpyAsync on {} was slow during {} (about {}% longer calls and "
                          "copies): input and output transfers waited on them. Check pinned "
                          "memory availability and PCIe health.",
                          where, when, pct),
              fmt::format("{}: host-device copies on {} lag (~{}%), kernels do not. Verify pinned "
                          "buffers are used and the PCIe link runs at full width.",
                          when, where, pct),
              fmt::format("Runtime/driver fault in the copy path ({}, {}): MEM nodes and their "
                          "cudaMemcpyAsync calls are longer. Action: pin host memory, check PCIe.",
                          where, when)};
    case Mechanism::kSyncLatency:
      return {fmt::format("Synchronization on {} waited longer than its work during {}: "
                          "cudaStreamSynchronize returned well after the last kernel finished "
                          "(~{}% extra). Check for driver-level waits or interrupt handling.",
                          where, when, pct),
              fmt::format("{}: stream synchronizations on {} are inflated; the GPU was idle while "
                          "the host still waited. Investigate the driver and host scheduling.",
                          when, where),
              fmt::format("Runtime/driver fault ({}, {}): SYNC nodes longer than the kernels they "
                          "wait for. Action: update the driver, check CPU isolation.",
                          where, when)};
    case Mechanism::kDriverRetry:
      return {fmt::format("Driver launch calls on {} failed and were retried during {} "
                          "(cuLaunchKernelEx returned CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, p~{}%); "
                          "the retries add host time. Check resource limits and driver logs "
                          "(dmesg/Xid).",
                          where, when, pct),
              fmt::format("{}: repeated failing cuLaunchKernelEx calls on {} precede successful "
                          "ones; nothing is logged. Inspect driver health.",
                          when, where),
              fmt::format("Runtime/driver fault ({}, {}): DRV calls with non-zero results and "
                          "retries. Action: driver update, Xid errors, GPU reset.",
                          where, when)};
    default:
      return {};
  }
}

// Phrasings of the communication faults.
std::vector<std::string> ExplainCommunicationFault(const FaultWords& w) {
  const auto& [s, f, pct, first, where, when, request] = w;
  switch (s.mechanism) {
    case Mechanism::kLinkDegradation:
      return {fmt::format("The inter-node link degraded during {}: cross-node transfers (pipeline "
                          "send/recv and collectives spanning nodes) took about {}% longer with "
                          "loss spikes, while intra-node collectives were normal. Check the NIC "
                          "counters and cabling between the nodes.",
                          when, pct),
              fmt::format("{}: slow network between node0 and node1 (~{}%); NCCL SendRecv kernels "
                          "on both sides stretch together. Run ib_write_bw / check RoCE PFC.",
                          when, pct),
              fmt::format("Communication fault ({}): link latency/loss between nodes. Evidence: "
                          "matching send/recv pairs are slower on both ends, compute is not. "
                          "Action: network diagnostics on the ConnectX link.",
                          when)};
    case Mechanism::kStragglerRank:
      return {
          fmt::format("{} was a straggler during {}: its host reached every collective late "
                      "(~{}% slower CPU side), so all its peers waited inside the NCCL kernels. "
                      "Look at that rank's process (CPU affinity, noisy neighbours).",
                      where, when, pct),
          fmt::format("{}: the collectives of its group are long on every rank except {}, "
                      "which arrives last. Fix the slow host of that rank.",
                      when, where),
          fmt::format("Communication fault: straggler {} ({}). Evidence: peers' all-reduce "
                      "kernels start early and end together with the straggler's. Action: "
                      "pin CPUs, check that node's load.",
                      where, when)};
    case Mechanism::kNcclTimeout:
      return {
          fmt::format("A collective never completed: {} stopped before the NCCL collective of "
                      "layer {} in step {}, its peers waited until the watchdog timeout (600 "
                      "s) and the job was torn down. Check that rank's last host activity and "
                      "the network; set NCCL_DEBUG=INFO.",
                      where, f.crash_layer, first),
          fmt::format("Step {}: NCCL timeout. The peers' collective kernels run for 10 minutes "
                      "while {} never launched its part; the ProcessGroupNCCL watchdog "
                      "reports the SeqNum. Find why that rank hung.",
                      first, where),
          fmt::format("Communication fault, fatal: hung collective on {} (step {}); evidence is "
                      "the watchdog messages and the missing collective of one rank. Action: "
                      "py-spy the hung rank, check NCCL/network.",
                      where, first)};
    default:
      return {};
  }
}

// Phrasings of the scheduling/software faults.
std::vector<std::string> ExplainSchedulingFault(const FaultWords& w) {
  const auto& [s, f, pct, first, where, when, request] = w;
  switch (s.mechanism) {
    case Mechanism::kOperatorReorder:
      return {fmt::format("A software change reordered operators in {} of the layers during {}: "
                          "rotary embedding ran before the q/k normalization. Timing barely "
                          "changes; the call-chain order differs from the normal steps. Review "
                          "the recent model/engine change.",
                          pct > 0 ? fmt::format("~{}%", pct) : std::string("some"), when),
              fmt::format("{}: the operator order inside decoder layers deviates (rotary before "
                          "q_norm/k_norm); outputs may be wrong. Roll back the model code.",
                          when),
              fmt::format("Scheduling/software fault ({}): perturbed operator order, visible only "
                          "in the structure of the call chains. Action: diff the model definition.",
                          when)};
    case Mechanism::kStarvedRequest:
      return {fmt::format("Request {} was starved: it waited in the queue during {} while later "
                          "requests were scheduled. Check the scheduler policy and priorities.",
                          request, when),
              fmt::format("{}: the scheduler kept skipping {} (waiting count stays >0 with a free "
                          "budget). Fix the scheduling bug or priority inversion.",
                          when, request),
              fmt::format("Scheduling/software fault: starvation of {} ({}); evidence is its queue "
                          "time versus steps that had budget left. Action: scheduler fix.",
                          request, when)};
    case Mechanism::kDecodeMisroute:
      return {fmt::format("New request {} was given one scheduled token in step {} and routed to "
                          "the decode path: the decode kernel ran for it where the prefill kernel "
                          "should, so it reads stale state. Fix the attention backend's "
                          "prefill/decode classification for newly scheduled requests.",
                          request, first),
              fmt::format("Step {}: {} is new, yet its one-token schedule sent it down the decode "
                          "path (decode kernel instead of prefill kernel) while a normal prefill "
                          "request in the batch ran the prefill kernel. Scheduler/backend bug.",
                          first, request),
              fmt::format("Scheduling/software fault: decode misroute of {} (step {}). Evidence "
                          "combines engine metadata (new request), backend routing (decode) and "
                          "the device kernel. Action: patch the batch classification.",
                          request, first)};
    case Mechanism::kEnginePause:
      return {
          fmt::format("The engine loop stalled before each step during {} (GC or GIL pauses "
                      "of about {}% of a step): the GPU sat idle while the scheduler range "
                      "stretched. Tune Python GC (gc.freeze) or find the thread holding the GIL.",
                      when, pct),
          fmt::format("{}: long pauses in the scheduler on rank 0 delay every step; kernels are "
                      "normal. Check garbage collection and background Python threads.",
                      when),
          fmt::format("Scheduling/software fault ({}): engine-loop pauses. Evidence: long "
                      "schedule ranges and idle GPU gaps between steps. Action: gc tuning.",
                      when)};
    default:
      return {};
  }
}

}  // namespace

namespace {

// The step time the fault cost, measured against the run's fault-free twin; nothing for
// a crash or a hang, whose last step never finished.
std::string MeasuredCost(Mechanism mechanism, const wire::LabelsEffect& effect) {
  if (mechanism == Mechanism::kIllegalMemoryAccess || mechanism == Mechanism::kNcclTimeout ||
      effect.abnormal_steps == 0) {
    return "";
  }
  if (effect.moved_steps == 0) {
    return " Against the run's fault-free twin the steps' time did not move: the slower work "
           "was off their critical path.";
  }
  return fmt::format(
      " Against the run's fault-free twin, {} of its {} steps took measurably longer (median "
      "step {:+.0f}%).",
      effect.moved_steps, effect.abnormal_steps, 100.0 * effect.median_step_delta);
}

}  // namespace

std::vector<std::string> ExplainFault(const SimConfig& config, const ResolvedFault& f,
                                      const std::vector<Request>& requests,
                                      const wire::LabelsEffect& effect) {
  std::vector<std::string> phrasings = PhraseFault(config, f, requests);
  const std::string cost = MeasuredCost(f.spec.mechanism, effect);
  for (std::string& phrasing : phrasings) phrasing += cost;
  return phrasings;
}

std::vector<std::string> PhraseFault(const SimConfig& config, const ResolvedFault& f,
                                     const std::vector<Request>& requests) {
  const FaultSpec& s = f.spec;
  const ClusterSpec& cl = config.cluster;
  const int pct = static_cast<int>(s.magnitude * 100 + 0.5);
  const int32_t first = f.anomalous_steps.empty() ? s.onset_step : *f.anomalous_steps.begin();
  const int32_t last =
      f.anomalous_steps.empty() ? s.onset_step + s.duration_steps - 1 : *f.anomalous_steps.rbegin();
  const std::string where =
      s.rank >= 0 ? fmt::format("rank {} (GPU {} on node{})", s.rank, LocalRankOf(cl, s.rank),
                                NodeOfRank(cl, s.rank))
                  : (s.node >= 0 ? fmt::format("node{}", s.node) : std::string("every rank"));
  const std::string when =
      first == last ? fmt::format("step {}", first) : fmt::format("steps {}-{}", first, last);
  const std::string request =
      f.starved_request >= 0 ? requests[static_cast<size_t>(f.starved_request)].id : s.request;
  const FaultWords words{s, f, pct, first, where, when, request};
  switch (InfoOf(s.mechanism).category) {
    case FaultCategory::kMemory:
      return ExplainMemoryFault(words);
    case FaultCategory::kCudaKernel:
      return ExplainKernelFault(words);
    case FaultCategory::kRuntimeDriver:
      return ExplainRuntimeFault(words);
    case FaultCategory::kCommunication:
      return ExplainCommunicationFault(words);
    case FaultCategory::kScheduling:
      return ExplainSchedulingFault(words);
  }
  return {};
}

}  // namespace teller::sim
