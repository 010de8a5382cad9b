#include "cause/cause_text.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/text_format.h"

namespace teller::cause {
namespace {

std::string PendingSentence(const PendingLaunches& pending) {
  if (pending.count == 0) return "";
  return fmt::format(
      "; {} kernel launch{} of that process never completed (no kernel record; the last, {}, "
      "{:.1f} s "
      "before the trace ends)",
      pending.count, pending.count == 1 ? "" : "es", pending.last_call,
      static_cast<double>(pending.before_end_ns) / 1e9);
}

std::string RankList(const std::vector<int32_t>& ranks) {
  if (ranks.empty()) return "no rank";
  if (ranks.size() == 1) return fmt::format("rank {}", ranks[0]);
  std::string text = "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) {
    text += fmt::format("{}{}", i == 0 ? "" : (i + 1 == ranks.size() ? " and " : ", "), ranks[i]);
  }
  return text;
}

std::string Bytes(double bytes) {
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0, kMiB = 1024.0 * 1024.0;
  if (bytes >= kGiB) return fmt::format("{:.2f} GiB", bytes / kGiB);
  return fmt::format("{:.1f} MiB", bytes / kMiB);
}

// The node as its engineer knows it: its host name, else its index.
std::string NodeText(const Hypothesis& h) {
  return h.node_name.empty() ? fmt::format("node {}", h.node) : h.node_name;
}

// A starved request: its wait, the run's typical one, who went first or the room it was
// not given, the steps it missed.
std::string RequestCauseSentence(const Hypothesis& h) {
  std::vector<std::string> why;
  if (h.requests_served_first > 0) {
    why.push_back(fmt::format("{} request{} that arrived after it {} served first",
                              h.requests_served_first, h.requests_served_first == 1 ? "" : "s",
                              h.requests_served_first == 1 ? "was" : "were"));
  }
  if (h.steps_passed_over > 0) {
    why.push_back(fmt::format("{} step{} with room in {} batch ran while it was first in line",
                              h.steps_passed_over, h.steps_passed_over == 1 ? "" : "s",
                              h.steps_passed_over == 1 ? "its" : "their"));
  }
  if (h.request_never_scheduled) {
    return fmt::format(
        "request {} was still waiting to be scheduled when the capture ended, {} after it "
        "arrived (the run's requests typically waited {}), while {}, through {}.",
        h.request, base::FormatDurationRounded(h.effect),
        base::FormatDurationRounded(h.typical_wait_ns), fmt::join(why, " and "), CauseSteps(h));
  }
  if (h.wait_from_queue_counts) {
    return fmt::format(
        "request {} waited at least {} to be scheduled (the engine's queue counts show it "
        "left waiting with room in the KV cache; it logs no arrivals) while {}, through {}.",
        h.request, base::FormatDurationRounded(h.effect), fmt::join(why, " and "),
        CauseSteps(h));
  }
  return fmt::format(
      "request {} waited {} to be scheduled (the run's requests typically {}) while {}, "
      "through {}.",
      h.request, base::FormatDurationRounded(h.effect),
      base::FormatDurationRounded(h.typical_wait_ns), fmt::join(why, " and "), CauseSteps(h));
}

// Running requests dropped from the batch mid-decode and taken back: preempted.
std::string PreemptionSentence(const Hypothesis& h) {
  std::string blocked;
  if (h.requests_blocked > 0) {
    blocked = fmt::format(
        "; {} waiting request{} not admitted while the batch had room ({}request {}, {})",
        h.requests_blocked, h.requests_blocked == 1 ? " was" : "s were",
        h.requests_blocked == 1 ? "" : "the longest: ", h.blocked_request,
        base::FormatDurationRounded(h.blocked_wait_ns));
  }
  return fmt::format(
      "{} running request{} left the batch during decode steps and came back ({}request "
      "{}), {:.0f} decode steps missed in all{}: preempted and recomputed, as an engine does "
      "when its KV cache runs out of blocks, in {}.",
      h.requests_preempted, h.requests_preempted == 1 ? "" : "s",
      h.requests_preempted == 1 ? "" : "the first: ", h.request, h.effect, blocked,
      CauseSteps(h));
}

// New requests whose first step decoded: their prompts took the decode path.
std::string MisrouteSentence(const Hypothesis& h) {
  return fmt::format(
      "request {}{} first ran in a decode step, never in a prefill or mixed one, on an engine "
      "that prefills its own requests: its prompt took the decode path, a token a step, "
      "{:.0f} steps in all, in {}.",
      h.request,
      h.requests_misrouted > 1 ? fmt::format(" and {} more", h.requests_misrouted - 1) : "",
      h.effect, CauseSteps(h));
}

// A family slowdown's families, the one that added the most time first: "softmax and
// attention".
std::string FamiliesText(const Hypothesis& h) {
  std::string text(localize::OperatorFamilyName(h.family));
  for (size_t i = 0; i < h.also_families.size(); ++i) {
    text += i + 1 == h.also_families.size() ? " and " : ", ";
    text += localize::OperatorFamilyName(h.also_families[i]);
  }
  return text;
}

// A short capture's kernel calls slower than the same kernel's other calls (instance_peers.h).
std::string PeerCauseSentence(const Hypothesis& h) {
  const std::string kernels =
      h.kind == CauseKind::kFamilySlow
          ? fmt::format("rank {}'s {} kernels", h.rank, localize::OperatorFamilyName(h.family))
          : fmt::format("rank {}'s compute kernels (its GPU)", h.rank);
  return fmt::format(
      "{} of {} calls of {} ran {:.2f}x the time of the same kernel's other calls (same name "
      "and launch shape) in {}; they added {} ({:.0f}% of the rank's kernel time in the "
      "capture). A capture this short has no baseline of steps: its repeated calls are the "
      "baseline.",
      h.peer_calls_slow, h.peer_calls, kernels, 1.0 + h.effect, CauseSteps(h),
      base::FormatDurationRounded(h.step_excess_ns),
      h.step_baseline_ns > 0.0 ? 100.0 * h.step_excess_ns / h.step_baseline_ns : 0.0);
}

}  // namespace

std::string CauseSteps(const Hypothesis& h) {
  return h.first_group == h.last_group ? fmt::format("step {}", h.first_group)
                                       : fmt::format("steps {}-{}", h.first_group, h.last_group);
}

std::string CauseLocation(const Hypothesis& h) {
  const std::string rank = fmt::format("rank {}", h.rank);
  if (h.kind == CauseKind::kHostSlow && h.rank < 0) return NodeText(h) + "'s hosts";
  switch (h.kind) {
    case CauseKind::kGpuSlow:
      return rank + "'s GPU";
    case CauseKind::kFamilySlow:
      if (h.by_instance_peers) {
        return fmt::format("{}'s {} kernels", rank, localize::OperatorFamilyName(h.family));
      }
      return fmt::format("the {} kernels", FamiliesText(h));
    case CauseKind::kHostSlow:
    case CauseKind::kLaunchLatency:
    case CauseKind::kCopyLatency:
    case CauseKind::kSyncLatency:
    case CauseKind::kAllocator:
      return rank + "'s host";
    case CauseKind::kLaunchRetry:
      return rank + "'s CUDA driver";
    case CauseKind::kStraggler:
      return rank;
    case CauseKind::kLinkDegraded:
      return h.node < 0
                 ? fmt::format("the {} collectives' link", localize::OperatorFamilyName(h.family))
                 : fmt::format("{}'s link ({} collectives)", NodeText(h),
                               localize::OperatorFamilyName(h.family));
    case CauseKind::kEnginePause:
      return "the engine loop";
    case CauseKind::kReorder:
      return "the compute kernels' order";
    case CauseKind::kRequestStarved:
      return "request " + h.request;
    case CauseKind::kRequestPreempted:
      return "the KV cache";
    case CauseKind::kRequestMisrouted:
      return "request " + h.request;
  }
  return rank;
}

std::string CauseSentence(const Hypothesis& h) {
  if (h.kind == CauseKind::kRequestStarved) return RequestCauseSentence(h);
  if (h.kind == CauseKind::kRequestPreempted) return PreemptionSentence(h);
  if (h.kind == CauseKind::kRequestMisrouted) return MisrouteSentence(h);
  if (h.by_instance_peers) return PeerCauseSentence(h);
  const double ratio = 1.0 + h.effect;
  std::string what;
  switch (h.kind) {
    case CauseKind::kGpuSlow:
      what = fmt::format("rank {}'s GPU ran its compute kernels {:.2f}x slower", h.rank, ratio);
      break;
    case CauseKind::kFamilySlow:
      what = fmt::format("the {} kernels ran {:.2f}x slower on every rank", FamiliesText(h),
                         ratio);
      break;
    case CauseKind::kHostSlow:
      what = fmt::format("{} ({}) ran {:.2f}x slower",
                         h.rank < 0 ? "host work on every rank of " + NodeText(h)
                                    : fmt::format("rank {}'s host work", h.rank),
                         h.host_only_job ? "its ops: the job's compute, it runs no GPU work"
                                         : "framework ranges, backend ops, copies",
                         ratio);
      break;
    case CauseKind::kLaunchLatency:
      what = fmt::format("kernel launch calls on rank {} took {:.2f}x longer", h.rank, ratio);
      break;
    case CauseKind::kCopyLatency:
      what = fmt::format("host-device copies on rank {} took {:.2f}x longer", h.rank, ratio);
      break;
    case CauseKind::kSyncLatency:
      what = fmt::format("synchronization calls on rank {} waited {:.2f}x longer", h.rank, ratio);
      break;
    case CauseKind::kAllocator:
      what =
          fmt::format("allocator calls (malloc/free) inside the steps of rank {} added {} a step",
                      h.rank, base::FormatDurationRounded(h.effect));
      break;
    case CauseKind::kLaunchRetry:
      what = fmt::format("{:.0f} runtime calls a step failed on rank {} and were retried", h.effect,
                         h.rank);
      break;
    case CauseKind::kStraggler:
      what = h.by_stall
                 ? fmt::format(
                       "rank {} idled {} a step inside its steps with no work recorded{}, so it "
                       "reached its collectives late and its peers waited for it",
                       h.rank, base::FormatDurationRounded(h.effect),
                       h.host_only_job ? "" : " on its host or its GPU")
                 : fmt::format(
                       "rank {}'s host ran {:.2f}x slower, so it reached every collective late "
                       "and its peers waited for it",
                       h.rank, ratio);
      break;
    case CauseKind::kLinkDegraded:
      what = fmt::format(
          "the {} collectives{} took {:.2f}x longer on every rank {}{} (the link they cross)",
          localize::OperatorFamilyName(h.family),
          h.by_transfer ? "' transfers (after their last member arrived)" : "", ratio,
          h.node < 0 ? std::string("taking part") : "of " + NodeText(h),
          h.by_transfer ? "" : ", the ranks arriving together");
      break;
    case CauseKind::kEnginePause:
      what = fmt::format("the engine loop stalled {} a step (nothing launched, the GPU idle)",
                         base::FormatDurationRounded(h.effect));
      break;
    case CauseKind::kReorder:
      what = fmt::format("{:.0f} compute kernels a step ran out of their usual order", h.effect);
      break;
    case CauseKind::kRequestStarved:
    case CauseKind::kRequestPreempted:
    case CauseKind::kRequestMisrouted:
      break;
  }
  std::string sentence = fmt::format("{} in {}", what, CauseSteps(h));
  const double share = h.step_baseline_ns > 0.0 ? h.impact_ns / h.step_baseline_ns : 0.0;
  const bool costless = h.cost_negligible;
  if (costless) {
    // Without a GPU the host's work is the step: what cost nothing was waited out by peers
    // that took longer still, not run beside a busy device.
    sentence += h.host_only_job
                    ? "; its peers took longer still, so it cost the steps almost no time"
                    : "; off the steps' critical path, it cost them almost no time";
  } else if (h.step_baseline_ns > 0.0 && h.impact_ns > 0.0) {
    sentence += fmt::format("; it added about {} to each of those steps ({:.0f}% of a step)",
                            base::FormatDurationRounded(h.impact_ns / static_cast<double>(h.steps)),
                            100.0 * share);
  }
  if (!h.victims.empty()) {
    std::string ranks;
    for (size_t i = 0; i < h.victims.size() && i < 4; ++i) {
      ranks += (i ? ", " : "") + std::to_string(h.victims[i]);
    }
    if (h.victims.size() > 4) ranks += fmt::format(" and {} more", h.victims.size() - 4);
    const double per_rank_step =
        h.victim_wait_ns / static_cast<double>(h.steps) / static_cast<double>(h.victims.size());
    // Off the critical path, the peers' waits took the place of time they idled anyway.
    sentence += fmt::format(
        "; rank{} {} waited {}{} a step for it{}", h.victims.size() > 1 ? "s" : "", ranks,
        base::FormatDurationRounded(per_rank_step), h.victims.size() > 1 ? " each" : "",
        !costless              ? ""
        : h.victims.size() > 1 ? ", time they would have idled anyway"
                               : ", time it would have idled anyway");
  }
  if (h.reached_collectives_last) {
    sentence += fmt::format("; rank {} reached {} of the {} collectives last", h.rank,
                            h.collectives_late, h.collectives);
  }
  return sentence + ".";
}

std::string StalledStepSentence(const StalledStep& stalled) {
  const std::string where = stalled.rank >= 0 ? fmt::format("rank {}", stalled.rank)
                                              : fmt::format("process {}", stalled.pid);
  return fmt::format(
      "{}'s engine step {} had not ended after {:.1f} s when the trace was written (its {} "
      "steps before took at most {:.1f} ms){}",
      where, stalled.name, static_cast<double>(stalled.open_ns) / 1e9, stalled.steps_before,
      static_cast<double>(stalled.longest_before_ns) / 1e6, PendingSentence(stalled.pending));
}

std::string HangSentence(const HangReport& report) {
  if (!report.found()) return "";
  if (report.evidence == HangEvidence::kStalledStep) {
    std::vector<std::string> parts;
    for (const StalledStep& stalled : report.stalled) parts.push_back(StalledStepSentence(stalled));
    if (!report.culprits.empty()) {
      return fmt::format(
          "Hang: {} never entered the collective {} waits in ({}); {}. The culprit's stack "
          "says why it stopped.",
          RankList(report.culprits), RankList(report.victims), StalledCollective(report),
          fmt::join(parts, "; "));
    }
    return fmt::format(
        "Hang: {}. The trace shows no collective that would name who stopped first: the "
        "stalled process's stack does.",
        fmt::join(parts, "; "));
  }
  // Waits by (communicator, sequence); those a culprit caused come first, the waits for
  // ranks that were waiting themselves are summed up after them.
  std::map<std::pair<std::string, int64_t>, std::vector<const HangWait*>> groups;
  for (const HangWait& wait : report.waits)
    groups[{wait.communicator, wait.sequence}].push_back(&wait);
  const std::set<int32_t> culprits(report.culprits.begin(), report.culprits.end());
  std::vector<std::string> direct;
  std::set<int32_t> indirect_waiters;
  for (const auto& [key, waits] : groups) {
    std::vector<int32_t> waiting;
    std::set<int32_t> missing;
    for (const HangWait* wait : waits) {
      waiting.push_back(wait->rank);
      missing.insert(wait->missing.begin(), wait->missing.end());
    }
    const bool caused_by_culprit = std::any_of(
        missing.begin(), missing.end(), [&](int32_t rank) { return culprits.count(rank) > 0; });
    const HangWait& first = *waits.front();
    const std::string what = fmt::format("{} #{} of {}", first.op.empty() ? "collective" : first.op,
                                         first.sequence, first.communicator);
    if (missing.empty()) {
      direct.push_back(fmt::format(
          "{} entered {} and none left it{}", RankList(waiting), what,
          first.waited_ns > 0
              ? " (" + base::FormatSeconds(static_cast<double>(first.waited_ns), 0) + " waited)"
              : std::string()));
    } else if (caused_by_culprit || culprits.empty()) {
      direct.push_back(
          fmt::format("{} never entered {}; {} {} in it",
                      RankList({missing.begin(), missing.end()}), what, RankList(waiting),
                      first.waited_ns > 0
                          ? "waited " + base::FormatSeconds(static_cast<double>(first.waited_ns), 0)
                          : std::string("wait")));
    } else {
      indirect_waiters.insert(waiting.begin(), waiting.end());
    }
  }
  std::string text = fmt::format("Hang: {}.", fmt::join(direct, "; "));
  if (!indirect_waiters.empty()) {
    text += fmt::format(" R{} waited in turn for ranks that were waiting themselves.",
                        RankList({indirect_waiters.begin(), indirect_waiters.end()}).substr(1));
  }
  if (!report.culprits.empty()) {
    text += fmt::format(
        " R{} waits in no collective: the culprit; every other rank waits for {}, "
        "directly or through another rank.",
        RankList(report.culprits).substr(1), report.culprits.size() > 1 ? "them" : "it");
  } else if (report.silent.empty()) {
    text +=
        " No rank is free of a wait: mismatched collectives across ranks, or a transport "
        "that stopped moving data.";
  } else {
    text += " Every rank the log names waits.";
  }
  if (report.evidence == HangEvidence::kFlightRecorder) {
    text += " (From Flight Recorder dumps: each rank's last collectives and their state.)";
  }
  if (!report.silent.empty()) {
    text += fmt::format(
        " R{} appear{} in no line of the log although higher ranks do: if the log holds every "
        "rank's lines, {} never entered the collective; look there first.",
        RankList(report.silent).substr(1), report.silent.size() == 1 ? "s" : "",
        report.silent.size() == 1 ? "it" : "they");
  }
  if (report.evidence == HangEvidence::kLogs) {
    text +=
        " (From the watchdog lines of the logs; which ranks belong to the group is read from "
        "the ranks the log shows.)";
  }
  return text;
}

std::string CulpritSentence(const HangReport& report) {
  std::vector<std::string> parts;
  for (const CulpritState& state : report.states) {
    std::string part = fmt::format("rank {} had entered #{} last", state.rank, state.last_sequence);
    if (state.last_sequence < 0) part = fmt::format("rank {} had entered none of them", state.rank);
    if (!state.range.empty()) {
      part += fmt::format(", was in {}{}", state.range,
                          state.range_open ? " (still open when the trace ends)" : "");
    }
    if (!state.last_call_site.empty()) {
      part += fmt::format(", which it called from {}", state.last_call_site);
    }
    if (!state.last_kernel.empty())
      part += fmt::format(", its last kernel was {}", state.last_kernel);
    if (!state.last_runtime_call.empty()) {
      part += fmt::format(", its last runtime call {}", state.last_runtime_call);
    }
    part += PendingSentence(state.pending);
    parts.push_back(part);
  }
  if (parts.empty()) return "";
  return fmt::format("When its peers began to wait, {}.", fmt::join(parts, "; "));
}

std::string CrashSentence(const CrashReport& report) {
  if (!report.found) return "";
  std::string text = fmt::format("Crash: rank {}'s {} returned {} ({})", report.rank, report.call,
                                 report.error, report.error_name);
  if (report.step >= 0) text += fmt::format(" in step {}", report.step);
  text += "; the error is asynchronous: it names the first call after the fault, not the kernel.";
  auto describe = [](const CrashKernel& k) {
    std::string out = fmt::format("{} ({:.1f} us", k.name, static_cast<double>(k.dur_ns) / 1e3);
    if (k.normal_ns > 0)
      out += fmt::format(" against its normal {:.1f} us", static_cast<double>(k.normal_ns) / 1e3);
    out += ")";
    if (k.in_graph) {
      // Its launch returned long before the fault: the error came back at a later call.
      out += fmt::format(
          ", a node of the CUDA graph {}{}",
          k.launch_call.empty() ? "replay" : fmt::format("that {} replayed", k.launch_call),
          k.launched_from.empty() ? "" : fmt::format(" from {}", k.launched_from));
    } else if (!k.launched_from.empty()) {
      out += fmt::format(", launched from {}", k.launched_from);
    }
    return out;
  };
  if (report.has_suspect) {
    const CrashKernel& k = report.suspect;
    const bool cut_short = k.normal_ns > 0 && k.dur_ns < 0.8 * static_cast<double>(k.normal_ns);
    text += fmt::format(
        " Most likely at fault: {}, the last kernel to start on that GPU before the error (a "
        "fault stops the device){}.",
        describe(k), cut_short ? ", and cut short as a faulting kernel is" : "");
  }
  if (report.has_running &&
      (!report.has_suspect || report.running.start_ns != report.suspect.start_ns)) {
    text += fmt::format(" Still running when the error came back: {}.", describe(report.running));
  }
  if (!report.requests.empty()) {
    text += fmt::format(
        " Requests in flight: {}{}.",
        fmt::join(report.requests.begin(),
                  report.requests.begin() + std::min<size_t>(report.requests.size(), 4), ", "),
        report.requests.size() > 4 ? fmt::format(" and {} more", report.requests.size() - 4) : "");
  }
  return text;
}

std::string TrendSentence(const MemoryTrend& t) {
  if (!t.found) return "";
  const double change = t.last_allocated - t.first_allocated;
  const char* verb = change > 0.1 * t.first_allocated    ? "rose"
                     : change < -0.1 * t.first_allocated ? "fell"
                                                         : "stayed near";
  std::string text =
      std::string(verb) == "stayed near"
          ? fmt::format(
                "Before it, PyTorch's allocated memory on GPU {} stayed near {} for {:.1f} s",
                t.device, Bytes(t.last_allocated),
                static_cast<double>(t.last_ns - t.first_ns) / 1e9)
          : fmt::format(
                "Before it, PyTorch's allocated memory on GPU {} {} from {} to {} in {:.1f} s",
                t.device, verb, Bytes(t.first_allocated), Bytes(t.last_allocated),
                static_cast<double>(t.last_ns - t.first_ns) / 1e9);
  text += fmt::format(" (peak {}", Bytes(t.peak_allocated));
  if (t.last_reserved >= 0.0) text += fmt::format(", {} reserved", Bytes(t.last_reserved));
  return text + ").";
}

std::string OomSentence(const OomReport& r) {
  std::string where = r.device >= 0 ? fmt::format("GPU {}", r.device) : std::string("a GPU");
  if (r.rank >= 0) where += fmt::format(" (rank {})", r.rank);
  if (r.requested_bytes < 0.0) {
    return fmt::format(
        "Out of memory on {}: a CUDA allocation failed (the message gives no sizes).", where);
  }
  std::string text = fmt::format("Out of memory on {}: an allocation of {} failed", where,
                                 Bytes(r.requested_bytes));
  if (r.capacity_bytes > 0.0 && r.free_bytes >= 0.0) {
    text += fmt::format(" with {} of {} free", Bytes(r.free_bytes), Bytes(r.capacity_bytes));
  }
  if (r.step >= 0) text += fmt::format(" in step {}", r.step);
  if (!r.requests.empty()) text += fmt::format(" ({} requests in flight)", r.requests.size());
  text += ". ";
  switch (r.kind) {
    case OomKind::kFull:
      text += r.allocated_bytes >= 0.0
                  ? fmt::format("PyTorch held {} of it: the GPU is full.", Bytes(r.allocated_bytes))
                  : std::string("The GPU is full.");
      break;
    case OomKind::kFragmented:
      text += fmt::format(
          "PyTorch had {} reserved but unallocated, more than it asked for: the cache is "
          "fragmented, no free block fits.",
          Bytes(r.reserved_unallocated_bytes));
      break;
    case OomKind::kOutsidePyTorch:
      if (r.other_processes > 0) {
        text += fmt::format(
            "{} other processes held {} of the GPU ({} each on average: other ranks' CUDA "
            "contexts or workers on the wrong GPU), more than it asked for.",
            r.other_processes, Bytes(r.other_processes_bytes),
            Bytes(r.other_processes_bytes / r.other_processes));
      } else {
        text += r.other_processes_bytes > 0.0
                    ? fmt::format("Memory outside this process held {} of the GPU.",
                                  Bytes(r.other_processes_bytes))
                    : std::string(
                          "Memory outside PyTorch (its CUDA context, NCCL buffers, "
                          "library workspaces) held a large share of the GPU.");
      }
      break;
  }
  const std::string trend = TrendSentence(r.trend);
  if (!trend.empty()) text += " " + trend;
  return text;
}

std::string_view NextActionOfOom(const OomReport& r) {
  switch (r.kind) {
    case OomKind::kFull:
      return "Lower the engine's memory demand: vLLM --gpu-memory-utilization, --max-num-seqs, "
             "--max-model-len (or --enforce-eager to drop CUDA-graph memory); SGLang "
             "--mem-fraction-static, --max-running-requests, --chunked-prefill-size; or shard "
             "the model over more GPUs.";
    case OomKind::kFragmented:
      return "Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (max_split_size_mb on older "
             "PyTorch) and look for allocations whose size changes from step to step.";
    case OomKind::kOutsidePyTorch:
      return "Run nvidia-smi on that node: find the other processes on the GPU (a stale worker, "
             "another tenant) and, in this one, NCCL buffers (NCCL_BUFFSIZE) and CUDA graphs.";
  }
  return "";
}

}  // namespace teller::cause
