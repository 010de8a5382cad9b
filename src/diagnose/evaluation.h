// Scoring a diagnosis against the simulator's ground truth (labels.json, read by
// wire/labels_file; schema in docs/format.md). Truth families are our own operator
// families of the affected operator instances (localize::ClassifyOperator on their
// layer and name), so the check does not depend on the simulator's internal names.
// Evaluating a whole dataset: dataset_evaluation.h.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "base/metrics.h"
#include "base/status.h"
#include "diagnose/diagnosis.h"

namespace teller::diagnose {

struct CaseTruth {
  bool faulty = false;
  std::string mechanism = "none";
  FaultCategory category = FaultCategory::kNone;
  int32_t target_rank = -1;        // -1: the fault names no rank
  int32_t target_node = -1;        // -1: the fault names no node
  std::string target_family;       // the fault's kernel family, empty when it names none
  // Our family of most of the operator instances the fault slowed (the labels' family is
  // the injector's, coarser: its "attention" holds softmax kernels, its "elementwise"
  // reductions and indexing); kUnnamed when none.
  localize::OperatorFamily slowed_family = localize::OperatorFamily::kUnnamed;
  std::set<std::string> requests;  // the requests the fault touched (labels' is_fault)
  std::set<int64_t> steps;         // affected engine steps
  // (rank, step, family) of every affected operator instance.
  std::set<std::tuple<int32_t, int64_t, localize::OperatorFamily>> operators;
  std::set<localize::OperatorFamily> families;
  // Per affected engine step, the names of its affected operator instances (any rank), and
  // their families' names: the truth of the operator-set score.
  std::map<int64_t, std::vector<std::string>> step_operators;
  std::map<int64_t, std::vector<std::string>> step_operator_families;
  // Per engine step, its duration over the twin's (the same steps without the fault).
  std::map<int64_t, int64_t> step_delta_ns;
  int64_t step_count = 0;  // the run's engine steps
};

// Errors when the text is not a teller-labels document.
base::StatusOr<CaseTruth> ParseTruth(std::string_view labels_json);

struct CaseScore {
  bool faulty = false;
  // The fault changed operator instances (labels.json affected_operators, the scored
  // ones: wire::IsScoredInstance); faults on the scheduler or the KV cache change none
  // and cannot make an operator hit.
  bool has_operators = false;
  bool flagged = false;  // the diagnosis called the run abnormal
  // Among the top-k findings: one on an affected step; one of an affected family;
  // one matching an affected (rank, step, family) instance exactly.
  bool step_hit = false;
  bool family_hit = false;
  bool operator_hit = false;
  int32_t first_operator_hit = 0;  // 1-based rank of the first exact hit, 0 none
  bool category_correct = false;
  FaultCategory predicted = FaultCategory::kNone;
  // The cause: its kind and location (rank, family) those of the fault, as the verdict's
  // cause or among the top 3 hypotheses. Only for mechanisms a hypothesis models
  // (CauseKindsOf); cause_scored says whether this case counts.
  bool cause_scored = false;
  bool cause_top1 = false;
  bool cause_top3 = false;
  // Engine steps of the verdict's cause window against the fault's affected steps.
  int32_t steps_true = 0;
  int32_t steps_false = 0;
  int32_t steps_missed = 0;
  // When the verdict's cause is right: the step time it says the fault cost over its
  // window, what the twin says the window lost, and the window's baseline time.
  bool impact_scored = false;
  double impact_ns = 0.0;
  double twin_ns = 0.0;
  double window_ns = 0.0;
  int64_t steps_total = 0;  // the run's engine steps: the negatives are the rest
  // The learned model alone (Diagnosis::model): the steps it flags against the affected
  // ones, and its category; model_used false when it did not read the run.
  bool model_used = false;
  int32_t model_steps_true = 0;
  int32_t model_steps_false = 0;
  int32_t model_steps_missed = 0;
  FaultCategory model_category = FaultCategory::kNone;
  // The operator-set score (paper: Operator set-Macro), summed over the affected steps: per
  // step, the verdict's cause's operators that moved in it (RootCause::operators, none
  // outside its window) against the step's affected operators; by name, and by family
  // (Macro+). The model's: its suspect operators in the steps it flags.
  int32_t operator_set_items = 0;
  double operator_set_f1 = 0.0;
  double operator_family_f1 = 0.0;
  double model_operator_set_f1 = 0.0;
  // |log| of the cost's ratio to the twin's, both floored at 1% of the window's time.
  double ImpactLogError() const;
};

// The cause kinds that name a simulated mechanism (empty: no hypothesis models it:
// KV-cache pressure, starvation, misroutes, crashes and hangs are told by the logs).
std::vector<cause::CauseKind> CauseKindsOf(std::string_view mechanism);
// Whether a hypothesis names the fault: its kind, and its rank or family when the
// fault names one.
bool CauseMatches(const CaseTruth& truth, const cause::Hypothesis& hypothesis);

CaseScore ScoreDiagnosis(const CaseTruth& truth, const Diagnosis& diagnosis, size_t top_k = 3);

// One evaluated bundle.
struct CaseResult {
  std::string bundle;
  std::string engine;
  CaseTruth truth;
  CaseScore score;
  double seconds = 0.0;  // diagnosis time (after loading)
  // The verdict's cause (or the closest hypothesis): "kind location score", for reading.
  std::string cause;
};

struct EvaluationTotals {
  int32_t faulty = 0;
  int32_t with_operators = 0;  // faulty cases whose fault touched operator instances
  int32_t normal = 0;
  int32_t step_hits = 0;
  int32_t family_hits = 0;
  int32_t operator_hits = 0;
  int32_t category_correct = 0;  // over faulty cases
  int32_t flagged_faulty = 0;
  int32_t flagged_normal = 0;  // false alarms
  int32_t cause_scored = 0;    // faulty cases of a mechanism a hypothesis models
  int32_t cause_top1 = 0;
  int32_t cause_top3 = 0;
  int64_t steps_true = 0;
  int64_t steps_false = 0;  // over every case, false alarms' windows included
  int64_t steps_missed = 0;
  int64_t steps_total = 0;
  // Per fault category (FaultCategory), over faulty cases: the verdict's category against
  // the truth, and the learned model's (cases it read).
  std::vector<base::ClassCounts> categories;
  std::vector<base::ClassCounts> model_categories;
  int32_t model_used = 0;
  int32_t model_faulty = 0;
  int32_t model_category_correct = 0;
  int64_t model_steps_true = 0;
  int64_t model_steps_false = 0;
  int64_t model_steps_missed = 0;
  int64_t model_steps_total = 0;
  // Operator-set F1 sums and their items (CaseScore), the model's over the cases it read.
  int64_t operator_set_items = 0;
  double operator_set_f1 = 0.0;
  double operator_family_f1 = 0.0;
  int64_t model_operator_set_items = 0;
  double model_operator_set_f1 = 0.0;
  double seconds = 0.0;
  std::vector<double> impact_log_errors;  // of the cases whose cost was scored
  double StepF1() const;
  double ModelStepF1() const;
  // Means over the items; -1 without items.
  double OperatorSetF1() const;
  double OperatorFamilySetF1() const;
  double ModelOperatorSetF1() const;
  // Mean F1 over the fault categories of the truth (a missed run counts against its
  // category; kNone is not a class of its own).
  double CategoryMacroF1() const;
  double ModelCategoryMacroF1() const;
  double MedianImpactLogError() const;  // 0 without scored cases
  int32_t ImpactsWithin(double factor) const;
};
EvaluationTotals SumResults(const std::vector<CaseResult>& results);

// Markdown: the totals, then one row per mechanism. top_k is printed in the headers.
std::string EvaluationMarkdown(const std::vector<CaseResult>& results, size_t top_k);
// JSON object: totals, per mechanism, per case.
std::string EvaluationJson(const std::vector<CaseResult>& results, size_t top_k);

}  // namespace teller::diagnose
