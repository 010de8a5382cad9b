// Call-chain reconstruction: normalized events -> ranges -> host/device binding ->
// one call-chain tree per engine step -> requests -> aligned logs, plus the
// horizontal view (collectives matched across ranks, clock offsets per host).
// docs/reconstruct.md describes each stage, its counters and its invariants.
#pragma once

#include <cstdint>
#include <vector>

#include "base/progress.h"
#include "base/status.h"
#include "model/trace.h"
#include "reconstruct/cross_rank.h"

namespace teller::reconstruct {

struct BuildOptions {
  // A log line this far outside a step's [start, end] still aligns to it by time.
  int64_t log_window_ns = 50'000'000;
  // Hang top-level host work of the step process's other threads under the step
  // whose window it starts in (else only the step's own thread is used).
  bool attach_other_threads = true;
  // Estimate a clock offset per host from matched collective end times and shift
  // that host's events and logs by it.
  bool align_clocks = true;
  // First ordinal of the steps of each process (by process index; missing entries
  // start at 0), for steps whose input gives no number. A windowed build passes the
  // steps earlier windows numbered, so numbers continue across windows.
  std::vector<int64_t> step_ordinal_base;
  base::ProgressSink* progress = nullptr;
};

// Fills trace->nodes, steps, step_requests, requests, collective_matches,
// logs.step / logs.alignment, processes.clock_offset_ns / clock_uncertainty_ns
// and reconstruct_* counters, and sets trace->reconstructed. Paired kBegin events
// become kComplete and their kEnd partners get kFlagConsumed. Bad or inconsistent
// events are counters, never errors; an error means the tables themselves are
// unusable (ragged columns, indexes out of range) or the trace was built already.
base::Status BuildCallChains(model::Trace* trace, const BuildOptions& options = {});

// The same for one part of a run (some of its processes), prepared by PreparePart,
// with the cross-rank results taken from its share of the plan (cross_rank.h) instead of
// computed. Collective kernels without a collective row are not matched by step order
// here (that needs every rank's steps): run the step-order pass of cross_rank.h over the
// built parts. Requests and log lines are built from the part's own steps only. The
// run's cross-rank counters and notes are in the plan (RecordCrossRankCounters), not in
// the part.
base::Status BuildCallChainsOfPart(model::Trace* part, const CrossRankPlan::Part& plan,
                                   const BuildOptions& options = {});

}  // namespace teller::reconstruct
