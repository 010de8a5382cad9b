#include "eval/paper_tables.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "comparisons/method.h"
#include "eval/single_stream_row.h"
#include "eval/step_scores.h"
#include "learn/log_comparison_data.h"
#include "learn/log_comparisons.h"
#include "learn/trainer_plugin.h"
#include "localize/operator_family.h"
#include "model/layer.h"
#include "step_records/record_features.h"

namespace teller::eval {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kTypes = diagnose::kFaultCategoryCount;

comparisons::Matrix ToMatrix(const step_records::FeatureRows& rows) {
  return comparisons::Matrix{rows.rows, rows.cols, rows.values};
}

// Rows are built here with the header's width, so rendering cannot fail.
std::string Table(const std::vector<std::string>& header,
                  const std::vector<std::vector<TableCell>>& rows) {
  auto text = RenderMarkdownTable(header, rows);
  return text.ok() ? *text : "(table error: " + text.status().message() + ")\n";
}

// The paper's Table 9 criteria of the references and of the rules' explanations.
std::string CriteriaTable(const ExplanationScores& scores) {
  std::vector<std::vector<TableCell>> rows = {
      {std::string("Overall"), scores.reference_criteria.overall, scores.rule_criteria.overall}};
  if (scores.has_model) rows.back().push_back(scores.model_criteria.overall);
  for (int c = 0; c < kCriterionCount; ++c) {
    rows.push_back({std::string(CriterionName(static_cast<Criterion>(c))),
                    scores.reference_criteria.share[c], scores.rule_criteria.share[c]});
    if (scores.has_model) rows.back().push_back(scores.model_criteria.share[c]);
  }
  std::vector<std::string> header = {"Criterion", "references", "rules (grounded)"};
  if (scores.has_model) header.push_back("model (grounded, else rules)");
  return fmt::format(
             "**Explanation criteria** (paper Table 9, checked automatically against the labels: "
             "docs/metrics.md): the {} reference phrasings of these runs, and the rules' "
             "explanation with its next action{}.\n\n",
             scores.reference_criteria.checked,
             scores.has_model
                 ? ", and the model's generated sentence where it passes the grounding "
                   "check (else the rules')"
                 : "") +
         Table(header, rows) + "\n";
}

// How many of the model's decoded sentences passed the grounding check.
std::string ModelExplanationNote(const ExplanationScores& scores) {
  if (scores.model_without_decoder) return "; the model has no explanation decoder";
  if (!scores.has_model) return "";
  return fmt::format(
      "; the model's decoder said a sentence for {} of them (the runs where it flagged a step), "
      "{} of which passed the grounding check ({} dropped: a slot the trace cannot fill, or a "
      "rank, node, step or family it does not have)",
      scores.model_decoded, scores.model_grounded, scores.model_decoded - scores.model_grounded);
}

nlohmann::json CriteriaJson(const CriteriaScores& scores) {
  nlohmann::json shares;
  for (int c = 0; c < kCriterionCount; ++c) {
    shares[std::string(CriterionName(static_cast<Criterion>(c)))] = scores.share[c];
  }
  return {{"checked", scores.checked}, {"overall", scores.overall}, {"criteria", shares}};
}

std::string FamilyOfName(std::string_view name) {
  // Names carry no layer here; kernels are the usual operators, so classify as
  // a kernel first and fall back to runtime calls and host ops.
  for (model::Layer layer : {model::Layer::kK, model::Layer::kRt, model::Layer::kBe}) {
    const localize::OperatorFamily family = localize::ClassifyOperator(layer, name);
    if (family != localize::OperatorFamily::kUnnamed &&
        family != localize::OperatorFamily::kHostOp) {
      return std::string(localize::OperatorFamilyName(family));
    }
  }
  return std::string(name);
}

std::string LogComparisonList(const std::vector<learn::LogComparisonId>& ids) {
  std::vector<std::string_view> names;
  for (learn::LogComparisonId id : ids) names.push_back(learn::LogComparisonName(id));
  return fmt::format("{}", fmt::join(names, ", "));
}

// The log comparison methods' rows (step detection only), fitted and scored by the trainer
// plugin; a note instead when the plugin is missing or a method finds no logs.
base::Status AddLogComparisons(const step_records::RecordSet& train,
                               const step_records::RecordSet& test,
                               const std::vector<learn::LogComparisonId>& ids,
                               const std::vector<int>& labels,
                               const std::vector<std::string>& engines, const EvalOptions& options,
                               EvalReport* report) {
  if (ids.empty()) return base::OkStatus();
  const auto plugin = learn::LoadTrainerPlugin();
  if (!plugin.ok()) {
    report->notes.push_back(
        fmt::format("{}: the log comparison methods need libtorch (the trainer plugin): {}",
                    LogComparisonList(ids), plugin.status().message()));
    return base::OkStatus();
  }
  TELLER_ASSIGN_OR_RETURN(const learn::LogComparisonInputs inputs,
                          learn::MakeLogComparisonInputs(train, test));
  for (size_t i = 0; i < ids.size(); ++i) {
    base::ReportProgress(options.progress, "log comparison methods", i, ids.size());
    const std::string name(learn::LogComparisonName(ids[i]));
    const auto start = Clock::now();
    learn::LogComparisonOptions fit_options;
    fit_options.seed = options.seed;
    fit_options.threads = options.threads;
    auto scores = (*plugin)->fit_log_comparison(ids[i], inputs.train, inputs.test, fit_options);
    if (!scores.ok() && scores.status().code() == base::StatusCode::kNotFound) {
      report->notes.push_back(scores.status().message());
      continue;
    }
    if (!scores.ok()) return scores.status().WithContext("eval");
    if (scores->scores.size() != labels.size())
      return base::Internal("eval: {} gave {} scores for {} records", name, scores->scores.size(),
                            labels.size());
    MethodResult result;
    result.name = name;
    result.group = "log-based";
    const std::vector<double> values(scores->scores.begin(), scores->scores.end());
    TELLER_RETURN_IF_ERROR(
        ScoreSteps(values, labels, engines, scores->threshold, options, &result));
    result.note = fmt::format("{} parameters, {} epochs; no fault type or operator output",
                              scores->parameters, scores->epochs);
    result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    report->methods.push_back(std::move(result));
  }
  if (options.progress) options.progress->Finish("log comparison methods");
  return base::OkStatus();
}

// The generated sentences of each method, record level, in slot form.
std::string SlotFormMarkdown(const std::vector<SlotFormScores>& methods) {
  if (methods.empty()) return "";
  std::vector<std::vector<TableCell>> rows;
  for (const SlotFormScores& f : methods) {
    const double n = static_cast<double>(std::max<int64_t>(f.records, 1));
    rows.push_back({f.method, fmt::format("{}", f.records), static_cast<double>(f.grounded) / n,
                    static_cast<double>(f.type_right) / n, f.bleu.bleu[0], f.bleu.bleu[1],
                    f.bleu.bleu[2], f.bleu.bleu[3]});
  }
  std::string out =
      "**Generated explanations, record level** (slot form: the facts are slots on both sides; "
      "each abnormal test record a method said a sentence for, against its reference phrasings; "
      "grounded: names only the record's ranks and operator families):\n\n";
  out +=
      Table({"Method", "Records", "Grounded", "Type right", "BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4"},
            rows) +
      "\n";
  for (const SlotFormScores& f : methods) {
    if (!f.example.empty())
      out += fmt::format("{} said: \"{}\"; a reference: \"{}\"\n\n", f.method, f.example,
                         f.example_reference);
  }
  return out;
}

// The model decoder's slot-form sentences, when it has a decoder.
base::Status AddModelSlotForm(const std::string& name, const step_records::RecordSet& test,
                              const std::vector<ModelOutput>& outputs,
                              const std::vector<int>& types, EvalReport* report) {
  std::vector<std::vector<std::string>> words;
  bool any = false;
  for (const ModelOutput& o : outputs) {
    words.push_back(o.explanation_words);
    any = any || !o.explanation_words.empty();
  }
  if (!any) return base::OkStatus();
  TELLER_ASSIGN_OR_RETURN(SlotFormScores scores, ScoreSlotForm(name, test, words, types));
  report->slot_form.push_back(std::move(scores));
  return base::OkStatus();
}

}  // namespace

base::StatusOr<std::vector<ModelOutput>> ModelOutputsOf(const learn::TrainedModel& trained,
                                                        const step_records::RecordSet& test) {
  learn::ScoredRecords scored;
  TELLER_ASSIGN_OR_RETURN(const std::vector<learn::RecordPrediction> predictions,
                          learn::PredictRecords(trained, test, &scored));
  std::vector<ModelOutput> outputs;
  for (size_t r = 0; r < predictions.size(); ++r) {
    const learn::RecordPrediction& p = predictions[r];
    ModelOutput o;
    o.step_probability = p.step_probability;
    o.step_threshold = trained.step_threshold;
    o.type_probability.assign(p.type_probability.size(), 0.0);
    const bool abnormal = p.step_probability >= trained.step_threshold;
    o.type_probability[learn::DecideCategory(abnormal, p.type_probability)] = 1.0;
    o.predicted_operators = p.operators;
    if (abnormal && trained.options.model.explain_vocab > 0)
      o.explanation_words = trained.explanations.Decode(trained.model.Explain(scored.inputs[r]));
    outputs.push_back(std::move(o));
  }
  return outputs;
}

std::string ModelRowName(const learn::TrainedModel& trained) {
  std::string name = "teller";
  if (!trained.options.model.use_logs) name += " (trace only)";
  if (!trained.options.model.use_trace) name += " (logs only)";
  return name;
}

std::vector<std::string> ExpandMethodNames(const std::vector<std::string>& names) {
  std::vector<std::string> expanded;
  for (const std::string& name : names) {
    if (name != "all") {
      expanded.push_back(name);
      continue;
    }
    for (comparisons::MethodId id : comparisons::AvailableMethods()) {
      expanded.emplace_back(comparisons::MethodName(id));
    }
    for (learn::LogComparisonId id : learn::kLogComparisons) {
      expanded.emplace_back(learn::LogComparisonName(id));
    }
  }
  return expanded;
}

base::StatusOr<EvalReport> EvaluateMethods(const step_records::RecordSet& train,
                                           const step_records::RecordSet& test,
                                           const std::vector<ModelOutput>& model_outputs,
                                           const std::string& model_name,
                                           const EvalOptions& options) {
  if (test.records.empty()) return base::InvalidArgument("eval: the test part has no step records");
  EvalReport report;
  report.model = model_name;
  report.prior_repeats = options.repeats;
  report.train_records = static_cast<int64_t>(train.records.size());
  report.test_records = static_cast<int64_t>(test.records.size());
  std::vector<int> step_labels, type_labels, train_step, train_type;
  std::vector<std::string> engines;
  for (const auto& r : test.records) {
    engines.push_back(r.engine.empty() ? "unknown" : r.engine);
    step_labels.push_back(r.is_anomaly ? 1 : 0);
    type_labels.push_back(static_cast<int>(r.fault_type));
    report.test_anomalous += r.is_anomaly;
  }
  for (const auto& r : train.records) {
    train_step.push_back(r.is_anomaly ? 1 : 0);
    train_type.push_back(static_cast<int>(r.fault_type));
  }
  // Truth operator sets of abnormal test records.
  std::vector<size_t> abnormal;
  std::vector<std::vector<std::string>> truth_operators;
  for (size_t i = 0; i < test.records.size(); ++i) {
    if (!test.records[i].is_anomaly) continue;
    abnormal.push_back(i);
    truth_operators.push_back(test.records[i].AffectedOperators(test.symbols));
  }

  if (!model_outputs.empty()) {
    if (model_outputs.size() != test.records.size()) {
      return base::InvalidArgument("eval: {} model outputs for {} test records",
                                   model_outputs.size(), test.records.size());
    }
    const auto start = Clock::now();
    MethodResult ours;
    ours.name = model_name;
    ours.group = "ours";
    std::vector<double> scores;
    std::vector<int> types;
    for (const ModelOutput& o : model_outputs) {
      scores.push_back(o.step_probability);
      types.push_back(
          static_cast<int>(std::max_element(o.type_probability.begin(), o.type_probability.end()) -
                           o.type_probability.begin()));
    }
    TELLER_RETURN_IF_ERROR(ScoreSteps(scores, step_labels, engines,
                                      model_outputs.front().step_threshold, options, &ours));
    TELLER_ASSIGN_OR_RETURN(ours.type, base::ComputeMulticlassMetrics(types, type_labels));
    ours.has_type = true;
    if (!abnormal.empty()) {
      std::vector<std::vector<std::string>> predicted;
      for (size_t i : abnormal) predicted.push_back(model_outputs[i].predicted_operators);
      TELLER_ASSIGN_OR_RETURN(ours.operators, ComputeMacroSetMetrics(predicted, truth_operators));
      TELLER_ASSIGN_OR_RETURN(ours.operators_family,
                              ComputeMacroPlusSetMetrics(predicted, truth_operators, FamilyOfName));
      ours.has_operators = true;
    }
    ours.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    TELLER_RETURN_IF_ERROR(AddModelSlotForm(model_name, test, model_outputs, types, &report));
    report.methods.push_back(std::move(ours));
  }

  std::vector<std::string> classical;
  std::vector<learn::LogComparisonId> log_based;
  bool single_stream = false;
  for (const std::string& name : options.methods) {
    if (const auto id = learn::ParseLogComparisonId(name)) {
      log_based.push_back(*id);
    } else if (name == kSingleStreamMethod) {
      single_stream = true;
    } else {
      classical.push_back(name);
    }
  }
  if (!classical.empty()) {
    const step_records::FeatureRows train_stats = step_records::StatisticalFeatures(train.records);
    const step_records::FeatureRows test_stats = step_records::StatisticalFeatures(test.records);
    // Structural columns hash names, so train and test share the columns whatever
    // their symbol tables.
    const step_records::FeatureRows train_struct =
        step_records::StructuralFeatures(train.records, train.symbols);
    const step_records::FeatureRows test_struct =
        step_records::StructuralFeatures(test.records, test.symbols);
    uint64_t done = 0;
    for (const std::string& name : classical) {
      const auto id = comparisons::ParseMethodId(name);
      if (!id) return base::InvalidArgument("eval: unknown comparison method '{}'", name);
      for (bool structural : {false, true}) {
        base::ReportProgress(options.progress, "comparison methods", done, classical.size() * 2);
        comparisons::MethodOptions method_options;
        method_options.seed = options.seed;
        method_options.threads = options.threads;
        auto probe = comparisons::MakeMethod(*id, method_options);
        if (!probe.ok()) return probe.status();
        const bool supervised = (*probe)->kind() == comparisons::MethodKind::kSupervised;
        if (structural && !supervised) continue;  // the paper adds structure to supervised ones
        const auto start = Clock::now();
        MethodResult result;
        result.name = name;
        result.group = structural   ? "supervised w/ struct"
                       : supervised ? "supervised"
                                    : "unsupervised";
        const comparisons::Matrix x_train = ToMatrix(structural ? train_struct : train_stats);
        const comparisons::Matrix x_test = ToMatrix(structural ? test_struct : test_stats);
        // Step anomaly: binary.
        auto step_model = comparisons::MakeMethod(*id, method_options);
        std::vector<int32_t> y(train_step.begin(), train_step.end());
        TELLER_RETURN_IF_ERROR((*step_model)->Fit(x_train, y).WithContext("eval: " + name));
        TELLER_ASSIGN_OR_RETURN(std::vector<float> raw, (*step_model)->Score(x_test));
        std::vector<double> scores(raw.begin(), raw.end());
        const double threshold = supervised ? 0.5 : (*step_model)->threshold();
        TELLER_RETURN_IF_ERROR(
            ScoreSteps(scores, step_labels, engines, threshold, options, &result));
        // Fault type: six classes, supervised only.
        if (supervised) {
          auto type_model = comparisons::MakeMethod(*id, method_options);
          std::vector<int32_t> yt(train_type.begin(), train_type.end());
          TELLER_RETURN_IF_ERROR(
              (*type_model)->Fit(x_train, yt).WithContext("eval: " + name + " (type)"));
          TELLER_ASSIGN_OR_RETURN(std::vector<int32_t> predicted, (*type_model)->Predict(x_test));
          std::vector<int> types(predicted.begin(), predicted.end());
          TELLER_ASSIGN_OR_RETURN(result.type, base::ComputeMulticlassMetrics(types, type_labels));
          result.has_type = true;
        }
        result.note = "no operator output";
        result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
        report.methods.push_back(std::move(result));
        ++done;
      }
    }
    if (options.progress) options.progress->Finish("comparison methods");
  }
  TELLER_RETURN_IF_ERROR(
      AddLogComparisons(train, test, log_based, step_labels, engines, options, &report));
  if (single_stream) {
    TELLER_RETURN_IF_ERROR(
        AddSingleStream(train, test, step_labels, type_labels, engines, options, &report));
  }
  return report;
}

std::string EvalReport::Markdown() const {
  std::string out;
  out += fmt::format(
      "Dataset `{}`, split `{}`: trained on `{}` ({} step records), measured on `{}` "
      "({} step records, {} abnormal). Model: {}.\n\n",
      dataset, split, train_part, train_records, test_part, test_records, test_anomalous,
      model.empty() ? "none" : model);
  {
    std::vector<std::string> header = {"Method", "Group", "Acc", "P", "R", "F1", "AUROC", "AUPRC"};
    std::vector<std::vector<TableCell>> rows;
    for (const MethodResult& m : methods) {
      rows.push_back({m.name, m.group, m.step.accuracy, m.step.precision, m.step.recall, m.step.f1,
                      m.auroc, m.auprc});
    }
    out += "**Abnormal step detection** (paper Tables 2 and 4):\n\n";
    out += Table(header, rows) + "\n";
    for (const std::string& note : notes) out += "Not run: " + note + "\n\n";
  }
  {
    std::vector<std::string> header = {"Method", "Group", "Accuracy", "Macro recall", "Macro F1"};
    std::vector<std::vector<TableCell>> rows;
    for (const MethodResult& m : methods) {
      if (!m.has_type) continue;
      rows.push_back({m.name, m.group, m.type.accuracy, m.type.macro_recall, m.type.macro_f1});
    }
    out +=
        "**Fault type per step record** (six classes: normal and the five categories; paper "
        "Table 2 right):\n\n";
    out += Table(header, rows) + "\n";
  }
  {
    std::vector<std::string> header = {"Method",  "Macro P",  "Macro R",  "Macro F1",
                                       "Jaccard", "Macro+ P", "Macro+ F1"};
    std::vector<std::vector<TableCell>> rows;
    for (const MethodResult& m : methods) {
      if (!m.has_operators) continue;
      rows.push_back({m.name, m.operators.precision, m.operators.recall, m.operators.f1,
                      m.operators.jaccard, m.operators_family.precision, m.operators_family.f1});
    }
    if (!rows.empty()) {
      out +=
          "**Suspect operators** over abnormal test records (Macro+: compared as operator "
          "families, docs/metrics.md):\n\n";
      out += Table(header, rows) + "\n";
    }
  }
  {
    std::vector<std::string> engines;
    for (const MethodResult& m : methods) {
      for (const auto& [engine, metrics] : m.per_engine) {
        if (std::find(engines.begin(), engines.end(), engine) == engines.end())
          engines.push_back(engine);
      }
    }
    std::vector<std::string> header = {"Method", "Group"};
    header.insert(header.end(), engines.begin(), engines.end());
    std::vector<std::vector<TableCell>> rows;
    for (const MethodResult& m : methods) {
      std::vector<TableCell> row = {m.name, m.group};
      for (const std::string& engine : engines) {
        auto it = std::find_if(m.per_engine.begin(), m.per_engine.end(),
                               [&](const auto& e) { return e.first == engine; });
        row.push_back(it == m.per_engine.end() ? TableCell{std::string("-")}
                                               : TableCell{it->second.f1});
      }
      rows.push_back(std::move(row));
    }
    if (!engines.empty()) {
      out += "**Step F1 per engine** (paper Table 7):\n\n";
      out += Table(header, rows) + "\n";
    }
  }
  {
    std::vector<std::string> header = {"Method", "Prior", "Recall", "F1", "AUPRC", "AUROC"};
    std::vector<std::vector<TableCell>> rows;
    for (const MethodResult& m : methods) {
      for (const auto& [prior, r] : m.priors) {
        rows.push_back({m.name + (m.group == "supervised w/ struct" ? " w/ struct" : ""),
                        fmt::format("{:.0f}%", prior * 100),
                        fmt::format("{:.3f} ± {:.3f}", r.recall.mean, r.recall.std),
                        fmt::format("{:.3f} ± {:.3f}", r.f1.mean, r.f1.std),
                        fmt::format("{:.3f} ± {:.3f}", r.auprc.mean, r.auprc.std),
                        fmt::format("{:.3f} ± {:.3f}", r.auroc.mean, r.auroc.std)});
      }
    }
    out += fmt::format(
        "**Low fault prior** (test records resampled to each prior {} times, mean ± sd; paper "
        "Table 8):\n\n",
        prior_repeats);
    out += Table(header, rows) + "\n";
  }
  if (explanations && explanations->runs > 0) {
    const BleuScores& b = explanations->bleu;
    out += fmt::format(
        "**Explanations** (paper Table 2, BLEU): the rules' grounded explanation of each faulty "
        "test run (`teller diagnose`) against the simulator's reference phrasings, corpus "
        "BLEU over {} runs{}.\n\n",
        explanations->runs, ModelExplanationNote(*explanations));
    std::vector<std::vector<TableCell>> rows = {
        {std::string("rules (grounded)"), b.bleu[0], b.bleu[1], b.bleu[2], b.bleu[3]}};
    if (explanations->has_model) {
      const BleuScores& m = explanations->model_bleu;
      const BleuScores& d = explanations->decoded_bleu;
      rows.push_back({std::string("model (grounded, else rules)"), m.bleu[0], m.bleu[1], m.bleu[2],
                      m.bleu[3]});
      rows.push_back({fmt::format("model decoded ({} runs)", explanations->model_decoded),
                      d.bleu[0], d.bleu[1], d.bleu[2], d.bleu[3]});
    }
    out += Table({"Explanation", "BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4"}, rows) + "\n";
    out +=
        fmt::format("For example ({}): \"{}\"; a reference: \"{}\"\n\n", explanations->example_run,
                    explanations->example_hypothesis, explanations->example_reference);
    if (!explanations->example_generated.empty()) {
      out += fmt::format(
          "The model said (first decoded run): \"{}\"{}\n\n", explanations->example_generated,
          explanations->example_problems.empty()
              ? ""
              : fmt::format(" (dropped: {})", fmt::join(explanations->example_problems, "; ")));
    }
    out += CriteriaTable(*explanations);
  }
  out += SlotFormMarkdown(slot_form);
  return out;
}

std::string EvalReport::Json() const {
  nlohmann::json doc;
  doc["dataset"] = dataset;
  doc["split"] = split;
  doc["train_part"] = train_part;
  doc["test_part"] = test_part;
  doc["model"] = model;
  doc["train_records"] = train_records;
  doc["test_records"] = test_records;
  doc["prior_repeats"] = prior_repeats;
  doc["test_anomalous"] = test_anomalous;
  nlohmann::json list = nlohmann::json::array();
  for (const MethodResult& m : methods) {
    nlohmann::json j;
    j["name"] = m.name;
    j["group"] = m.group;
    j["step"] = {{"accuracy", m.step.accuracy},
                 {"precision", m.step.precision},
                 {"recall", m.step.recall},
                 {"f1", m.step.f1},
                 {"auroc", m.auroc},
                 {"auprc", m.auprc}};
    if (m.has_type) {
      j["type"] = {{"accuracy", m.type.accuracy},
                   {"macro_recall", m.type.macro_recall},
                   {"macro_f1", m.type.macro_f1}};
    }
    if (m.has_operators) {
      j["operators"] = {{"precision", m.operators.precision},
                        {"recall", m.operators.recall},
                        {"f1", m.operators.f1},
                        {"jaccard", m.operators.jaccard},
                        {"family_precision", m.operators_family.precision},
                        {"family_f1", m.operators_family.f1}};
    }
    nlohmann::json priors = nlohmann::json::array();
    for (const auto& [prior, r] : m.priors) {
      priors.push_back({{"prior", prior},
                        {"recall", r.recall.mean},
                        {"f1", r.f1.mean},
                        {"auprc", r.auprc.mean},
                        {"auroc", r.auroc.mean}});
    }
    j["priors"] = priors;
    nlohmann::json engines = nlohmann::json::object();
    for (const auto& [engine, metrics] : m.per_engine) {
      engines[engine] = {
          {"precision", metrics.precision}, {"recall", metrics.recall}, {"f1", metrics.f1}};
    }
    j["per_engine"] = engines;
    j["seconds"] = m.seconds;
    if (!m.note.empty()) j["note"] = m.note;
    list.push_back(std::move(j));
  }
  doc["methods"] = list;
  doc["notes"] = notes;
  if (explanations) {
    doc["explanations"] = {{"hypothesis", "rules (grounded)"},
                           {"runs", explanations->runs},
                           {"bleu", explanations->bleu.bleu},
                           {"brevity_penalty", explanations->bleu.brevity_penalty},
                           {"criteria",
                            {{"references", CriteriaJson(explanations->reference_criteria)},
                             {"rules", CriteriaJson(explanations->rule_criteria)}}}};
    if (explanations->has_model) {
      doc["explanations"]["model"] = {{"decoded", explanations->model_decoded},
                                      {"grounded", explanations->model_grounded},
                                      {"bleu", explanations->model_bleu.bleu},
                                      {"decoded_bleu", explanations->decoded_bleu.bleu},
                                      {"criteria", CriteriaJson(explanations->model_criteria)},
                                      {"example", explanations->example_generated},
                                      {"example_problems", explanations->example_problems}};
    }
  }
  for (const SlotFormScores& f : slot_form) {
    doc["slot_form"].push_back({{"method", f.method},
                                {"records", f.records},
                                {"grounded", f.grounded},
                                {"type_right", f.type_right},
                                {"bleu", f.bleu.bleu},
                                {"example", f.example}});
  }
  return doc.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace teller::eval
