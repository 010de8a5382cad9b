// The analysis in parts (docs/fleet.md, "What each process does"): each process of a
// distributed run reconstructs, features and measures the units it imported, and only
// small summaries cross to the first process, which fits the deviation map from every
// unit's rows. Transport-free: each phase is bytes in and bytes out, which
// fleet_open_mpi.cc moves over MPI and the tests in memory.
//
// Each unit is one part, and parts go in plan order (the order the joined trace appends
// them). Per phase, what every process (a PartsOwner, the first one included) sends and
// what the first (the PartsMerger) answers:
//   1. kCollectives: each part prepared, its collective records (reconstruct/cross_rank.h)
//      -> a bundle's unranked processes numbered as the join numbers them, then to each
//      process its parts' shares of the run's CrossRankPlan (their new ranks included);
//   2. kStepOrder: each part built from its share (BuildCallChainsOfPart), its step-order
//      records -> to each process its parts' shares of the StepOrderPlan;
//   3. kSummaries: the step-order matches applied, each part's step-feature summary
//      (localize/step_features_parts.h), measurement summary (cause/step_measurements.h)
//      and its collectives for the hang scan (cause::SummarizeCollectives)
//      -> the two merged summaries, the site of the first out-of-memory message in the
//      first process's log lines (cause::OomSite: its GPU and time, SetLogLines) and the
//      hang's culprits found from the merged collectives with their `since` and the
//      thresholds of a pending launch and a stalled step (cause::HangQuery,
//      SetHangOptions), the same to every process;
//   4. kMeasurements: each part's features finished and its steps measured, its
//      measurement rows, its findings' rows (localize/feature_rows.h), its request rows
//      (reconstruct/request_rows.h), its crash scan (cause/crash_report.h) and its memory
//      samples for the site (cause::SummarizeMemoryTrend), its culprits' states
//      (cause::ReadCulpritStates) and its stalled steps (cause::ReadStalledSteps) -> the
//      first process appends every part's rows of each kind in plan order (the request rows merged
//      by request id), fits the map from them (MapFromParts), scores the findings from them
//      (FeatureRowsFromParts, diagnose::DiagnoseOptions::feature_rows), collects the abnormal
//      requests from them (RequestRowsFromParts, DiagnoseOptions::request_rows), aligns the log
//      lines on them (LogsAlignedOnParts), finds the request causes on both
//      (RequestCausesFromParts, DiagnoseOptions::request_causes), takes the earliest crash
//      (CrashFromParts) and
//      merges the memory trend before the out-of-memory message, which with the aligned
//      lines and the rows gives the out-of-memory report (OomFromParts), and the
//      culprits' states or the stalled steps (HangFromParts, with the waits from the third
//      phase's collectives); it fits the causes on the map (cause::AnalyzeCauses,
//      SetCauseOptions) and answers every process the groups the impact replay of the
//      shown causes reads (cause::ReplayGroupsOf);
//   5. kReplay: each part's replay graph of those groups (cause/replay_graph.h) -> no
//      answer: the first process appends them in plan order (ReplayGraphFromParts,
//      diagnose::DiagnoseOptions::replay_graph).
// From the plans of phases 1 and 2 it also records the run's reconstruction counters and
// notes (RecordRunCounters).
// Any message may be a give-up (GiveUpMessage): a process whose part fails sends one, and
// the first process answers every process with one when it gives up (a process lost, a
// message that does not decode); everyone stops there, and the diagnosis builds its map
// and its findings' rows from the joined trace.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "cause/crash_report.h"
#include "cause/deviation_map.h"
#include "cause/hang_report.h"
#include "cause/hang_summary_wire.h"
#include "cause/hypotheses.h"
#include "cause/oom_report.h"
#include "cause/replay_graph.h"
#include "cause/step_measurements.h"
#include "diagnose/cause_operators.h"
#include "import/import_inputs.h"
#include "localize/feature_rows.h"
#include "localize/step_features_parts.h"
#include "model/trace.h"
#include "reconstruct/cross_rank.h"
#include "reconstruct/request_rows.h"

namespace teller::fleet {

enum class AnalysisPhase : uint32_t {
  kCollectives = 1,
  kStepOrder,
  kSummaries,
  kMeasurements,
  kReplay
};
inline constexpr AnalysisPhase kAnalysisPhases[] = {
    AnalysisPhase::kCollectives, AnalysisPhase::kStepOrder, AnalysisPhase::kSummaries,
    AnalysisPhase::kMeasurements, AnalysisPhase::kReplay};
// Whether the first process answers the phase's messages (all but the last).
bool PhaseHasAnswer(AnalysisPhase phase);
// How many encoded buffers a unit's message of the phase holds.
size_t PayloadsPerUnit(AnalysisPhase phase);

inline constexpr uint32_t kAnalysisWireVersion = 9;

// A message that says its sender gave up the analysis in parts, and why.
std::string GiveUpMessage(std::string_view why);
// The reason a give-up message gives; nothing for any other message.
std::optional<std::string> GiveUpReason(std::string_view message);

// One process's side: its parts, kept between the phases.
class PartsOwner {
 public:
  // The units this process imported (plan indexes, ascending) and their traces as
  // imported (not reconstructed), one per unit.
  PartsOwner(std::vector<uint32_t> units, std::vector<model::Trace> parts);

  // The phase's message, from the first process's answer to the previous phase (none
  // before the first); a give-up when a part fails or the answer is not whole.
  std::string Message(AnalysisPhase phase, std::string_view answer);

  size_t steps() const;  // of every part, once built

 private:
  base::StatusOr<std::string> CollectivesMessage();
  base::StatusOr<std::string> StepOrderMessage(std::string_view answer);
  base::StatusOr<std::string> SummariesMessage(std::string_view answer);
  base::StatusOr<std::string> MeasurementsMessage(std::string_view answer);
  base::StatusOr<std::string> ReplayMessage(std::string_view answer);

  // What a part's replay graph reads besides the part: its nodes' cells and its events'
  // matches in the run.
  struct ReplayInputs {
    std::vector<cause::NodeCell> node_cells;
    std::vector<int32_t> match_of_event;
  };

  std::vector<uint32_t> units_;
  std::vector<model::Trace> parts_;
  std::vector<localize::LocalStepFeatures> local_features_;  // phases 3 to 4
  std::vector<ReplayInputs> replay_inputs_;                  // phases 4 to 5
};

// Each unit's bundle: its file in the plan when it is a bundle's process folder, else -1
// (for PartsMerger, which numbers a bundle's unranked processes as the join does).
std::vector<int32_t> UnitBundles(const import::ImportPlan& plan);

// The first process's side.
class PartsMerger {
 public:
  // `unit_bundle`: each unit's bundle (UnitBundles); none: no unit is a bundle's.
  explicit PartsMerger(size_t processes, std::vector<int32_t> unit_bundle = {})
      : processes_(processes), unit_bundle_(std::move(unit_bundle)) {}

  // The answer to each process (by process) from every process's message of the phase
  // (by process): none for the last phase. Once given up, a give-up to each.
  std::vector<std::string> Answer(AnalysisPhase phase, const std::vector<std::string>& messages);

  // The first process's log lines as imported (not shifted; their text in `strings`), for
  // the out-of-memory site; both must outlive the third phase. None: no site.
  void SetLogLines(const model::LogTable* logs, const base::StringPool* strings) {
    logs_ = logs;
    strings_ = strings;
  }

  // The thresholds the third phase finds the hang's culprits with (the diagnosis's); the
  // defaults unless set.
  void SetHangOptions(const cause::HangOptions& options) { hang_options_ = options; }

  // The options the fourth phase fits the map and the causes with, for the groups the
  // impact replay reads (the diagnosis's); the defaults unless set.
  void SetCauseOptions(const cause::DeviationOptions& deviation, const cause::CauseOptions& causes) {
    deviation_options_ = deviation;
    cause_options_ = causes;
  }

  // Stops the analysis (a process lost): every later answer is a give-up.
  void GiveUp(std::string why);
  bool gave_up() const { return !why_.empty(); }
  const std::string& why() const { return why_; }

  // Whether the fourth phase's rows were taken (and none given up since).
  bool finished() const { return finished_; }
  // After the fourth phase: every part's rows appended in plan order, and their units.
  const cause::StepMeasurements& rows() const { return rows_; }
  const localize::FeatureRows& feature_rows() const { return feature_rows_; }
  // Every part's request rows merged by request id.
  const reconstruct::RequestRows& request_rows() const { return request_rows_; }
  // The earliest of the parts' crashes (cause::MergeCrashReports).
  const cause::CrashReport& crash() const { return crash_; }
  // The site sent in the third phase, and the trend merged from the parts' samples there.
  const cause::OomSite& oom_site() const { return oom_site_; }
  const cause::MemoryTrend& memory_trend() const { return memory_trend_; }
  // Every part's collectives for the hang scan merged in plan order
  // (cause::MergeCollectiveSummary), the culprits and thresholds sent in the third phase,
  // every part's states of them and every part's stalled steps (plan order).
  const cause::CollectiveSummary& collectives() const { return collectives_; }
  const cause::HangQuery& hang_query() const { return hang_query_; }
  const std::vector<cause::CulpritStatesPart>& culprit_states() const { return culprit_states_; }
  const std::vector<std::vector<cause::StalledStep>>& stalled_steps() const {
    return stalled_steps_;
  }
  const std::vector<uint32_t>& units() const { return units_; }
  // After the last phase: the groups asked for in the fourth, and every part's replay
  // graph of them appended in plan order (once received, and none given up since).
  bool has_replay_graph() const { return finished_ && has_replay_graph_; }
  const std::vector<int64_t>& replay_groups() const { return replay_groups_; }
  const cause::ReplayGraph& replay_graph() const { return replay_graph_; }
  // The causes fitted in the fourth phase for those groups (before the impact replay), on
  // the map of these options from rows(); null unless fitted with these options (the
  // threads aside), so that the diagnosis need not fit them again.
  const cause::CauseAnalysis* FittedCauses(const cause::DeviationOptions& deviation,
                                           const cause::CauseOptions& causes) const;
  // After the last phase: the operators of the causes the diagnosis shows (the fitted
  // causes' first max_alternatives + 1 and the second), named by the processes that hold
  // their ranks (diagnose/cause_operators.h) and merged.
  const std::vector<diagnose::OperatorsOfCause>& cause_operators() const {
    return cause_operators_;
  }

  // After the first phase: the clock offsets of the parts' joined trace (JoinedShare).
  const reconstruct::CrossRankPlan::Part& joined_share() const { return joined_share_; }
  // After the second phase: the run's reconstruction counters and notes of the collective
  // and step-order matches, set on the trace that reports the run (RecordCrossRankCounters,
  // RecordStepOrderCounters).
  void RecordRunCounters(model::Trace* trace) const;

 private:
  struct Received;
  base::StatusOr<Received> Receive(AnalysisPhase phase, const std::vector<std::string>& messages,
                                   size_t payloads_per_unit);
  std::vector<int32_t> BundlesOf(const std::vector<uint32_t>& units) const;  // by part
  base::StatusOr<std::vector<std::string>> AnswerCollectives(const Received& received);
  base::StatusOr<std::vector<std::string>> AnswerStepOrder(const Received& received);
  base::StatusOr<std::vector<std::string>> AnswerSummaries(const Received& received);
  base::Status TakeMeasurements(const Received& received);
  std::vector<std::string> AnswerReplayGroups();
  base::Status TakeReplayGraphs(const Received& received);

  size_t processes_;
  std::vector<int32_t> unit_bundle_;  // by unit
  std::string why_;
  std::vector<uint32_t> units_;                 // every part's unit, ascending
  std::vector<std::vector<uint32_t>> owned_;    // by process: its units, ascending
  uint32_t first_step_order_match_ = 0;
  reconstruct::CrossRankPlan cross_rank_;  // counters and notes; no parts
  reconstruct::CrossRankPlan::Part joined_share_;
  reconstruct::StepOrderPlan step_order_;  // counters; no parts
  cause::StepMeasurements rows_;
  localize::FeatureRows feature_rows_;
  reconstruct::RequestRows request_rows_;
  cause::CrashReport crash_;
  const model::LogTable* logs_ = nullptr;
  const base::StringPool* strings_ = nullptr;
  cause::OomSite oom_site_;
  cause::MemoryTrend memory_trend_;
  cause::CollectiveSummary collectives_;
  cause::HangOptions hang_options_;
  cause::HangQuery hang_query_;
  std::vector<cause::CulpritStatesPart> culprit_states_;
  std::vector<std::vector<cause::StalledStep>> stalled_steps_;
  cause::DeviationOptions deviation_options_;
  cause::CauseOptions cause_options_;
  // The run's steps and nodes before each part, and in all (ConcatReplayGraphs).
  std::vector<uint32_t> steps_before_, nodes_before_;
  std::vector<int64_t> replay_groups_;
  std::optional<cause::CauseAnalysis> fitted_causes_;
  std::vector<const cause::Hypothesis*> asked_causes_;  // into fitted_causes_
  std::vector<diagnose::OperatorsOfCause> cause_operators_;
  cause::ReplayGraph replay_graph_;
  bool has_replay_graph_ = false;
  bool finished_ = false;
};

// Whether rows stand for the joined trace's steps: one row per step in the same order
// (so MapStep::step indexes the joined trace), each of the same process, rank, number,
// start and serving, the same processes, step requests and "tokens" arg. The error says
// where they part (a bundle whose unranked processes the join numbers, a log line that
// interned "tokens").
base::Status CheckRowsAreTheJoinedSteps(const cause::StepMeasurements& rows,
                                        const model::Trace& joined);

// The map fitted from the parts' rows, when they stand for the joined trace: the merger
// did not give up, its units are the ones joined (`joined_units`, ascending), and
// CheckRowsAreTheJoinedSteps passes. Else why the map must come from the joined trace.
base::StatusOr<cause::DeviationMap> MapFromParts(const PartsMerger& merger,
                                                 const model::Trace& joined,
                                                 const std::vector<uint32_t>& joined_units,
                                                 const cause::DeviationOptions& options);

// Whether findings' rows stand for the joined trace's steps: one row per step in the same
// order, each of the same rank, number, global step, phase, name, batch bucket, requests,
// start, duration and first node, and as many nodes (so a finding's step and suspects index
// the joined trace).
base::Status CheckFeatureRowsAreTheJoinedSteps(const localize::FeatureRows& rows,
                                               const model::Trace& joined);

// The findings' rows of every part, when they stand for the joined trace: MapFromParts'
// conditions and CheckFeatureRowsAreTheJoinedSteps. Else why the diagnosis must make them
// from the joined trace.
base::StatusOr<localize::FeatureRows> FeatureRowsFromParts(
    const PartsMerger& merger, const model::Trace& joined,
    const std::vector<uint32_t>& joined_units);

// Every part's request rows merged, when they stand for the joined trace: MapFromParts'
// conditions and reconstruct::CheckRequestRowsAreTheTrace. Else why the diagnosis must
// make them from the joined trace.
base::StatusOr<reconstruct::RequestRows> RequestRowsFromParts(
    const PartsMerger& merger, const model::Trace& joined,
    const std::vector<uint32_t>& joined_units);

// The crash merged from the parts' scans, when it is the joined trace's: the merger
// finished with the joined units, and cause::FindCrash on the joined trace finds the same
// (the first process still holds it). Else why the diagnosis must scan the joined trace.
base::StatusOr<cause::CrashReport> CrashFromParts(const PartsMerger& merger,
                                                  const model::Trace& joined,
                                                  const std::vector<uint32_t>& joined_units);

// The out-of-memory report from the parts: the first message of the first process's log
// lines aligned on the parts' request rows (`aligned`: LogsAlignedOnParts; their text in
// `strings`), its step's number from the merged findings' rows and its requests from the
// merged request rows, the memory trend before it merged from the parts' samples
// (cause::FindOom over lines, nothing of the joined trace); when it is the joined trace's:
// the merger finished with the joined units, the site sent is where cause::FindOom on the
// joined trace finds a message, and the report is the same, field for field
// (cause::OomDifference). Else why the diagnosis must scan the joined trace.
base::StatusOr<cause::OomReport> OomFromParts(const PartsMerger& merger,
                                              const model::LogTable& aligned,
                                              const base::StringPool& strings,
                                              const model::Trace& joined,
                                              const std::vector<uint32_t>& joined_units,
                                              const cause::OomOptions& options);

// The request causes found from the parts: cause::FindRequestCauses with `options` over the
// merged request rows, the findings' rows (each step's phase, number and global step) and
// the first process's log lines aligned on them (`aligned`: LogsAlignedOnParts; their text
// in `strings`), nothing of the joined trace; when they are the joined trace's: the merger
// finished with the joined units, and the causes found on the joined trace are the same,
// hypothesis for hypothesis, field for field (cause::RequestCausesDifference). Else why the
// diagnosis must find them on the joined trace.
base::StatusOr<std::vector<cause::Hypothesis>> RequestCausesFromParts(
    const PartsMerger& merger, const model::LogTable& aligned, const base::StringPool& strings,
    const model::Trace& joined, const std::vector<uint32_t>& joined_units,
    const cause::CauseOptions& options);

// The hang scan with the waits, culprits and victims found from the parts' collectives,
// the culprits' states and the stalled steps from the parts' (cause::FindHang over
// merger.collectives(), merger.culprit_states() and merger.stalled_steps(), when the
// culprits sent are the ones found with `options` and the parts read with its thresholds;
// the Flight Recorder's and the log evidence still read on the joined trace), when it is
// the joined trace's: the merger
// finished with the joined units, and cause::FindHang on the joined trace finds the same,
// field for field (cause::HangDifference). Else why the diagnosis must scan the joined trace.
base::StatusOr<cause::HangReport> HangFromParts(const PartsMerger& merger,
                                                const model::Trace& joined,
                                                const std::vector<uint32_t>& joined_units,
                                                const cause::HangOptions& options);

// Every part's replay graph of the groups asked for, when it is the joined trace's: the
// merger finished with the joined units, and the graph cut from the joined trace (with
// `features`, its step features) for those groups is the same, column for column
// (cause::ReplayGraphDifference). Else why the diagnosis must replay on the joined trace.
base::StatusOr<cause::ReplayGraph> ReplayGraphFromParts(const PartsMerger& merger,
                                                        const model::Trace& joined,
                                                        const std::vector<uint32_t>& joined_units,
                                                        const localize::StepFeatures& features);

// The log lines as imported on the first process (the joined trace's before its
// reconstruction: `logs`, their strings in `strings`) shifted by the run's clock offsets
// and aligned on every part's request rows (reconstruct::AlignLogsToRows), as
// reconstruction aligns them on the joined trace; an error when the analysis in parts did
// not finish.
base::StatusOr<model::LogTable> LogsAlignedOnParts(const PartsMerger& merger, model::LogTable logs,
                                                   const base::StringPool& strings,
                                                   int64_t log_window_ns);

// Whether log lines aligned elsewhere are the joined trace's: the same times, steps and
// alignments. The error names the first line that differs.
base::Status CheckLogsAreTheJoinedTrace(const model::LogTable& logs, const model::Trace& joined);

// Whether the run's counters and notes recorded from the plans (RecordRunCounters) are
// the joined trace's reconstruction counters and among its notes.
base::Status CheckRunCountersAreTheJoinedTrace(const PartsMerger& merger,
                                               const model::Trace& joined);

}  // namespace teller::fleet
