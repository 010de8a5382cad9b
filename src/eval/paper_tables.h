// The paper's evaluation (section 5) on one dataset split: the learned model and
// the comparison methods, each trained on the train part and scored on the test
// part of the same split, rendered as Markdown tables and JSON.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/progress.h"
#include "base/status.h"
#include "eval/explanation_scores.h"
#include "eval/metrics.h"
#include "learn/root_cause.h"
#include "step_records/step_records.h"

namespace teller::eval {

// What the learned model said about one test record; empty when no model.
struct ModelOutput {
  double step_probability = 0;
  double step_threshold = 0.5;                   // the model's decision threshold
  std::vector<double> type_probability;          // diagnose::kFaultCategoryCount
  std::vector<std::string> predicted_operators;  // node names the model marks
  // The decoder's words in slot form where the model flags the record; else empty.
  std::vector<std::string> explanation_words;
};

// The trained model's outputs on the test records as the tables read them (its category:
// learn::DecideCategory at its fitted threshold), and the name of its row.
base::StatusOr<std::vector<ModelOutput>> ModelOutputsOf(const learn::TrainedModel& trained,
                                                        const step_records::RecordSet& test);
std::string ModelRowName(const learn::TrainedModel& trained);

struct MethodResult {
  std::string name;
  std::string group;  // "ours", "unsupervised", "supervised", "supervised w/ struct"
  base::BinaryMetrics step;
  double auroc = 0, auprc = 0;
  bool has_type = false;
  base::MulticlassMetrics type;  // six classes (normal + five categories)
  bool has_operators = false;
  SetMetrics operators;         // over abnormal test records
  SetMetrics operators_family;  // Macro+: compared as operator families
  std::vector<std::pair<double, LowPriorResult>> priors;
  std::vector<std::pair<std::string, base::BinaryMetrics>> per_engine;  // paper Table 7
  double seconds = 0;                                                   // fit + predict
  std::string note;                                                     // why a figure is missing
};

struct EvalReport {
  std::string dataset, split, train_part, test_part, model;
  int64_t train_records = 0, test_records = 0, test_anomalous = 0;
  int32_t prior_repeats = 0;  // resamples per low prior
  std::vector<MethodResult> methods;
  std::optional<ExplanationScores> explanations;  // the rules' explanations, when scored
  std::vector<SlotFormScores> slot_form;          // generated sentences, record level
  std::vector<std::string> notes;                 // methods asked for and not run, and why
  std::string Markdown() const;
  std::string Json() const;
};

struct EvalOptions {
  // Names (comparisons::MethodName, learn::LogComparisonName, "single_stream"); empty:
  // none. The log comparison methods and the single-stream variant run in the trainer plugin;
  // without it they become a note.
  std::vector<std::string> methods;
  std::vector<double> priors = {0.5, 0.2, 0.1, 0.05};
  int32_t repeats = 50;
  uint64_t seed = 1;
  int32_t threads = 2;
  int32_t single_stream_epochs = 0;  // 0: learn::SingleStreamOptions's default
  base::ProgressSink* progress = nullptr;
};

// The method names asked for, "all" expanded to every classical and log comparison method (the
// single-stream variant trains for long: it is named on its own, "all,single_stream").
std::vector<std::string> ExpandMethodNames(const std::vector<std::string>& names);

// Scores the model outputs (one per test record, or empty) and trains/scores the
// comparison methods on the records' feature rows.
base::StatusOr<EvalReport> EvaluateMethods(const step_records::RecordSet& train,
                                           const step_records::RecordSet& test,
                                           const std::vector<ModelOutput>& model_outputs,
                                           const std::string& model_name,
                                           const EvalOptions& options);

}  // namespace teller::eval
