#include "cause/hang_report.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/median.h"
#include "cause/log_numbers.h"

namespace teller::cause {
namespace {

using model::Layer;

int32_t RankOfEvent(const model::Trace& trace, model::EventRow row) {
  const model::ProcessIndex process = trace.events.process[row.value()];
  return process.valid() ? trace.processes.rank[process.value()] : -1;
}

const CommunicatorCollectives* Named(const CollectiveSummary& summary, std::string_view name) {
  for (const CommunicatorCollectives& communicator : summary) {
    if (communicator.name == name) return &communicator;
  }
  return nullptr;
}

// The member of that rank (members go by rank); null when it is none.
const CollectiveMember* MemberOf(const CommunicatorCollectives& communicator, int32_t rank) {
  auto it = std::lower_bound(
      communicator.members.begin(), communicator.members.end(), rank,
      [](const CollectiveMember& member, int32_t value) { return member.rank < value; });
  return it != communicator.members.end() && it->rank == rank ? &*it : nullptr;
}

CollectiveMember MemberOfRow(const model::Trace& trace, uint32_t row, int32_t rank) {
  const model::CollectiveTable& c = trace.collectives;
  const model::EventRow event = c.event[row];
  return {rank,
          c.sequence[row],
          std::string(trace.str(c.op[row])),
          c.size_bytes[row],
          trace.events.start_ns[event.value()],
          trace.events.dur_ns[event.value()]};
}

void ResolveCulprits(HangReport* report) {
  std::set<int32_t> stuck, missing;
  for (const HangWait& wait : report->waits) {
    stuck.insert(wait.rank);
    missing.insert(wait.missing.begin(), wait.missing.end());
  }
  for (int32_t rank : missing) {
    if (!stuck.count(rank)) report->culprits.push_back(rank);
  }
  report->victims.assign(stuck.begin(), stuck.end());
  report->no_culprit = report->culprits.empty();
  for (const HangWait& wait : report->waits) {
    if (wait.start_ns != INT64_MIN)
      report->since_ns =
          report->since_ns == INT64_MIN ? wait.start_ns : std::min(report->since_ns, wait.start_ns);
    report->longest_wait_ns = std::max(report->longest_wait_ns, wait.waited_ns);
  }
}

// Rank `rank` waiting in collective `row` (its communicator, sequence, op, size, start).
HangWait WaitIn(const model::Trace& trace, uint32_t row, int32_t rank) {
  const model::CollectiveTable& c = trace.collectives;
  HangWait wait;
  wait.rank = rank;
  wait.communicator = std::string(trace.str(c.communicator[row]));
  wait.sequence = c.sequence[row];
  wait.op = std::string(trace.str(c.op[row]));
  wait.size_bytes = c.size_bytes[row];
  wait.start_ns = trace.events.start_ns[c.event[row].value()];
  return wait;
}

void FindTraceWaits(const CollectiveSummary& collectives, const HangOptions& options,
                    HangReport* report) {
  for (const CommunicatorCollectives& communicator : collectives) {
    std::vector<double> durations(communicator.durations.begin(), communicator.durations.end());
    const double median = base::MedianInPlace(&durations);
    const double hung_ns =
        std::max(static_cast<double>(options.min_wait_ns), options.min_ratio * median);
    for (const CollectiveMember& member : communicator.members) {
      if (static_cast<double>(member.dur_ns) < hung_ns) continue;
      HangWait wait{member.rank, communicator.name, member.sequence, member.op,
                    member.size_bytes, member.start_ns, member.dur_ns, {}};
      for (const CollectiveMember& other : communicator.members) {
        if (other.sequence < wait.sequence) wait.missing.push_back(other.rank);
      }
      report->waits.push_back(std::move(wait));
    }
  }
}

bool IsHostLayer(Layer layer) {
  return layer == Layer::kStep || layer == Layer::kFe || layer == Layer::kBe;
}

// "[Rank 3]" or "Rank 3]" in a watchdog line; -1 when absent.
int32_t RankInText(std::string_view text) {
  const size_t at = text.find("Rank ");
  if (at == std::string_view::npos) return -1;
  int32_t rank = 0;
  size_t i = at + 5;
  if (i >= text.size() || !std::isdigit(static_cast<unsigned char>(text[i]))) return -1;
  for (int digits = 0; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
    if (++digits > 7) return -1;  // no rank has 8 digits
    rank = rank * 10 + (text[i] - '0');
  }
  return rank;
}

std::string WordAfter(std::string_view text, std::string_view key) {
  const size_t at = text.find(key);
  if (at == std::string_view::npos) return "";
  size_t end = at + key.size();
  while (end < text.size() &&
         (std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '_')) {
    ++end;
  }
  return std::string(text.substr(at + key.size(), end - at - key.size()));
}

// The process group a torch line names ("[PG ID 2 PG GUID 3 Rank 1]", "[PG 1 Rank 2]").
std::string GroupInText(std::string_view text) {
  const size_t at = text.find("[PG ");
  if (at == std::string_view::npos) return "default";
  const size_t id = text.find("ID ", at);
  const size_t from = id != std::string_view::npos && id < at + 8 ? id + 3 : at + 4;
  size_t end = from;
  while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
  return end > from ? "PG " + std::string(text.substr(from, end - from)) : "default";
}

// From PyTorch's watchdog lines: the ranks that timed out waiting in a sequence of a
// process group, and the ranks the log shows (by prefix, or NCCL's "rank R nranks N").
void FindLogWaits(const model::Trace& trace, HangReport* report) {
  std::map<std::pair<std::string, int32_t>, HangWait> waits;  // (group, rank)
  std::set<int32_t> known;
  int32_t nranks = 0;
  std::map<int32_t, int64_t> last_enqueued;
  for (size_t row = 0; row < trace.logs.size(); ++row) {
    const std::string_view text = trace.str(trace.logs.text[row]);
    if (trace.logs.rank[row] >= 0) known.insert(trace.logs.rank[row]);
    const int64_t world = NumberAfter(text, " nranks ");
    if (world > 0 && text.find("NCCL INFO") != std::string_view::npos) {
      nranks = std::max<int32_t>(nranks, static_cast<int32_t>(world));
    }
    const int32_t rank = RankInText(text) >= 0 ? RankInText(text) : trace.logs.rank[row];
    const int64_t enqueued = NumberAfter(text, "last enqueued NCCL work: ");
    if (enqueued >= 0 && rank >= 0) last_enqueued[rank] = enqueued;
    const int64_t sequence = NumberAfter(text, "WorkNCCL(SeqNum=");
    if (sequence < 0 || text.find("timeout") == std::string_view::npos || rank < 0) continue;
    known.insert(rank);
    HangWait& wait = waits[{GroupInText(text), rank}];
    if (sequence < wait.sequence) continue;
    wait.rank = rank;
    wait.communicator = GroupInText(text);
    wait.sequence = sequence;
    wait.op = WordAfter(text, "OpType=");
    for (char& ch : wait.op) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    const int64_t ran_ms = NumberAfter(text, "ran for ");
    const int64_t timeout_ms = NumberAfter(text, "Timeout(ms)=");
    wait.waited_ns = (ran_ms >= 0 ? ran_ms : std::max<int64_t>(timeout_ms, 0)) * 1'000'000;
    if (trace.logs.ts_ns[row] != INT64_MIN) wait.start_ns = trace.logs.ts_ns[row] - wait.waited_ns;
  }
  for (int32_t r = 0; r < nranks; ++r) known.insert(r);
  // Every rank waiting in a collective logs its own timeout; below the highest rank named,
  // the ranks that log nothing either never entered it or are missing from this log.
  if (nranks == 0 && !waits.empty() && !known.empty()) {
    for (int32_t r = 0; r < *known.rbegin(); ++r) {
      if (!known.count(r)) report->silent.push_back(r);
    }
  }
  for (auto& [key, wait] : waits) {
    for (int32_t rank : known) {
      const bool waits_too =
          waits.count({key.first, rank}) && waits[{key.first, rank}].sequence >= wait.sequence;
      auto enqueued = last_enqueued.find(rank);
      const bool behind = enqueued != last_enqueued.end() && enqueued->second < wait.sequence;
      if (!waits_too && (behind || enqueued == last_enqueued.end())) wait.missing.push_back(rank);
    }
    report->waits.push_back(std::move(wait));
  }
}

// A watchdog line names its process group, not its members: the ranks that log nothing
// are missing from it only if they belong to it. The group of the ranks waiting in one is
// the trace's smallest communicator that holds them all (with data-parallel replicas, the
// replica's tensor-parallel group, not the other replicas, stopped with the job).
void NarrowToMembers(const CollectiveSummary& collectives, HangReport* report) {
  std::map<std::string, std::set<int32_t>> waiting;  // log group -> ranks waiting in it
  for (const HangWait& wait : report->waits) waiting[wait.communicator].insert(wait.rank);
  for (const auto& [group, ranks] : waiting) {
    const CommunicatorCollectives* smallest = nullptr;
    for (const CommunicatorCollectives& communicator : collectives) {
      const bool holds = std::all_of(ranks.begin(), ranks.end(), [&](int32_t rank) {
        return MemberOf(communicator, rank) != nullptr;
      });
      if (holds && (smallest == nullptr || communicator.members.size() < smallest->members.size()))
        smallest = &communicator;
    }
    if (smallest == nullptr) continue;
    for (HangWait& wait : report->waits) {
      if (wait.communicator != group) continue;
      std::erase_if(wait.missing, [&](int32_t rank) { return MemberOf(*smallest, rank) == nullptr; });
    }
  }
}

// From Flight Recorder entries (collectives whose event carries "fr_state"): per
// communicator, each rank's last collective entered and the first it has not completed.
void FindRecorderWaits(const model::Trace& trace, HangReport* report) {
  const base::StringId state_key = trace.strings.Find("fr_state");
  if (!state_key.valid()) return;
  const base::StringId completed = trace.strings.Find("completed");
  const base::StringId frame_key = trace.strings.Find("fr_frame");
  const base::StringId timeout_key = trace.strings.Find("timeout_ms");
  struct RankState {
    int64_t last_entered = -1;
    uint32_t last_row = 0;
    int64_t first_open = -1;
    uint32_t open_row = 0;
  };
  std::map<base::StringId, std::map<int32_t, RankState>> groups;
  const model::CollectiveTable& c = trace.collectives;
  for (uint32_t i = 0; i < c.size(); ++i) {
    const model::EventRow event = c.event[i];
    base::StringId state;
    const int32_t rank = RankOfEvent(trace, event);
    if (rank < 0 || c.sequence[i] < 0 || !trace.FindStringArg(event, state_key, &state)) continue;
    RankState& r = groups[c.communicator[i]][rank];
    if (c.sequence[i] > r.last_entered) r = {c.sequence[i], i, r.first_open, r.open_row};
    if (state != completed && (r.first_open < 0 || c.sequence[i] < r.first_open)) {
      r.first_open = c.sequence[i];
      r.open_row = i;
    }
  }
  std::map<int32_t, CulpritState> states;
  for (const auto& [communicator, ranks] : groups) {
    for (const auto& [rank, r] : ranks) {
      if (r.first_open < 0) continue;
      const model::EventRow event = c.event[r.open_row];
      HangWait wait = WaitIn(trace, r.open_row, rank);
      int64_t timeout_ms = 0;
      if (timeout_key.valid() && trace.FindIntArg(event, timeout_key, &timeout_ms)) {
        wait.waited_ns = timeout_ms * 1'000'000;
      }
      for (const auto& [other, other_state] : ranks) {
        if (other_state.last_entered < wait.sequence) wait.missing.push_back(other);
      }
      report->waits.push_back(std::move(wait));
    }
    for (const auto& [rank, r] : ranks) {  // what each rank did last, for the culprits
      CulpritState& state = states[rank];
      if (state.rank >= 0) continue;
      state.rank = rank;
      state.last_sequence = r.last_entered;
      base::StringId frame;
      if (frame_key.valid() && trace.FindStringArg(c.event[r.last_row], frame_key, &frame)) {
        state.last_call_site = std::string(trace.str(frame));
      }
    }
  }
  if (report->waits.empty()) return;
  ResolveCulprits(report);
  for (int32_t rank : report->culprits) report->states.push_back(states[rank]);
}

// What a stalled step's process still had open when the trace was written: its
// innermost truncated range that began in the step, and the COMM one among them.
void FindOpenRanges(const model::Trace& trace, StalledStep* stalled, model::ProcessIndex process) {
  const model::EventTable& events = trace.events;
  model::TimeNs innermost_start = INT64_MIN, comm_start = INT64_MIN;
  for (uint32_t e = 0; e < events.size(); ++e) {
    if (events.process[e] != process || !(events.flags[e] & model::kFlagTruncated) ||
        events.start_ns[e] < stalled->start_ns || events.layer[e] == Layer::kStep) {
      continue;
    }
    const model::TimeNs start = events.start_ns[e];
    if (start >= innermost_start) {
      innermost_start = start;
      stalled->innermost_open = std::string(trace.str(events.name[e]));
    }
    if (events.layer[e] == Layer::kComm && start >= comm_start) {
      comm_start = start;
      stalled->waits_in = std::string(trace.str(events.name[e]));
    }
  }
}

// Stalled ranks that wait in a collective are victims of those that never entered it.
void SplitStalledRanks(HangReport* report) {
  std::set<int32_t> waiting, stuck_elsewhere;
  for (const StalledStep& stalled : report->stalled) {
    if (stalled.rank < 0) continue;
    (stalled.waits_in.empty() ? stuck_elsewhere : waiting).insert(stalled.rank);
  }
  if (waiting.empty() || stuck_elsewhere.empty()) {
    report->no_culprit = true;  // which rank stopped first is not in the steps
    for (const StalledStep& stalled : report->stalled) {
      if (stalled.rank >= 0) report->victims.push_back(stalled.rank);
    }
    return;
  }
  report->victims.assign(waiting.begin(), waiting.end());
  report->culprits.assign(stuck_elsewhere.begin(), stuck_elsewhere.end());
  for (const StalledStep& stalled : report->stalled) {
    if (!stuck_elsewhere.count(stalled.rank)) continue;
    CulpritState state;
    state.rank = stalled.rank;
    state.range = stalled.innermost_open.empty() ? stalled.name : stalled.innermost_open;
    state.range_start_ns = stalled.start_ns;
    state.range_open = true;
    state.pending = stalled.pending;
    report->states.push_back(std::move(state));
  }
}

// A thread's steps: how many completed, the longest of them, and those cut open by the end
// of the trace (step rows, in order).
struct ThreadSteps {
  uint32_t completed = 0;
  model::DurationNs longest_ns = 0;
  std::vector<uint32_t> open;
};

// The stalled steps of a thread: its open steps far longer than its completed ones.
void FindStalledStepsOfThread(const model::Trace& trace, const ThreadSteps& thread,
                              const HangOptions& options, std::vector<StalledStep>* stalled) {
  if (thread.completed < options.min_steps_before) return;
  const model::StepTable& steps = trace.steps;
  const double stalled_ns =
      std::max(static_cast<double>(options.min_stalled_ns),
               options.min_stalled_ratio * static_cast<double>(thread.longest_ns));
  for (uint32_t s : thread.open) {
    const model::DurationNs open_ns = steps.end_ns[s] - steps.start_ns[s];
    if (static_cast<double>(open_ns) < stalled_ns) continue;
    const model::ProcessIndex process = steps.process[s];
    StalledStep& step = stalled->emplace_back();
    step.rank = steps.rank[s];
    step.pid = process.valid() ? trace.processes.os_pid[process.value()] : -1;
    step.name = std::string(trace.str(steps.name[s]));
    step.start_ns = steps.start_ns[s];
    step.open_ns = open_ns;
    step.longest_before_ns = thread.longest_ns;
    step.steps_before = thread.completed;
    if (process.valid()) {
      step.pending = FindPendingLaunches(trace, process, options);
      FindOpenRanges(trace, &step, process);
    }
  }
}

// The evidence FindHang reads after the trace's collectives: the Flight Recorder's, then
// the watchdog lines'; an empty report when neither shows a hang.
HangReport FindRecordedOrLoggedHang(const model::Trace& trace,
                                    const CollectiveSummary& collectives) {
  HangReport report;
  FindRecorderWaits(trace, &report);
  if (!report.waits.empty()) {
    report.evidence = HangEvidence::kFlightRecorder;
    return report;
  }
  FindLogWaits(trace, &report);
  if (!report.waits.empty()) {
    report.evidence = HangEvidence::kLogs;
    NarrowToMembers(collectives, &report);
    ResolveCulprits(&report);
  }
  return report;
}

// SetCulpritStates of parts that hold a state per culprit of the report, in its order.
void MergePartStates(const std::vector<CulpritStatesPart>& parts,
                     const CollectiveSummary& collectives, HangReport* report) {
  model::TimeNs run_end = INT64_MIN;
  for (const CulpritStatesPart& part : parts) run_end = std::max(run_end, part.events_end_ns);
  report->states.clear();
  for (size_t i = 0; i < report->culprits.size(); ++i) {
    const int32_t rank = report->culprits[i];
    CulpritState state;
    state.rank = rank;
    // Its last sequence in the first communicator it is missing from.
    for (const HangWait& wait : report->waits) {
      if (std::find(wait.missing.begin(), wait.missing.end(), rank) == wait.missing.end()) continue;
      const CommunicatorCollectives* communicator = Named(collectives, wait.communicator);
      const CollectiveMember* member = communicator ? MemberOf(*communicator, rank) : nullptr;
      if (member != nullptr) state.last_sequence = member->sequence;
      break;
    }
    bool pending_set = false;
    model::TimeNs range_end = 0;
    for (const CulpritStatesPart& part : parts) {
      const CulpritStatePart& s = part.states[i];
      if (s.has_kernel &&
          (state.last_kernel.empty() || s.last_kernel_end_ns >= state.last_kernel_end_ns)) {
        state.last_kernel = s.last_kernel;
        state.last_kernel_end_ns = s.last_kernel_end_ns;
      }
      if (s.has_runtime_call && s.last_runtime_call_ns >= state.last_runtime_call_ns) {
        state.last_runtime_call = s.last_runtime_call;
        state.last_runtime_call_ns = s.last_runtime_call_ns;
      }
      if (s.has_range && s.range_start_ns >= state.range_start_ns) {
        state.range = s.range;
        state.range_start_ns = s.range_start_ns;
        range_end = s.range_end_ns;
        state.range_open = true;  // decided below, against the run's last end
      }
      if (s.has_process && !pending_set) {
        state.pending = s.pending;
        pending_set = true;
      }
    }
    if (state.range_open) state.range_open = range_end >= run_end;
    report->states.push_back(std::move(state));
  }
}

}  // namespace

CollectiveSummary SummarizeCollectives(const model::Trace& trace) {
  struct Collected {
    std::vector<model::DurationNs> durations;
    std::map<int32_t, std::pair<int64_t, uint32_t>> last;  // rank -> (sequence, row)
  };
  std::map<base::StringId, Collected> collected;
  const model::CollectiveTable& c = trace.collectives;
  for (uint32_t i = 0; i < c.size(); ++i) {
    const int32_t rank = RankOfEvent(trace, c.event[i]);
    if (c.sequence[i] < 0 || rank < 0) continue;
    Collected& communicator = collected[c.communicator[i]];
    communicator.durations.push_back(trace.events.dur_ns[c.event[i].value()]);
    auto [last, added] = communicator.last.try_emplace(rank, c.sequence[i], i);
    if (!added && c.sequence[i] >= last->second.first) last->second = {c.sequence[i], i};
  }
  CollectiveSummary summary;
  for (auto& [name, communicator] : collected) {
    CommunicatorCollectives& out = summary.emplace_back();
    out.name = std::string(trace.str(name));
    out.durations = std::move(communicator.durations);
    for (const auto& [rank, last] : communicator.last) {
      out.members.push_back(MemberOfRow(trace, last.second, rank));
    }
  }
  return summary;
}

void MergeCollectiveSummary(CollectiveSummary part, CollectiveSummary* run) {
  for (CommunicatorCollectives& communicator : part) {
    auto into = std::find_if(run->begin(), run->end(), [&](const CommunicatorCollectives& c) {
      return c.name == communicator.name;
    });
    if (into == run->end()) {
      run->push_back(std::move(communicator));
      continue;
    }
    into->durations.insert(into->durations.end(), communicator.durations.begin(),
                           communicator.durations.end());
    for (CollectiveMember& member : communicator.members) {
      auto at = std::lower_bound(
          into->members.begin(), into->members.end(), member.rank,
          [](const CollectiveMember& m, int32_t rank) { return m.rank < rank; });
      if (at == into->members.end() || at->rank != member.rank) {
        into->members.insert(at, std::move(member));
      } else if (member.sequence >= at->sequence) {
        *at = std::move(member);
      }
    }
  }
}

HangReport FindHang(const model::Trace& trace, const HangOptions& options) {
  return FindHang(trace, SummarizeCollectives(trace), options);
}

HangReport FindHang(const model::Trace& trace, const CollectiveSummary& communicators,
                    const HangOptions& options) {
  HangReport report;
  if (FindTraceCulprits(communicators, options, &report)) {
    MergePartStates({ReadCulpritStates(trace, CulpritProbes(report), options)}, communicators,
                    &report);
    return report;
  }
  report = FindRecordedOrLoggedHang(trace, communicators);
  if (!report.found()) SetStalledSteps({ReadStalledSteps(trace, options)}, &report);
  return report;
}

std::vector<StalledStep> ReadStalledSteps(const model::Trace& part, const HangOptions& options) {
  std::map<uint32_t, ThreadSteps> threads;  // by thread index, as the joined trace orders them
  const model::StepTable& steps = part.steps;
  for (uint32_t s = 0; s < steps.size(); ++s) {
    ThreadSteps& thread = threads[steps.thread[s].value()];
    const model::EventRow event = steps.event[s];
    if (event.valid() && (part.events.flags[event.value()] & model::kFlagTruncated)) {
      thread.open.push_back(s);
    } else {
      ++thread.completed;
      thread.longest_ns = std::max(thread.longest_ns, steps.end_ns[s] - steps.start_ns[s]);
    }
  }
  std::vector<StalledStep> stalled;
  for (const auto& [thread, thread_steps] : threads) {
    FindStalledStepsOfThread(part, thread_steps, options, &stalled);
  }
  return stalled;
}

void SetStalledSteps(const std::vector<std::vector<StalledStep>>& parts, HangReport* report) {
  for (const std::vector<StalledStep>& part : parts) {
    report->stalled.insert(report->stalled.end(), part.begin(), part.end());
  }
  if (report->stalled.empty()) return;
  report->evidence = HangEvidence::kStalledStep;
  for (const StalledStep& stalled : report->stalled) {
    report->since_ns = report->since_ns == INT64_MIN ? stalled.start_ns
                                                     : std::min(report->since_ns, stalled.start_ns);
    report->longest_wait_ns = std::max(report->longest_wait_ns, stalled.open_ns);
  }
  SplitStalledRanks(report);
}

bool FindTraceCulprits(const CollectiveSummary& collectives, const HangOptions& options,
                       HangReport* report) {
  FindTraceWaits(collectives, options, report);
  if (report->waits.empty()) return false;
  report->evidence = HangEvidence::kTrace;
  ResolveCulprits(report);
  return true;
}

std::vector<CulpritProbe> CulpritProbes(const HangReport& report) {
  std::vector<CulpritProbe> probes;
  if (report.evidence != HangEvidence::kTrace) return probes;
  for (int32_t rank : report.culprits) {
    CulpritProbe probe{rank, 0};
    bool found = false;
    for (const HangWait& wait : report.waits) {
      if (std::find(wait.missing.begin(), wait.missing.end(), rank) == wait.missing.end()) continue;
      if (!found || wait.start_ns < probe.since_ns) probe.since_ns = wait.start_ns;
      found = true;
    }
    probes.push_back(probe);
  }
  return probes;
}

CulpritStatesPart ReadCulpritStates(const model::Trace& part,
                                    const std::vector<CulpritProbe>& probes,
                                    const HangOptions& options) {
  CulpritStatesPart read;
  std::map<int32_t, size_t> of_rank;  // rank -> its probe
  for (const CulpritProbe& probe : probes) {
    of_rank.emplace(probe.rank, read.states.size());
    read.states.emplace_back().rank = probe.rank;
  }
  const model::EventTable& events = part.events;
  for (uint32_t e = 0; e < events.size(); ++e) {
    const model::TimeNs start = events.start_ns[e];
    const model::TimeNs end = start + events.dur_ns[e];
    read.events_end_ns = std::max(read.events_end_ns, end);
    auto at = of_rank.find(RankOfEvent(part, model::EventRow(e)));
    if (at == of_rank.end()) continue;
    CulpritStatePart& s = read.states[at->second];
    const model::TimeNs since = probes[at->second].since_ns;
    const Layer layer = events.layer[e];
    const std::string_view name = part.str(events.name[e]);
    if (model::IsDeviceWork(layer) && (s.last_kernel.empty() || end >= s.last_kernel_end_ns)) {
      s.has_kernel = true;
      s.last_kernel = std::string(name);
      s.last_kernel_end_ns = end;
    } else if (layer == Layer::kRt && start >= s.last_runtime_call_ns) {
      s.has_runtime_call = true;
      s.last_runtime_call = std::string(name);
      s.last_runtime_call_ns = start;
    } else if (IsHostLayer(layer) && start <= since && end >= since && start >= s.range_start_ns) {
      s.has_range = true;
      s.range = std::string(name);
      s.range_start_ns = start;
      s.range_end_ns = end;
    }
  }
  for (CulpritStatePart& s : read.states) {
    for (uint32_t p = 0; p < part.processes.size(); ++p) {
      if (part.processes.rank[p] != s.rank) continue;
      s.has_process = true;
      s.pending = FindPendingLaunches(part, model::ProcessIndex(p), options);
      break;
    }
  }
  return read;
}

base::Status SetCulpritStates(const std::vector<CulpritStatesPart>& parts,
                              const CollectiveSummary& collectives, HangReport* report) {
  for (size_t k = 0; k < parts.size(); ++k) {
    if (parts[k].states.size() != report->culprits.size()) {
      return base::DataLoss("part {} holds {} culprits' states, {} expected", k,
                            parts[k].states.size(), report->culprits.size());
    }
    for (size_t i = 0; i < report->culprits.size(); ++i) {
      if (parts[k].states[i].rank != report->culprits[i]) {
        return base::DataLoss("part {}'s state {} is rank {}'s, rank {}'s expected", k, i,
                              parts[k].states[i].rank, report->culprits[i]);
      }
    }
  }
  MergePartStates(parts, collectives, report);
  return base::OkStatus();
}

base::StatusOr<HangReport> FindHang(const model::Trace& trace, const CollectiveSummary& collectives,
                                    const std::vector<CulpritProbe>& probes,
                                    const std::vector<CulpritStatesPart>& parts,
                                    const std::vector<std::vector<StalledStep>>& stalled,
                                    const HangOptions& options) {
  HangReport report;
  if (!FindTraceCulprits(collectives, options, &report)) {
    report = FindRecordedOrLoggedHang(trace, collectives);
    if (!report.found()) SetStalledSteps(stalled, &report);
    return report;
  }
  if (CulpritProbes(report) != probes) {
    return base::Internal("the culprits sent to the parts ({}) are not the report's ({})",
                          probes.size(), report.culprits.size());
  }
  TELLER_RETURN_IF_ERROR(SetCulpritStates(parts, collectives, &report));
  return report;
}

std::string_view StalledCollective(const HangReport& report) {
  std::string_view collective;
  for (const StalledStep& stalled : report.stalled) {
    if (!stalled.waits_in.empty()) collective = stalled.waits_in;
  }
  return collective;
}

PendingLaunches FindPendingLaunches(const model::Trace& trace, model::ProcessIndex process,
                                    const HangOptions& options) {
  const model::EventTable& events = trace.events;
  std::set<uint64_t> completed;  // correlations of the process's device work
  model::TimeNs end_ns = INT64_MIN;
  for (uint32_t e = 0; e < events.size(); ++e) {
    if (events.process[e] != process) continue;
    end_ns = std::max(end_ns, events.start_ns[e] + events.dur_ns[e]);
    if (model::IsDeviceWork(events.layer[e]) && events.correlation[e].valid()) {
      completed.insert(events.correlation[e].value());
    }
  }
  PendingLaunches pending;
  for (uint32_t e = 0; e < events.size(); ++e) {
    const Layer layer = events.layer[e];
    if (events.process[e] != process || (layer != Layer::kRt && layer != Layer::kDrv) ||
        !events.correlation[e].valid() || completed.count(events.correlation[e].value()) ||
        trace.str(events.name[e]).find("Launch") == std::string_view::npos ||
        end_ns - events.start_ns[e] < options.min_pending_launch_ns) {
      continue;
    }
    ++pending.count;
    if (pending.last_call.empty() || events.start_ns[e] >= pending.last_ns) {
      pending.last_call = std::string(trace.str(events.name[e]));
      pending.last_ns = events.start_ns[e];
      pending.before_end_ns = end_ns - events.start_ns[e];
    }
  }
  return pending;
}

namespace {

std::string WaitDifference(const HangWait& a, const HangWait& b) {
  if (a.rank != b.rank || a.communicator != b.communicator || a.sequence != b.sequence) {
    return fmt::format("rank {} in {} #{} against rank {} in {} #{}", a.rank, a.communicator,
                       a.sequence, b.rank, b.communicator, b.sequence);
  }
  if (a.op != b.op || a.size_bytes != b.size_bytes) {
    return fmt::format("{} of {} bytes against {} of {}", a.op, a.size_bytes, b.op, b.size_bytes);
  }
  if (a.start_ns != b.start_ns || a.waited_ns != b.waited_ns) {
    return fmt::format("start {} ns, waited {} ns against {} ns, {} ns", a.start_ns, a.waited_ns,
                       b.start_ns, b.waited_ns);
  }
  if (a.missing != b.missing) return fmt::format("missing {} against {}", a.missing, b.missing);
  return "";
}

bool SamePending(const PendingLaunches& a, const PendingLaunches& b) {
  return a.count == b.count && a.last_call == b.last_call && a.last_ns == b.last_ns &&
         a.before_end_ns == b.before_end_ns;
}

bool SameState(const CulpritState& a, const CulpritState& b) {
  return a.rank == b.rank && a.last_sequence == b.last_sequence && a.range == b.range &&
         a.range_start_ns == b.range_start_ns && a.range_open == b.range_open &&
         a.last_kernel == b.last_kernel && a.last_kernel_end_ns == b.last_kernel_end_ns &&
         a.last_runtime_call == b.last_runtime_call &&
         a.last_runtime_call_ns == b.last_runtime_call_ns && a.last_call_site == b.last_call_site &&
         SamePending(a.pending, b.pending);
}

bool SameStalled(const StalledStep& a, const StalledStep& b) {
  return a.rank == b.rank && a.pid == b.pid && a.name == b.name && a.start_ns == b.start_ns &&
         a.open_ns == b.open_ns && a.longest_before_ns == b.longest_before_ns &&
         a.steps_before == b.steps_before && SamePending(a.pending, b.pending) &&
         a.waits_in == b.waits_in && a.innermost_open == b.innermost_open;
}

// The first of the two lists' items that differ, or their lengths ("" when the same).
template <typename T, typename Differs>
std::string ListDifference(std::string_view what, const std::vector<T>& a,
                           const std::vector<T>& b, Differs differs) {
  if (a.size() != b.size()) return fmt::format("{} {} against {}", what, a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    std::string difference = differs(a[i], b[i]);
    if (!difference.empty()) return fmt::format("{} {}: {}", what, i, difference);
  }
  return "";
}

}  // namespace

std::string HangDifference(const HangReport& a, const HangReport& b) {
  if (a.evidence != b.evidence) {
    return fmt::format("evidence {} against {}", static_cast<int>(a.evidence),
                       static_cast<int>(b.evidence));
  }
  std::string differs = ListDifference("waits", a.waits, b.waits, WaitDifference);
  if (!differs.empty()) return differs;
  if (a.culprits != b.culprits || a.victims != b.victims || a.silent != b.silent ||
      a.no_culprit != b.no_culprit) {
    return fmt::format("culprits {}, victims {} against {}, {}", a.culprits, a.victims,
                       b.culprits, b.victims);
  }
  if (a.since_ns != b.since_ns || a.longest_wait_ns != b.longest_wait_ns) {
    return fmt::format("since {} ns, longest {} ns against {} ns, {} ns", a.since_ns,
                       a.longest_wait_ns, b.since_ns, b.longest_wait_ns);
  }
  differs = ListDifference("states", a.states, b.states, [](const auto& x, const auto& y) {
    return SameState(x, y) ? "" : fmt::format("rank {} against {}", x.rank, y.rank);
  });
  if (!differs.empty()) return differs;
  return ListDifference("stalled steps", a.stalled, b.stalled, [](const auto& x, const auto& y) {
    return SameStalled(x, y) ? "" : fmt::format("rank {} against {}", x.rank, y.rank);
  });
}

}  // namespace teller::cause
