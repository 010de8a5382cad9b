#include "reconstruct/call_chain_builder.h"

#include <algorithm>

#include "reconstruct/build_state.h"

namespace teller::reconstruct {
namespace internal {

base::Status CheckTables(const model::Trace& trace) {
  const model::EventTable& e = trace.events;
  size_t n = e.size();
  if (e.phase.size() != n || e.flags.size() != n || e.name.size() != n || e.process.size() != n ||
      e.thread.size() != n || e.start_ns.size() != n || e.dur_ns.size() != n || e.id.size() != n ||
      e.correlation.size() != n || e.args_begin.size() != n || e.args_count.size() != n) {
    return base::InvalidArgument(
        "reconstruct: event table columns have different lengths "
        "(layer has {} rows)",
        n);
  }
  if (n >= kNone) return base::InvalidArgument("reconstruct: {} events is over the limit", n);
  size_t threads = trace.threads.size();
  size_t processes = trace.processes.size();
  if (trace.threads.is_device.size() != threads || trace.processes.rank.size() != processes ||
      trace.processes.clock_offset_ns.size() != processes ||
      trace.processes.clock_uncertainty_ns.size() != processes) {
    return base::InvalidArgument("reconstruct: thread or process table columns differ in length");
  }
  for (size_t t = 0; t < threads; ++t) {
    if (trace.threads.process[t].value() >= processes) {
      return base::InvalidArgument("reconstruct: thread {} names process {} of {}", t,
                                   trace.threads.process[t].value(), processes);
    }
  }
  for (size_t row = 0; row < n; ++row) {
    if (e.thread[row].value() >= threads || e.process[row].value() >= processes) {
      return base::InvalidArgument(
          "reconstruct: event {} names thread {} / process {}; the trace has {} threads and "
          "{} processes",
          row, e.thread[row].value(), e.process[row].value(), threads, processes);
    }
  }
  for (size_t c = 0; c < trace.collectives.size(); ++c) {
    if (trace.collectives.event[c].value() >= n) {
      return base::InvalidArgument("reconstruct: collective {} names event {} of {}", c,
                                   trace.collectives.event[c].value(), n);
    }
  }
  if (trace.logs.step.size() != trace.logs.size() ||
      trace.logs.alignment.size() != trace.logs.size()) {
    return base::InvalidArgument("reconstruct: log table columns differ in length");
  }
  return base::OkStatus();
}

}  // namespace internal

namespace {

constexpr uint64_t kStages = 8;  // progress steps of a build

// Stages 2 to 6, after the cross-rank pass. A part leaves out matching collective
// kernels by step order: it needs every rank's steps.
void BuildAfterCrossRank(model::Trace* trace, const BuildOptions& options,
                         bool match_by_step_order) {
  using namespace internal;  // NOLINT: the stages of this file
  base::ProgressSink* progress = options.progress;
  base::ReportProgress(progress, "reconstruct", 2, kStages);
  BuildState state;
  GroupByThread(*trace, &state);
  base::ReportProgress(progress, "reconstruct", 3, kStages);
  NestHostEvents(trace, &state);
  BindDeviceWork(trace, &state);
  base::ReportProgress(progress, "reconstruct", 4, kStages);
  DetectSteps(trace, &state);
  base::ReportProgress(progress, "reconstruct", 5, kStages);
  BuildStepTrees(trace, options, &state);
  if (match_by_step_order) MatchCollectivesByStepOrder(trace);
  base::ReportProgress(progress, "reconstruct", 6, kStages);
  BuildRequests(trace, state);
  base::ReportProgress(progress, "reconstruct", 7, kStages);
  AlignLogs(trace, options);
  base::ReportProgress(progress, "reconstruct", kStages, kStages);
  if (progress) progress->Finish("reconstruct");
  trace->reconstructed = true;
}

bool HasUnpairedBegin(const model::EventTable& events) {
  return std::find(events.phase.begin(), events.phase.end(), model::EventPhase::kBegin) !=
         events.phase.end();
}

}  // namespace

base::Status BuildCallChains(model::Trace* trace, const BuildOptions& options) {
  if (trace->reconstructed) {
    return base::InvalidArgument("reconstruct: the trace was reconstructed already");
  }
  TELLER_RETURN_IF_ERROR(internal::CheckTables(*trace));
  base::ReportProgress(options.progress, "reconstruct", 0, kStages);
  internal::PairRanges(trace);
  base::ReportProgress(options.progress, "reconstruct", 1, kStages);
  const CrossRankPlan plan =
      MatchCollectiveRecords({ExtractCollectiveRecords(*trace)}, options.align_clocks);
  TELLER_RETURN_IF_ERROR(ApplyCrossRankPart(plan.parts[0], trace));
  RecordCrossRankCounters(plan, trace);
  BuildAfterCrossRank(trace, options, /*match_by_step_order=*/true);
  return base::OkStatus();
}

base::Status BuildCallChainsOfPart(model::Trace* part, const CrossRankPlan::Part& plan,
                                   const BuildOptions& options) {
  if (part->reconstructed) {
    return base::InvalidArgument("reconstruct: the trace was reconstructed already");
  }
  TELLER_RETURN_IF_ERROR(internal::CheckTables(*part));
  if (HasUnpairedBegin(part->events)) {
    return base::InvalidArgument("reconstruct: the part has unpaired ranges; run PreparePart");
  }
  TELLER_RETURN_IF_ERROR(ApplyCrossRankPart(plan, part));
  BuildAfterCrossRank(part, options, /*match_by_step_order=*/false);
  return base::OkStatus();
}

}  // namespace teller::reconstruct
