// The cross-rank pass of reconstruction as its own data, so that a part of a trace
// (some of its processes) can be reconstructed apart from the others:
//   1. each part: PreparePart, then ExtractCollectiveRecords (small: one row per
//      collective row, one per process);
//   2. one place: MatchCollectiveRecords over every part's records -> CrossRankPlan
//      (collective matches, clock offsets, the run's counters and notes);
//   3. each part: BuildCallChainsOfPart (call_chain_builder.h) with its Part of the plan;
//      then, on the reporting trace, RecordCrossRankCounters;
//   4. each built part: ExtractStepOrderRecords (one row per collective kernel without a
//      collective row);
//   5. one place: MatchStepOrderRecords over every part's records, from
//      FirstStepOrderMatchId(plan) -> StepOrderPlan;
//   6. each part: ApplyStepOrderMatches with its share; on the reporting trace,
//      RecordStepOrderCounters.
// BuildCallChains runs the same passes over one part, the whole trace.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/trace.h"

namespace teller::reconstruct {

// What matching and clock alignment read of one part. Names are indexes into the
// records' own `names` (parts have different string pools); the communicators come
// first there, in the order of the part's string ids, so that match ids number the
// same as in the joined trace.
struct CollectiveRecords {
  static constexpr uint32_t kNoName = UINT32_MAX;
  std::vector<std::string> names;

  // Per process of the part, by process index. host: kNoName when unknown. pid and
  // has_events: for numbering a bundle's unranked processes (NumberUnrankedProcesses).
  std::vector<int32_t> process_rank;
  std::vector<uint32_t> process_host;
  std::vector<int32_t> process_node;
  std::vector<int64_t> process_pid;
  std::vector<uint8_t> process_has_events;

  // Per collective row that is not a range's end, in the part's collective order.
  std::vector<uint32_t> collective;    // the row in the part's collectives table
  std::vector<uint32_t> communicator;  // name (kNoName: none)
  std::vector<uint32_t> op;            // name (kNoName: none)
  std::vector<int64_t> sequence;       // -1 unknown
  std::vector<uint32_t> process;       // the part's process index
  std::vector<int64_t> start_ns;
  std::vector<int64_t> end_ns;
  std::vector<uint8_t> host_side;  // 0: on a device track, 1: on a host thread

  size_t size() const { return collective.size(); }
};

// What the joined run would set once for the whole run.
struct CrossRankCounters {
  int64_t matches = 0;
  int64_t unmatched = 0;
  int64_t matched_by_order = 0;
  int64_t order_op_mismatch = 0;
  int64_t unaligned_hosts = 0;
};

struct CrossRankPlan {
  struct Part {
    // Per process of the part: its rank, when the run numbered some of the part's
    // unranked processes (NumberUnrankedProcesses); empty: the ranks as imported.
    std::vector<int32_t> process_rank;
    // Per process of the part: added to its times, its uncertainty, and whether the
    // alignment moved it (not the reference host, reached by matches). All empty when
    // no alignment ran: every offset is 0.
    std::vector<int64_t> clock_offset_ns;
    std::vector<int64_t> clock_uncertainty_ns;
    std::vector<uint8_t> clock_aligned;
    // Every known rank of the run, ascending, and its offset: for log lines that name
    // a rank but no process of the part.
    std::vector<int32_t> rank;
    std::vector<int64_t> rank_clock_offset_ns;
    // The part's rows of the collective match table, in the joined table's order;
    // match ids are numbered across the run.
    std::vector<model::CollectiveMatchId> match;
    std::vector<uint32_t> match_collective;  // the row in the part's collectives table
  };
  std::vector<Part> parts;  // in the order of the records given
  CrossRankCounters counters;
  std::vector<std::string> notes;  // the clock alignment's notes
};

// Checks a part's tables and pairs its ranges (reconstruction's stages 0 and 1). Run
// it once, before ExtractCollectiveRecords and BuildCallChainsOfPart.
base::Status PreparePart(model::Trace* part);

// The records of a prepared part.
CollectiveRecords ExtractCollectiveRecords(const model::Trace& part);

// Whether records that crossed a process boundary are whole: columns of one length,
// process and name indexes in range. MatchCollectiveRecords expects checked records.
base::Status CheckCollectiveRecords(const CollectiveRecords& records);

// Numbers each bundle's unranked processes as import::BundleParts::NumberUnrankedProcesses
// numbers them on the parts' joined trace (model::AppendTrace in this order), before the
// collectives are matched (ranks decide the matches and the reference clock). `bundle`
// gives each part's bundle (-1: none; a bundle's parts are consecutive): when two or more
// of a bundle's processes have events and no rank, each gets one in (host, pid) order
// after the highest rank of the parts up to the bundle's last. Returns, per part, whether
// its ranks changed (1), for the part's share (CrossRankPlan::Part::process_rank).
std::vector<uint8_t> NumberUnrankedProcesses(const std::vector<int32_t>& bundle,
                                             std::vector<CollectiveRecords>* parts);

// Matches collectives across the parts and, when asked, estimates one clock offset
// per host, exactly as BuildCallChains does on the parts appended in this order
// (model::AppendTrace): processes number part after part.
CrossRankPlan MatchCollectiveRecords(const std::vector<CollectiveRecords>& parts,
                                     bool align_clocks);

// Writes a part's share of the plan into it: its processes' new ranks (and their log
// lines' that had none), its collective match rows, its processes'
// clock offsets, and its events and log lines shifted by them. A default Part (a part
// whose records did not reach the plan) leaves collectives unmatched and clocks as
// they are.
base::Status ApplyCrossRankPart(const CrossRankPlan::Part& plan, model::Trace* part);

// Sets the run's cross-rank counters and notes on the trace that reports the run.
void RecordCrossRankCounters(const CrossRankPlan& plan, model::Trace* trace);

// The share of the parts appended in plan order (model::AppendTrace): every part's
// processes' clock offsets in order, and the ranks' offsets; no collective matches.
CrossRankPlan::Part JoinedShare(const CrossRankPlan& plan);

// Shifts log lines as ApplyCrossRankPart shifts its part's: by the offset of the line's
// process (an index of the share's processes), else of its rank; none without offsets.
void ShiftLogLines(const CrossRankPlan::Part& plan, model::LogTable* logs);

// What matching by step order reads of one built part: its COMM-layer events that have
// no collective row, in steps with a global step (device kernels; in a step with none,
// the outermost host COMM ranges). Names index the records' own `names`.
struct StepOrderRecords {
  std::vector<std::string> names;
  uint32_t processes = 0;  // the part's process count

  // Per such event, by (global step, rank or process, start, row).
  std::vector<int64_t> global_step;
  std::vector<int32_t> rank;      // the step's process's rank, -1 unknown
  std::vector<uint32_t> process;  // the step's process, the part's index
  std::vector<int64_t> start_ns;
  std::vector<uint32_t> event;  // the part's event row
  std::vector<uint32_t> name;

  size_t size() const { return event.size(); }
};

struct StepOrderPlan {
  struct Part {
    // The part's new rows of the collective match table, in the joined table's order.
    std::vector<model::CollectiveMatchId> match;
    std::vector<uint32_t> event;  // the part's event row
  };
  std::vector<Part> parts;  // in the order of the records given
  int64_t matched = 0;      // matches made
  int64_t skipped = 0;      // events of steps whose ranks' name sequences differ
};

// The records of a part built by BuildCallChainsOfPart.
StepOrderRecords ExtractStepOrderRecords(const model::Trace& part);

// Whether records that crossed a process boundary are whole: columns of one length,
// process and name indexes in range. MatchStepOrderRecords expects checked records.
base::Status CheckStepOrderRecords(const StepOrderRecords& records);

// The id after the plan's last match: where step-order matches start.
uint32_t FirstStepOrderMatchId(const CrossRankPlan& plan);

// Matches the parts' events by (global step, ordinal in the rank's step) where every
// rank of the step ran the same sequence of names, exactly as BuildCallChains does on
// the parts appended in this order; ids count up from first_match_id.
StepOrderPlan MatchStepOrderRecords(const std::vector<StepOrderRecords>& parts,
                                    uint32_t first_match_id);

// Appends a part's share of the plan to its collective match table.
base::Status ApplyStepOrderMatches(const StepOrderPlan::Part& plan, model::Trace* part);

// Adds the run's step-order counters to the trace that reports the run (after
// RecordCrossRankCounters).
void RecordStepOrderCounters(const StepOrderPlan& plan, model::Trace* trace);

}  // namespace teller::reconstruct
