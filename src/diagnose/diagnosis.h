// The first diagnosis (before the learned model): localization -> causal-context
// slices -> ranked abnormal steps and requests, suspect operator families with
// their evidence, and a fault category from transparent rules over that evidence.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/progress.h"
#include "base/status.h"
#include "base/tuning.h"
#include "cause/crash_report.h"
#include "cause/deviation_map.h"
#include "cause/hang_report.h"
#include "cause/hypotheses.h"
#include "cause/instance_peers.h"
#include "cause/oom_report.h"
#include "cause/replay_graph.h"
#include "diagnose/log_reading.h"
#include "localize/baseline.h"
#include "localize/feature_rows.h"
#include "localize/operator_family.h"
#include "localize/step_features.h"
#include "model/fault_category.h"
#include "model/trace.h"
#include "reconstruct/request_rows.h"
#include "slice/causal_slice.h"

namespace teller::diagnose {

using model::FaultCategory;
using model::FaultCategoryFromName;
using model::FaultCategoryName;
using model::kFaultCategoryCount;

struct OperatorsOfCause;

struct DiagnoseOptions {
  // Stages "features", "feature rows" (when made here), "baselines", "slices" and
  // "hypotheses" are reported here.
  base::ProgressSink* progress = nullptr;
  // Threads that score the baselines' forests and fit the causes (0: one per core); the
  // diagnosis is the same for any count.
  int threads = 0;
  // Thresholds, windows and discounts: base/tuning_list.h says what each means and where
  // it was chosen (docs/tuning.md); `teller diagnose --tune diagnose.NAME=VALUE` sets one.
  TELLER_TUNED_DIAGNOSE(TELLER_TUNED_FIELD)
  size_t max_findings = 10;
  // Features that may make a finding (bits of localize::Feature).
  // Default: count, total, mean, max, queueing and skew. Share and gaps move with
  // anything else in the step (a long prompt, a GC pause), so they make false
  // findings on the development set; they stay in phi(x) for the learned model.
  uint32_t feature_mask = localize::kAllFeatures & ~(1u << int(localize::Feature::kShare)) &
                          ~(1u << int(localize::Feature::kGapNs));
  // 0: ranks share baselines; 1: one baseline per rank; 2: both, the larger z.
  int baseline_mode = 0;
  // A finding's sustained_steps are consecutive (in step order): spikes scattered over
  // the run (GC pauses) do not add up to a fault's window.
  bool contiguous_steps = true;
  // Leave a sustained shift of a key's total time out of its baseline
  // (localize::SustainedShift): a fault lasting many steps on every rank would
  // otherwise pull the median toward itself and hide.
  bool exclude_shifts = true;
  // Shared baselines are shared by ranks of the same role (localize::RankRoles), not
  // by all ranks: pipeline stages do different work.
  bool baseline_by_role = true;
  // A family absent from comparable steps counts there as zeros
  // (localize::BaselineOptions::absent_as_zero).
  bool absent_as_zero = true;
  // Score steps that serve no request once serving has begun (dummy batches of an
  // idle data-parallel rank); before it they are warm-up and never scored.
  bool score_idle_steps = true;
  // Also score each rank against its peers in the same global step (localize/peer_scores.h).
  bool peer_scores = true;
  // Instances of a finding handed to the slice.
  size_t max_suspects = localize::kFeatureRowExamples;
  size_t max_log_lines = 8;
  // Signatures log lines are matched against; null: the built-in catalog.
  const signatures::SignatureCatalog* signatures = nullptr;
  slice::SliceOptions slice;
  // Root causes fitted to the deviation map (src/cause): they decide the verdict.
  cause::DeviationOptions deviation;
  // The trace's map fitted elsewhere with these `deviation` options (a distributed run
  // fits it from every unit's rows: fleet/analysis_parts.h), its MapStep::step indexing
  // this trace's steps; null: built here from the trace (cause::BuildDeviationMap).
  const cause::DeviationMap* deviation_map = nullptr;
  // The causes fitted on that map elsewhere with these `causes` options, before the impact
  // replay (a distributed run fits them to ask for the replay's groups:
  // fleet/analysis_parts.h, PartsMerger::FittedCauses). Used with deviation_map only;
  // null: cause::AnalyzeCauses here.
  const cause::CauseAnalysis* cause_analysis = nullptr;
  // The shown causes' operators named elsewhere (a distributed run: by the processes that
  // hold their ranks, fleet/analysis_parts.h, PartsMerger::cause_operators). A cause among
  // them (SameCause) takes its operators from there; the others are found on the trace.
  const std::vector<OperatorsOfCause>* cause_operators = nullptr;
  // The trace's findings' rows made elsewhere (a distributed run appends every unit's:
  // fleet/analysis_parts.h), their steps and nodes this trace's; used when they carry
  // max_suspects examples a row. Null: made here from the trace (localize::FeatureRowsOfPart).
  const localize::FeatureRows* feature_rows = nullptr;
  // The trace's request rows made elsewhere (a distributed run merges every unit's by
  // request id: fleet/analysis_parts.h), their steps and requests this trace's. Null: made
  // here from the trace (reconstruct::RequestRowsOfPart).
  const reconstruct::RequestRows* request_rows = nullptr;
  // The trace's crash scanned elsewhere (a distributed run merges every unit's scan:
  // fleet/analysis_parts.h), its times this trace's. Null: cause::FindCrash here.
  const cause::CrashReport* crash = nullptr;
  // The trace's first out-of-memory message found elsewhere (a distributed run: the first
  // process's lines aligned on every unit's rows, its trend merged from every unit's
  // samples: fleet/analysis_parts.h, OomFromParts), its ranks, steps and times this trace's.
  // Null: cause::FindOom here.
  const cause::OomReport* oom_report = nullptr;
  // The trace's hang scanned with its collectives summarized elsewhere (a distributed run
  // merges every unit's: fleet/analysis_parts.h, HangFromParts), its ranks and times this
  // trace's. Null: cause::FindHang here.
  const cause::HangReport* hang_report = nullptr;
  // The replay graph of the shown causes' windows cut elsewhere (a distributed run appends
  // every unit's: fleet/analysis_parts.h, ReplayGraphFromParts), its steps and nodes this
  // trace's. Used when it holds every group the impact replay reads
  // (cause::ReplayGroupsOf); null or not: cause::ReplayImpacts on the trace.
  const cause::ReplayGraph* replay_graph = nullptr;
  // The trace's request causes found elsewhere with these `causes` options (a distributed
  // run: from every unit's request rows merged, the findings' rows and the log lines aligned
  // on them: fleet/analysis_parts.h, RequestCausesFromParts). Null: cause::FindRequestCauses
  // on the trace.
  const std::vector<cause::Hypothesis>* request_causes = nullptr;
  cause::CauseOptions causes;
  // When a collective hangs and a step is stalled.
  cause::HangOptions hang;
  // Which case an out-of-memory message is (full, fragmented, outside PyTorch).
  cause::OomOptions oom;
};

// One suspicious operator family on one rank, at its worst step.
struct Finding {
  model::StepIndex step;
  int32_t rank = -1;
  int64_t step_number = -1;
  int64_t group = -1;  // the global step of its worst step
  // Its worst step lies where the verdict's cause shows (SupportsCause).
  bool supports_cause = false;
  localize::OperatorFamily family = localize::OperatorFamily::kUnnamed;
  localize::Feature feature = localize::Feature::kCount;
  // Ranking score: the mean of the (rank, family)'s top sustained_steps step z's.
  double score = 0.0;
  // The same without each window's largest z's (DiagnoseOptions::flag_trim_steps):
  // the run is abnormal when a finding's flag score reaches the threshold.
  double flag_score = 0.0;
  // Calibrated probability that it names an affected rank, step and family; -1
  // without a calibration (calibration.h).
  double probability = -1.0;
  double peak_z = 0.0;           // z of `feature` in `step`, the worst step
  double forest_score = -1.0;    // isolation forest, -1 without one
  double value = 0.0;            // feature value in the step
  double median = 0.0;           // baseline median
  int64_t baseline_samples = 0;  // steps of the baseline, or peers when against_peers
  bool against_peers = false;    // z against the ranks doing the same work in this step
  // The z is the rank's compute time as a whole against its peers' (a slow GPU);
  // this family adds the most to it. rank_excess: that time over the peers', minus 1.
  bool rank_wide = false;
  double rank_excess = 0.0;
  // Abnormal in nearly every step of the rank (score discounted): a role, not an incident.
  bool persistent = false;
  // Other steps of the rank where the same family was abnormal (step numbers).
  std::vector<int64_t> also_steps;
  // I_s: the family's instances in the step, longest first (at most max_suspects).
  std::vector<model::NodeIndex> suspects;
  slice::StepSlice slice;
};

struct AbnormalStep {
  model::StepIndex step;
  int32_t rank = -1;
  int64_t number = -1;
  double score = 0.0;  // top family z
  localize::OperatorFamily family = localize::OperatorFamily::kUnnamed;
  int64_t group = -1;  // its global step
  bool supports_cause = false;
};

struct AbnormalRequest {
  model::RequestIndex request;
  double score = 0.0;          // max over its steps
  std::vector<int64_t> steps;  // abnormal step numbers, ascending
  // (rank, global step) of each abnormal step that served it, ascending.
  std::vector<std::pair<int32_t, int64_t>> places;
  bool supports_cause = false;
};

struct CategoryVote {
  FaultCategory category = FaultCategory::kNone;
  double weight = 0.0;
  std::string reason;
};

// What the learned model (src/learn) said, when one was used: one voice of the evidence,
// shown beside the cause; the verdict is VerdictOf's alone.
struct ModelStep {
  int64_t step = -1;
  std::string request;
  double probability = 0.0;
};
struct ModelOpinion {
  bool used = false;
  bool logs_only = false;  // read log lines alone: steps are windows of lines
  std::string model;       // folder it was loaded from
  std::string reason;      // why it was not used, or a caveat
  bool abnormal = false;
  double abnormal_probability = 0.0;  // highest step probability
  double threshold = 0.5;
  std::vector<ModelStep> steps;  // at or above the threshold, highest first
  // Every step the model read: its most abnormal request's probability, in step order.
  std::vector<ModelStep> step_probabilities;
  FaultCategory category = FaultCategory::kNone;
  double category_probability = 0.0;
  std::vector<std::string> operators;  // suspect operator names, most frequent first
  // The decoder's explanation of its most abnormal step (learn/explanation_text.h);
  // "" without a decoder. Shown only when explanation_problems is empty (grounded).
  std::string explanation;
  std::vector<std::string> explanation_problems;
  int64_t records = 0;  // request steps it read
  // Share of the trace's distinct operator names (or tokens) its vocabulary lacks;
  // -1 when it read no trace. Above learn::kMaxUnknownNameShare the model is not used.
  double unknown_name_share = -1.0;
  double validation_step_f1 = -1.0;  // of the model's best epoch, -1 unknown
  double seconds = 0.0;
};

// One cell of a cause's evidence: what moved, where, against its baseline.
struct CauseEvidence {
  int32_t rank = -1;
  int64_t step = -1;
  cause::Channel channel = cause::Channel::kCompute;
  localize::OperatorFamily family = localize::OperatorFamily::kUnnamed;
  double value = 0.0;
  double expected = 0.0;
  double z = 0.0;
  bool victim = false;  // waited for the culprit
};

// An operator a cause names (cause_operators.h): the instances of its cells that moved, by
// name, and the engine steps (groups) they moved in.
struct CauseOperator {
  model::Layer layer = model::Layer::kK;
  std::string name;
  bool victim = false;          // it waited for the culprit
  bool holds_moved = false;     // a host range that grew by the moved work it holds
  bool started_later = false;   // it only started later in its steps (after slower work)
  std::vector<int64_t> groups;  // ascending
};

// A cause's operators found elsewhere (a distributed run: on the processes that hold its
// ranks; cause_operators.h, SameCause).
struct OperatorsOfCause {
  cause::Hypothesis hypothesis;
  std::vector<CauseOperator> operators;
};

// The run's root cause: a fitted hypothesis, its category and its evidence (its sentence
// and next action: cause/cause_text.h, diagnose/wording.h).
struct RootCause {
  cause::Hypothesis hypothesis;
  FaultCategory category = FaultCategory::kNone;
  std::vector<CauseEvidence> evidence;  // culprit cells first, then victims
  // Its operators: culprits first, the ranges holding moved work after the rest, then
  // those that moved in more steps first.
  std::vector<CauseOperator> operators;
  // Below the threshold, the cause because the logs' first cause confirms it: its catalog
  // label and step ("" when its own score made it the cause).
  std::string confirmed_by_log;
};

struct Diagnosis {
  // A cause with an effect above noise (or a log line naming one): the run is
  // degraded; a failed run is degraded too. The verdict (VerdictOf) is decided from this
  // and `failed`.
  bool degraded = false;
  // A log line says the job crashed or a collective timed out.
  bool failed = false;
  // No trace, logs only: the logs decide the verdict (healthy when they name no fault).
  bool logs_only = false;
  // Collectives some ranks entered and never left: who never entered them, who waited.
  cause::HangReport hang;
  // A CUDA call that returned a sticky error: the kernel most likely at fault.
  cause::CrashReport crash;
  // An out-of-memory message in the logs: the allocation, the GPU's figures, which case.
  cause::OomReport oom;
  // The causes, best first: [0] is the verdict's cause, [1] a second cause that
  // explains what the first leaves, when there is one.
  std::vector<RootCause> causes;
  // Other hypotheses, best first, with their scores and explained shares.
  std::vector<cause::Hypothesis> alternatives;
  // The candidates the verdict's cause is chosen from: the rules' first max_alternatives + 1
  // hypotheses, in the rules' order, with their evidence (diagnose/decider.h).
  std::vector<RootCause> candidates;
  // "rules": the rules' order and threshold chose; "learned": the decider (decider.h),
  // whose probability of each candidate is in candidate_probabilities.
  std::string decider = "rules";
  std::vector<double> candidate_probabilities;
  std::vector<double> alternative_probabilities;  // of `alternatives`, by the learned decider
  double decider_threshold = 0.0;                 // the learned decider's, and its file
  std::string decider_file;
  double cause_threshold = 0.0;  // CauseOptions::min_score used
  size_t max_alternatives = 0;   // CauseOptions::max_alternatives used
  // Calibrated probability that the run is degraded (faulty); -1 without a calibration.
  double degraded_probability = -1.0;
  std::string calibration;          // the calibration file used, if any
  double threshold = 0.0;           // DiagnoseOptions::finding_threshold used
  // Those on the verdict's cause's ranks and steps first, then the rest; each part highest
  // score first (OrderBySupportOfCause). Also those of each candidate (at most
  // max_findings each), so that the decider's choice finds its own.
  std::vector<Finding> findings;
  size_t max_findings = 0;          // DiagnoseOptions::max_findings used: the ones shown
  std::vector<AbnormalStep> steps;  // steps with a finding; supporting the cause first
  std::vector<AbnormalRequest> requests;  // supporting the cause first
  std::vector<LogEvidence> logs;
  FaultCategory category = FaultCategory::kNone;
  double category_probability = 0.0;  // share of the rule votes
  std::vector<CategoryVote> votes;    // all votes, largest first
  // Collection facts.
  int64_t steps_scored = 0;
  int32_t ranks = 0;  // ranks the trace's steps ran on
  // A capture without a baseline of steps: its kernel calls against their peers (ran() false
  // when the deviation map scored steps).
  cause::InstancePeerCheck peer_check;
  int64_t baseline_keys = 0;
  model::TimeNs first_abnormal_ns = 0;
  std::vector<std::string> notes;  // what the diagnosis could not see
  ModelOpinion model;              // the learned model's opinion (used = false: rules only)
  // Every tuned value the diagnosis ran with, by name (diagnose/diagnose_tuning.h).
  std::vector<std::pair<std::string, double>> tuning;
};

// The run's headline verdict, decided once here; the JSON writes it and the text and
// HTML reports only render it.
enum class RunVerdict : uint8_t {
  kHealthy,       // steps were scored and no cause stands above noise
  kDegraded,      // a cause with an effect above noise, or a log line naming one
  kFailed,        // a log line says the job crashed or a collective timed out
  kUndetermined,  // no step could be scored against a baseline and no log names a cause
};
RunVerdict VerdictOf(const Diagnosis& diagnosis);
// A capture without a baseline of steps is healthy when its kernel calls' peers cover enough of
// its kernel time to tell and found no cause, and the learned model does not flag it.
bool HealthyByPeers(const Diagnosis& diagnosis);
// Whether the learned decider chose (Diagnosis::decider) and its probabilities are there.
bool DecidedByLearned(const Diagnosis& diagnosis);

// "healthy", "degraded", "failed", "undetermined" (the JSON's `verdict`).
std::string_view RunVerdictName(RunVerdict verdict);

// The category a cause points at: its kind's, but a slow host of a job without device work
// (a CPU job), whose host ops are its compute, is cuda_kernel (docs/decisions.md).
FaultCategory CategoryOfCause(const cause::Hypothesis& hypothesis);

// The verdict's trace cause from diagnosis->candidates taken in `order` (a permutation of
// their indices): the first is the cause when `degraded`, with `second` (a second cause
// that explains what it leaves) after it and `confidence` as its category_probability;
// the rest are the alternatives, at most max_alternatives. Without a cause, a candidate the
// logs' first cause confirms (its category, the line within a step of its window) is the
// cause, with a note that says so; else the logs' first cause names the category. The rules choose with their own order; the learned decider
// (decider.h) with its own.
void ChooseCause(const std::vector<size_t>& order, bool degraded, double confidence,
                 std::vector<RootCause> second, Diagnosis* diagnosis);

// Whether a rank's global step lies where the cause shows: on its culprit's rank, a victim's
// or a rank of its evidence (every rank for a cause of every rank), in a step it shows in
// (cause::Hypothesis::ShowsIn).
bool SupportsCause(const RootCause& cause, int32_t rank, int64_t group);

// One answer: marks the findings, abnormal steps and requests that lie where the verdict's
// cause shows (a request cause's own request too) and puts them first, each part in its
// own order; none without a cause. ChooseCause runs it.
void OrderBySupportOfCause(Diagnosis* diagnosis);

// The findings' order: score, then peak z, rank and family.
bool FindingBefore(const Finding& a, const Finding& b);

// The run's baselines and the (step, family) findings measured against them, from its
// findings' rows alone, no trace (localize/feature_rows.h: a whole trace's, or every part's
// appended in plan order): diagnosis->findings best first and at most max_findings, without
// their slices; the abnormal steps (unsorted), steps_scored and baseline_keys. Diagnose runs
// it on the trace's rows, or on options.feature_rows.
void ScoreFindings(const localize::FeatureRows& rows, const DiagnoseOptions& options,
                   Diagnosis* diagnosis);
// The same, every finding kept (the ones that support each candidate are chosen from them).
std::vector<Finding> ScoreAllFindings(const localize::FeatureRows& rows,
                                      const DiagnoseOptions& options, Diagnosis* diagnosis);

// The abnormal steps highest first, the first abnormal time, and the requests those steps
// served, highest first, from request rows alone (reconstruct/request_rows.h: a whole
// trace's, or every part's merged). Diagnose runs it on the trace's rows, or on
// options.request_rows.
void CollectAbnormalRequests(const reconstruct::RequestRows& rows, Diagnosis* diagnosis);

// Needs a reconstructed trace (store::OpenTrace does that).
base::StatusOr<Diagnosis> Diagnose(const model::Trace& trace, const DiagnoseOptions& options = {});

}  // namespace teller::diagnose
