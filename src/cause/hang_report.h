// Hangs: collectives some ranks entered and never left, the ranks that never entered them
// (culprits) told from the ranks that waited (victims), and what each culprit was doing
// when its peers began to wait. Read from the trace's collectives (communicator and
// sequence number), from PyTorch Flight Recorder dumps (each rank's last collectives and
// their state) and, where the trace has neither, from PyTorch's watchdog lines
// ("WorkNCCL(SeqNum=812, OpType=ALLREDUCE, ...) ran for 600012 milliseconds").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/tuning.h"
#include "model/trace.h"

namespace teller::cause {

// One rank waiting in a collective that did not complete in time.
struct HangWait {
  int32_t rank = -1;
  std::string communicator;
  int64_t sequence = -1;
  std::string op;
  int64_t size_bytes = -1;
  model::TimeNs start_ns = INT64_MIN;  // INT64_MIN: unknown (a log line without time)
  model::DurationNs waited_ns = 0;
  std::vector<int32_t> missing;  // members that never entered this sequence
};

// Kernel launches of a process whose kernel never completed: launch calls (runtime or
// driver, graph launches too) at least 1 s before the trace ends with no device work of
// the same correlation (CUPTI delivers a kernel's record when it completes).
struct PendingLaunches {
  uint32_t count = 0;
  std::string last_call;  // the latest of them
  model::TimeNs last_ns = 0;
  model::DurationNs before_end_ns = 0;  // how long before the trace's end it was made
};

// What a culprit was doing when its peers began to wait.
struct CulpritState {
  int32_t rank = -1;
  int64_t last_sequence =
      -1;             // the last sequence it entered in the communicator it is missing from
  std::string range;  // its innermost host range open at that time ("" if none)
  model::TimeNs range_start_ns = 0;
  bool range_open = false;  // still open when the trace ends
  std::string last_kernel;  // its last kernel before the trace ends
  model::TimeNs last_kernel_end_ns = 0;
  std::string last_runtime_call;
  model::TimeNs last_runtime_call_ns = 0;
  std::string last_call_site;  // where it called its last collective (Flight Recorder frames)
  PendingLaunches pending;     // launches whose kernel never completed (trace evidence)
};

// A step that had not ended when the trace was written (`teller record --watch` writes
// the open step when a hang fires), far longer than the steps before it on its thread.
struct StalledStep {
  int32_t rank = -1;
  int64_t pid = -1;
  std::string name;
  model::TimeNs start_ns = 0;
  model::DurationNs open_ns = 0;
  model::DurationNs longest_before_ns = 0;
  uint32_t steps_before = 0;
  PendingLaunches pending;  // of its process
  // The collective it waits in: a COMM range opened in the step and still open when the
  // trace was written (the Python hooks push collective calls); "" when none.
  std::string waits_in;
  std::string innermost_open;  // its innermost range still open ("" none)
};

enum class HangEvidence : uint8_t { kNone, kTrace, kFlightRecorder, kLogs, kStalledStep };

struct HangReport {
  HangEvidence evidence = HangEvidence::kNone;
  std::vector<HangWait> waits;       // by communicator, then rank
  std::vector<int32_t> culprits;     // missing from a collective and stuck in none
  std::vector<int32_t> victims;      // stuck waiting
  std::vector<CulpritState> states;  // one per culprit (trace evidence only)
  // kStalledStep evidence. When some of them wait in a collective and others do not,
  // the others are the culprits (they never entered it) and the waiting ones victims.
  std::vector<StalledStep> stalled;
  // kLogs evidence without NCCL's "nranks" line: ranks below the highest the log names that
  // appear in no line (in no timeout either). Not culprits: the log may lack their lines.
  std::vector<int32_t> silent;
  // Every missing rank waits itself (ranks in different collectives: a deadlock or
  // mismatched collectives), or every member entered and none left (the transport).
  bool no_culprit = false;
  model::TimeNs since_ns = INT64_MIN;
  model::DurationNs longest_wait_ns = 0;

  bool found() const { return evidence != HangEvidence::kNone; }
};

// When a collective hangs, a step is stalled and a launch never completed
// (base/tuning_list.h, docs/tuning.md).
struct HangOptions {
  TELLER_TUNED_HANG(TELLER_TUNED_FIELD)
};

HangReport FindHang(const model::Trace& trace, const HangOptions& options = {});

// A rank's last collective entered in a communicator (its highest sequence; the later
// row's on a tie).
struct CollectiveMember {
  int32_t rank = -1;
  int64_t sequence = -1;
  std::string op;
  int64_t size_bytes = -1;
  model::TimeNs start_ns = 0;
  model::DurationNs dur_ns = 0;
};

// What the hang scan reads of a communicator's collectives (those with a sequence and a
// ranked process): every collective's duration and each member's last collective.
struct CommunicatorCollectives {
  std::string name;
  std::vector<model::DurationNs> durations;
  std::vector<CollectiveMember> members;  // by rank
};

// A trace's communicators in the order of their names' string ids, as FindHang visits them.
using CollectiveSummary = std::vector<CommunicatorCollectives>;

CollectiveSummary SummarizeCollectives(const model::Trace& trace);
// Appends a later part's summary (plan order) to the run's: a communicator new to the run
// after the run's own, as appending the part's trace interns its names; a member's last
// collective the later part's on a tie, as the joined trace's later row wins.
void MergeCollectiveSummary(CollectiveSummary part, CollectiveSummary* run);

// FindHang with the trace's collectives summarized elsewhere (a distributed run merges
// every unit's: fleet/analysis_parts.h): the waits, culprits and victims come from them;
// the culprits' states, the Flight Recorder's, the logs' and the stalled steps' evidence
// still from the trace (read as one part).
HangReport FindHang(const model::Trace& trace, const CollectiveSummary& collectives,
                    const HangOptions& options = {});

// The states of the culprits, read where the units are (a distributed run: each process
// on its parts, fleet/analysis_parts.h) and merged on the first process. A culprit and the
// time its first wait began (the earliest wait it is missing from), as the first process
// finds them from the merged collectives (CulpritProbes) and sends them to the owners.
struct CulpritProbe {
  int32_t rank = -1;
  model::TimeNs since_ns = 0;
  bool operator==(const CulpritProbe&) const = default;
};

// What one part holds of a culprit's state: its last kernel, last runtime call and the
// host range open at its `since` among the part's events of that rank (the latest; the
// part's later event on a tie), and the pending launches of its first process of that rank.
struct CulpritStatePart {
  int32_t rank = -1;
  bool has_kernel = false;
  std::string last_kernel;
  model::TimeNs last_kernel_end_ns = 0;
  bool has_runtime_call = false;
  std::string last_runtime_call;
  model::TimeNs last_runtime_call_ns = 0;
  bool has_range = false;
  std::string range;
  model::TimeNs range_start_ns = 0;
  model::TimeNs range_end_ns = 0;  // for range_open, against the run's last end
  bool has_process = false;        // a process of that rank: `pending` is its
  PendingLaunches pending;
};

// A part's states, one per probe in the probes' order, and its events' last end.
struct CulpritStatesPart {
  model::TimeNs events_end_ns = INT64_MIN;  // INT64_MIN: no events
  std::vector<CulpritStatePart> states;
};

// The waits the collectives show, their culprits, victims, `since` and longest wait, into
// an empty report (its evidence kTrace); whether there are any (none: the report stays empty).
bool FindTraceCulprits(const CollectiveSummary& collectives, const HangOptions& options,
                       HangReport* report);
// Trace evidence's culprits (ascending) and their `since`; none for other evidence.
std::vector<CulpritProbe> CulpritProbes(const HangReport& report);
CulpritStatesPart ReadCulpritStates(const model::Trace& part,
                                    const std::vector<CulpritProbe>& probes,
                                    const HangOptions& options = {});
// The culprits' states from every part's (plan order): each field the latest of the
// parts' (the later part's on a tie, as the joined trace's later event wins), the range
// open when it ends at the run's last end, the pending launches of the first part with a
// process of that rank, the last sequence from the collectives. Every part must hold one
// state per culprit of the report, in its order; else an error.
base::Status SetCulpritStates(const std::vector<CulpritStatesPart>& parts,
                              const CollectiveSummary& collectives, HangReport* report);
// A part's stalled steps (a distributed run: each process reads its parts', as a thread's
// steps and its process's launches and open ranges are its part's own), in FindHang's
// order: by thread index, then step.
std::vector<StalledStep> ReadStalledSteps(const model::Trace& part,
                                          const HangOptions& options = {});
// Every part's stalled steps (plan order) into a report without other evidence: appended in
// order (the joined trace's threads are the parts', part after part), the report's `since`,
// longest wait, culprits, victims and states as FindHang sets them; its evidence
// kStalledStep when there are any, else it stays empty.
void SetStalledSteps(const std::vector<std::vector<StalledStep>>& parts, HangReport* report);
// FindHang with the collectives summarized, the culprits' states and the stalled steps
// read elsewhere: the states from `parts` when the trace's collectives show the hang (and
// `probes`, those the parts were read for, are the report's: else an error); else the
// Flight Recorder's and the logs' evidence from the trace, and failing those the stalled
// steps from `stalled` (by part).
base::StatusOr<HangReport> FindHang(const model::Trace& trace, const CollectiveSummary& collectives,
                                    const std::vector<CulpritProbe>& probes,
                                    const std::vector<CulpritStatesPart>& parts,
                                    const std::vector<std::vector<StalledStep>>& stalled,
                                    const HangOptions& options = {});

// The first field where two reports differ ("" when none), as "what: a against b".
std::string HangDifference(const HangReport& a, const HangReport& b);

// The collective the stalled steps' waiting ranks are in ("" when none waits in one).
std::string_view StalledCollective(const HangReport& report);

PendingLaunches FindPendingLaunches(const model::Trace& trace, model::ProcessIndex process,
                                    const HangOptions& options = {});

}  // namespace teller::cause
