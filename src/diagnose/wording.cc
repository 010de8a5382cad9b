#include "diagnose/wording.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/text_format.h"
#include "cause/cause_text.h"
#include "tpe/step_serializer.h"

namespace teller::diagnose {
namespace {

std::string LogLineText(const model::Trace& trace, const LogEvidence& log) {
  std::string text =
      fmt::format("{}, {} line {}", log.Label(), trace.str(trace.logs.source[log.row]),
                  trace.logs.line_number[log.row]);
  if (trace.logs.rank[log.row] >= 0) text += fmt::format(", rank {}", trace.logs.rank[log.row]);
  if (log.repeats > 1) text += fmt::format(", {} lines", log.repeats);
  return text;
}

// What the logs say: the first cause's meaning and where it was printed, then what followed.
std::string LogsSentence(const model::Trace& trace, const std::vector<LogEvidence>& logs) {
  const LogEvidence& first = logs.front();
  std::string text;
  if (first.signature != nullptr) {
    text = fmt::format("From the logs: {} ({}).", first.signature->entry.meaning,
                       LogLineText(trace, first));
  } else {
    text = fmt::format(
        "From the logs: an error no known signature matches, placed in {} by the "
        "word \"{}\" ({}).",
        FaultCategoryName(first.category), first.keyword, LogLineText(trace, first));
  }
  std::vector<std::string> after;
  for (size_t i = 1; i < logs.size() && after.size() < 3; ++i) after.push_back(logs[i].Label());
  if (!after.empty()) {
    text += fmt::format(
        " {} other signature(s) in the log ({}{}) read as its consequences or "
        "context.",
        logs.size() - 1, fmt::join(after, ", "), logs.size() - 1 > after.size() ? ", ..." : "");
  }
  return text;
}

}  // namespace

std::string CauseOperatorsText(const RootCause& cause, bool victims, size_t shown) {
  // Names that differ only in template arguments read as one (the first, most steps).
  std::vector<std::pair<std::string, size_t>> names;  // "LAYER name", steps
  for (const CauseOperator& op : cause.operators) {
    if (op.victim != victims) continue;
    std::string name = fmt::format("{} {}", model::LayerName(op.layer), tpe::NormalizeName(op.name));
    const auto seen = std::find_if(names.begin(), names.end(),
                                   [&](const auto& entry) { return entry.first == name; });
    if (seen == names.end()) names.emplace_back(std::move(name), op.groups.size());
  }
  std::string out;
  for (size_t i = 0; i < names.size() && i < shown; ++i) {
    out += fmt::format("{}{} ({} step{})", i ? ", " : "", names[i].first, names[i].second,
                       names[i].second == 1 ? "" : "s");
  }
  if (names.size() > shown) out += fmt::format(", +{} more", names.size() - shown);
  return out;
}

std::string Capitalized(std::string text) {
  if (!text.empty()) text[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(text[0])));
  return text;
}

std::string FeatureValueText(localize::Feature feature, double value) {
  if (localize::IsCountFeature(feature)) return fmt::format("{:.0f}", value);
  if (feature == localize::Feature::kShare) return fmt::format("{:.1f}%", 100.0 * value);
  return base::FormatDuration(static_cast<int64_t>(value));
}

std::string Explanation(const model::Trace& trace, const Diagnosis& diagnosis) {
  std::string text;
  if (diagnosis.crash.found) {
    text = cause::CrashSentence(diagnosis.crash);
    if (diagnosis.hang.found()) text += " " + cause::HangSentence(diagnosis.hang);
    if (!diagnosis.logs.empty()) text += " " + LogsSentence(trace, diagnosis.logs);
  } else if (diagnosis.oom.found) {
    text = cause::OomSentence(diagnosis.oom);
    if (diagnosis.hang.found()) text += " " + cause::HangSentence(diagnosis.hang);
  } else if (diagnosis.hang.found()) {
    text = cause::HangSentence(diagnosis.hang);
    const std::string culprit = cause::CulpritSentence(diagnosis.hang);
    if (!culprit.empty()) text += " " + culprit;
    if (!diagnosis.logs.empty()) text += " " + LogsSentence(trace, diagnosis.logs);
  } else if (!diagnosis.causes.empty()) {
    text = Capitalized(cause::CauseSentence(diagnosis.causes.front().hypothesis));
    if (diagnosis.causes.size() > 1) {
      text += " A second cause explains part of the rest: " +
              cause::CauseSentence(diagnosis.causes[1].hypothesis);
    }
    if (!diagnosis.logs.empty()) {
      text += " A log line names " +
              std::string(FaultCategoryName(diagnosis.logs.front().category)) + " (" +
              LogLineText(trace, diagnosis.logs.front()) + ").";
    }
  } else if (diagnosis.degraded || diagnosis.failed) {
    text = LogsSentence(trace, diagnosis.logs) +
           (trace.events.size() == 0 ? " There is no trace to time the steps."
                                     : " No cause in the trace stands above its noise.");
  } else if (diagnosis.logs_only) {
    text =
        "The logs name no fault: no line matches a signature of a failure or a degradation, "
        "and no error line names a cause.";
  } else {
    text =
        "No cause stands above this run's noise: nothing moved over a window of steps in a "
        "way one slow GPU, kernel family, host, call, link, rank or pause would explain.";
    if (!diagnosis.alternatives.empty()) {
      const cause::Hypothesis& closest = diagnosis.alternatives.front();
      text +=
          diagnosis.alternative_probabilities.empty()
              ? fmt::format(" Closest: {} (score {:.1f} against a threshold of {:.0f})",
                            cause::CauseSentence(closest), closest.score, diagnosis.cause_threshold)
              : fmt::format(" Closest: {} (p {:.2f} against the decider's {:.2f})",
                            cause::CauseSentence(closest),
                            diagnosis.alternative_probabilities.front(),
                            diagnosis.decider_threshold);
    }
  }
  return text;
}

std::string NextActionOf(const Diagnosis& diagnosis) {
  if (diagnosis.crash.found) return std::string(NextActionOfCrash(diagnosis.crash));
  if (diagnosis.oom.found) return std::string(cause::NextActionOfOom(diagnosis.oom));
  if (diagnosis.hang.found()) return std::string(NextActionOfHang(diagnosis.hang));
  if (!diagnosis.causes.empty()) {
    return std::string(NextActionOfCause(diagnosis.causes.front().hypothesis));
  }
  if ((diagnosis.degraded || diagnosis.failed) && diagnosis.logs.front().signature != nullptr) {
    return diagnosis.logs.front().signature->entry.next_action;
  }
  return std::string(NextAction(diagnosis.category));
}

std::string VerdictWithoutCause(const Diagnosis& diagnosis) {
  if (diagnosis.logs_only) return "the logs name no fault";
  if (diagnosis.steps_scored > 0) return "no cause stands above this run's noise";
  const cause::InstancePeerCheck& peers = diagnosis.peer_check;
  if (HealthyByPeers(diagnosis)) {
    return "no kernel call stands out against the same kernel's other calls (no baseline of "
           "steps: the capture's repeated calls are its baseline)";
  }
  const std::string few = "too few comparable steps to tell normal from abnormal";
  if (peers.can_tell() && diagnosis.model.abnormal) {
    return fmt::format(
        "{}: no kernel call stands out against its peers, but the learned model flags the "
        "capture (p {:.2f})",
        few, diagnosis.model.abnormal_probability);
  }
  if (peers.ran()) return few + ", and too few repeated kernel calls to compare with each other";
  return few;
}

std::string FailureHeadline(const Diagnosis& diagnosis) {
  if (diagnosis.crash.found) {
    return fmt::format(
        "crash, rank {}'s {} returned {} ({}){}", diagnosis.crash.rank, diagnosis.crash.call,
        diagnosis.crash.error, diagnosis.crash.error_name,
        diagnosis.crash.has_suspect
            ? fmt::format("; suspect kernel {}{}", diagnosis.crash.suspect.name.substr(0, 60),
                          diagnosis.crash.suspect.in_graph ? " (a CUDA-graph node)" : "")
            : "");
  }
  if (diagnosis.oom.found) {
    // The rank first: in a fleet every node has a GPU 0.
    const cause::OomReport& oom = diagnosis.oom;
    std::string where;
    if (oom.rank >= 0) where = fmt::format(" on rank {}", oom.rank);
    if (oom.device >= 0) where += fmt::format("{} GPU {}", oom.rank >= 0 ? "," : " on", oom.device);
    return fmt::format(
        "out of memory{}{}", where,
        diagnosis.oom.requested_bytes >= 0.0
            ? fmt::format(" ({})", cause::OomKindName(diagnosis.oom.kind))
            : std::string());
  }
  const cause::HangReport& hang = diagnosis.hang;
  if (hang.evidence == cause::HangEvidence::kStalledStep && !hang.culprits.empty()) {
    return fmt::format("hang, {} never entered the {} {} rank(s) wait in",
                       hang.culprits.size() == 1
                           ? fmt::format("rank {}", hang.culprits[0])
                           : fmt::format("ranks {}", fmt::join(hang.culprits, ", ")),
                       cause::StalledCollective(hang), hang.victims.size());
  }
  if (hang.evidence == cause::HangEvidence::kStalledStep) {
    const cause::StalledStep& stalled = hang.stalled.front();
    return fmt::format(
        "hang, {}'s engine step has not ended after {:.1f} s{}",
        stalled.rank >= 0 ? fmt::format("rank {}", stalled.rank)
                          : fmt::format("process {}", stalled.pid),
        static_cast<double>(stalled.open_ns) / 1e9,
        hang.stalled.size() > 1 ? fmt::format(" ({} processes stalled)", hang.stalled.size()) : "");
  }
  if (hang.found()) {
    if (hang.culprits.empty()) {
      return fmt::format("hang, {} rank(s) wait in collectives that never complete",
                         hang.victims.size());
    }
    return fmt::format("hang, {} never entered a collective; {} rank(s) wait",
                       hang.culprits.size() == 1
                           ? fmt::format("rank {}", hang.culprits[0])
                           : fmt::format("ranks {}", fmt::join(hang.culprits, ", ")),
                       hang.victims.size());
  }
  for (const LogEvidence& log : diagnosis.logs) {
    if (log.first_cause && log.weight >= kFailingLogWeight) {
      return fmt::format("the log line {}{}{}{}", log.Label(),
                         log.rank >= 0 ? fmt::format(" of rank {}", log.rank) : "",
                         log.step >= 0 ? fmt::format(" in step {}", log.step) : "",
                         log.repeats > 1 ? fmt::format(" ({} times)", log.repeats) : "");
    }
  }
  return "a log line says the job crashed or a collective timed out";
}

std::string_view NextAction(FaultCategory category) {
  switch (category) {
    case FaultCategory::kNone:
      return "Nothing stands out against this run's own baseline; if users still see the "
             "problem, record a longer window that includes normal and slow periods.";
    case FaultCategory::kMemoryResource:
      return "Check GPU and host memory: KV-cache usage and preemptions in the engine metrics, "
             "allocator activity (torch.cuda.memory_stats, PYTORCH_CUDA_ALLOC_CONF), and host "
             "memory pressure (free -m, swap, NUMA) on the node.";
    case FaultCategory::kCudaKernel:
      return "Check the GPU that ran the slow kernels: nvidia-smi -q -d CLOCK,PERFORMANCE for "
             "throttle reasons, other processes sharing it, and recent kernel or library "
             "version changes; compare with the same kernels on its peers.";
    case FaultCategory::kRuntimeDriver:
      return "Check the CUDA runtime and driver path on that rank: driver version and Xid "
             "messages (dmesg), host CPU contention of the launching thread, and "
             "synchronizing calls in the step.";
    case FaultCategory::kCommunicationNetwork:
      return "Check the interconnect between the ranks: NCCL_DEBUG=INFO output, link and IB "
             "counters (ibstat, nvidia-smi nvlink -s), and whether one rank arrives late to "
             "the collective (its host-side work before the call).";
    case FaultCategory::kSchedulingSoftware:
      return "Check the engine's scheduler: step timing and queue lengths in its metrics, "
             "recent configuration changes, and the host work between steps (Python GC, "
             "tokenization, scheduling policy).";
  }
  return "";
}

std::string_view NextActionOfCrash(const cause::CrashReport& crash) {
  if (crash.category == FaultCategory::kRuntimeDriver) {
    return "On that rank's GPU: dmesg for Xid messages (13, 31, 43, 79) at the time of the error, "
           "nvidia-smi -q for ECC and retired pages; rerun the step with CUDA_LAUNCH_BLOCKING=1 "
           "to see whether a kernel or the driver fails.";
  }
  return "Run the kernels named above under compute-sanitizer (memcheck) with the step's inputs, "
         "or "
         "turn on CUDA core dumps (CUDA_ENABLE_COREDUMP_ON_EXCEPTION=1) to get the faulting PC "
         "without CUDA_LAUNCH_BLOCKING in production; run the engine eager (--enforce-eager) to "
         "rule out CUDA graphs, and check the kernel's inputs (block tables, slot mapping, "
         "indices) for out-of-range values.";
}

std::string_view NextActionOfHang(const cause::HangReport& hang) {
  if (hang.evidence == cause::HangEvidence::kStalledStep && hang.culprits.empty()) {
    return "On the stalled process, while it still hangs: its Python stack (py-spy dump --pid) "
           "and native stack (gdb -p, or cuda-gdb), nvidia-smi for its GPU's utilization; if it "
           "waits in a collective, the other ranks' stacks and the NCCL state "
           "(NCCL_DEBUG=INFO, TORCH_NCCL_DUMP_ON_TIMEOUT=1 for a Flight Recorder dump).";
  }
  if (hang.culprits.empty()) {
    return "Every rank waits: compare the collectives each rank issued last (Flight Recorder: "
           "TORCH_NCCL_TRACE_BUFFER_SIZE=2000, TORCH_NCCL_DUMP_ON_TIMEOUT=1) for a mismatch in op, "
           "size or order; if they match, the transport stalled: NCCL_DEBUG=INFO, IB and NVLink "
           "counters, nccl-tests across the same ranks.";
  }
  return "On the culprit rank: its stack now (py-spy dump --pid, or gdb for the C++ side), its "
         "last "
         "log lines (an error, an OOM or a crash before the hang), and whether its process is "
         "alive; then why it skipped or never reached the collective (a data-dependent branch, "
         "an exception swallowed in one rank). Flight Recorder dumps "
         "(TORCH_NCCL_DUMP_ON_TIMEOUT=1) "
         "show each rank's last collectives.";
}

std::string_view NextActionOfCause(const cause::Hypothesis& hypothesis) {
  using cause::CauseKind;
  switch (hypothesis.kind) {
    case CauseKind::kGpuSlow:
      return "On that rank's GPU: nvidia-smi -q -d CLOCK,PERFORMANCE,TEMPERATURE for throttle "
             "reasons (power, thermal, HW slowdown), other processes on it (nvidia-smi pmon), and "
             "Xid messages in dmesg; drain the node if it stays slow.";
    case CauseKind::kFamilySlow:
      return "For that kernel family: what changed in the deployment (engine, PyTorch, CUDA or "
             "kernel library version, attention backend, quantization), and whether the inputs "
             "changed shape (context length, batch size).";
    case CauseKind::kHostSlow:
      if (hypothesis.host_only_job) {
        return "On that rank's host, what slows its compute: other processes on its cores (top "
               "-H, pidstat -t), CPU clocks and throttling (turbostat, cpupower frequency-info), "
               "the threads each rank runs (OMP_NUM_THREADS, torch.get_num_threads) and their "
               "pinning, and whether its inputs grew.";
      }
      return "On that rank's host: memory pressure and swapping (free -m, vmstat 1, "
             "/proc/pressure/memory), CPU contention of the engine's threads (top -H), and NUMA "
             "placement.";
    case CauseKind::kLaunchLatency:
      return "On that rank's host: CPU contention of the launching thread (top -H, pidstat -t), "
             "driver lock contention (other processes on the GPU), and whether CUDA graphs are "
             "disabled or being recaptured.";
    case CauseKind::kLaunchRetry:
      return "The failing calls on that rank (their CUDA error in the trace, e.g. 701 launch out "
             "of resources): registers or shared memory a kernel asks for, the driver's and the "
             "GPU's health (Xid in dmesg, nvidia-smi -q), and other processes holding the GPU.";
    case CauseKind::kCopyLatency:
      return "Host-device copies on that rank: pinned memory exhausted or pageable buffers "
             "(cudaHostAlloc use), PCIe link width and speed (nvidia-smi -q -d PCIE), and NUMA "
             "placement of the buffers.";
    case CauseKind::kSyncLatency:
      return "Synchronizing calls on that rank: which call waits (torch.cuda.synchronize, "
             ".item(), .cpu() in the step), and what it waits for on the GPU.";
    case CauseKind::kAllocator:
      return "The caching allocator on that rank: torch.cuda.memory_stats (num_alloc_retries, "
             "fragmentation), PYTORCH_CUDA_ALLOC_CONF (expandable_segments), and memory headroom "
             "(gpu_memory_utilization, mem_fraction_static).";
    case CauseKind::kStraggler:
      if (hypothesis.by_stall) {
        return "What stops that rank inside its step while nothing runs: Python GC (gc.set_debug, "
               "gc.freeze), sleeps, blocking I/O or data loading, logging, GIL contention from "
               "other threads (py-spy dump --pid on that rank during a slow step).";
      }
      return "What delays that rank before its collectives: its host CPU (top -H), data loading "
             "or Python work before the call, and its GPU's clocks; NCCL_DEBUG=INFO shows who "
             "arrives last.";
    case CauseKind::kLinkDegraded:
      return "The interconnect: NCCL_DEBUG=INFO (transport, retries), IB and NVLink counters "
             "(ibstat, perfquery, nvidia-smi nvlink -e), and the link between the nodes; run "
             "nccl-tests all_reduce_perf across them.";
    case CauseKind::kEnginePause:
      return "What stops the engine loop between steps: Python GC (gc.set_debug, gc.freeze), "
             "GIL contention from other threads (py-spy dump), tokenization or detokenization "
             "on the loop, and scheduler work.";
    case CauseKind::kReorder:
      return "What changed in the code path: engine, PyTorch or compiler version (torch.compile "
             "or CUDA-graph recapture), and configuration flags that select kernels.";
    case CauseKind::kRequestMisrouted:
      return "The path that routes a new request's prompt: the engine's batch builder and its "
             "prefill/decode split (a request scheduled as decode before its prompt was "
             "prefilled), hybrid and state-space models' prefill path (Mamba layers), and "
             "recent scheduler or engine changes.";
    case CauseKind::kRequestPreempted:
      return "The KV cache's size against the load: gpu_memory_utilization (vLLM) or "
             "--mem-fraction-static (SGLang), other processes or tenants on the GPU taking "
             "memory (nvidia-smi), max_num_seqs and max_model_len, and the engine's "
             "preemption counters (vllm:num_preemptions_total).";
    case CauseKind::kRequestStarved:
      return "The scheduler's queue: its policy (--scheduling-policy, priorities, SGLang's "
             "--schedule-policy), whether the request fits the KV cache and the token budget "
             "(a long prompt waits for free blocks), per-request limits (LoRA adapters, "
             "max_num_seqs), and the engine's request logs for why it stayed waiting.";
  }
  return "";
}

bool ShowsCauseSupportOnly(const Diagnosis& diagnosis) {
  return diagnosis.degraded && !diagnosis.causes.empty();
}

std::string LargestElsewhereText(const Diagnosis& diagnosis) {
  if (!ShowsCauseSupportOnly(diagnosis)) return "";
  const auto other = std::find_if(diagnosis.findings.begin(), diagnosis.findings.end(),
                                  [](const Finding& f) { return !f.supports_cause; });
  if (other == diagnosis.findings.end()) return "";
  return fmt::format("the largest elsewhere: rank {}, step {}, {} {} z {:.1f}", other->rank,
                     other->step_number, localize::OperatorFamilyName(other->family),
                     localize::FeatureName(other->feature), other->peak_z);
}

}  // namespace teller::diagnose
