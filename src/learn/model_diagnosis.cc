#include "learn/model_diagnosis.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <unordered_set>

#include <fmt/format.h>

#include "cause/deviation_map.h"
#include "learn/explanation_text.h"

namespace teller::learn {

namespace {

// Abnormal steps (one entry per step: its most abnormal record), the category of
// the abnormal records and their most frequent suspect operators.
void ReadPredictions(const TrainedModel& trained, const step_records::RecordSet& set,
                     const std::vector<RecordPrediction>& predictions,
                     diagnose::ModelOpinion* out) {
  diagnose::ModelOpinion& verdict = *out;
  std::array<double, diagnose::kFaultCategoryCount> type_sum{};
  std::map<std::string, int> operator_votes;
  // One entry per step: its most abnormal request.
  std::map<int64_t, diagnose::ModelStep> by_step, every_step;
  for (size_t r = 0; r < predictions.size(); ++r) {
    const RecordPrediction& p = predictions[r];
    const step_records::StepRecord& record = set.records[r];
    verdict.abnormal_probability =
        std::max<double>(verdict.abnormal_probability, p.step_probability);
    diagnose::ModelStep& read = every_step[record.step];
    if (p.step_probability >= read.probability) {
      read = {record.step, record.request, p.step_probability};
    }
    if (p.step_probability < trained.step_threshold) continue;
    diagnose::ModelStep& step = by_step[record.step];
    if (p.step_probability > step.probability)
      step = {record.step, record.request, p.step_probability};
    for (int c = 1; c < diagnose::kFaultCategoryCount; ++c) type_sum[c] += p.type_probability[c];
    for (const std::string& name : p.operators) ++operator_votes[name];
  }
  verdict.abnormal = !by_step.empty();
  for (const auto& [number, step] : every_step) verdict.step_probabilities.push_back(step);
  for (const auto& [number, step] : by_step) verdict.steps.push_back(step);
  std::stable_sort(verdict.steps.begin(), verdict.steps.end(),
                   [](const diagnose::ModelStep& a, const diagnose::ModelStep& b) {
                     return a.probability > b.probability;
                   });
  if (verdict.abnormal) {
    double total = 0;
    for (int c = 1; c < diagnose::kFaultCategoryCount; ++c) total += type_sum[c];
    const auto best = std::max_element(type_sum.begin() + 1, type_sum.end()) - type_sum.begin();
    verdict.category = static_cast<diagnose::FaultCategory>(best);
    verdict.category_probability = total > 0 ? type_sum[best] / total : 0.0;
  }
  std::vector<std::pair<std::string, int>> ranked(operator_votes.begin(), operator_votes.end());
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  for (size_t i = 0; i < ranked.size() && i < 8; ++i) verdict.operators.push_back(ranked[i].first);
}

// The record the model finds most abnormal, or -1 when it flags none.
int64_t TopRecord(const TrainedModel& trained, const std::vector<Prediction>& predictions) {
  int64_t top = -1;
  for (size_t r = 0; r < predictions.size(); ++r) {
    const float p = predictions[r].step_probability;
    if (p >= trained.step_threshold && (top < 0 || p > predictions[top].step_probability))
      top = static_cast<int64_t>(r);
  }
  return top;
}

// "rank r (GPU g on nodeN)" for the rank of the record's likeliest token, as the
// simulator's references name a place; "" when the model marks no token.
std::string WhereOf(const TrainedModel& trained, const model::Trace& trace,
                    const std::vector<int32_t>& nodes, const step_records::StepRecord& record,
                    const ModelInput& input, const Prediction& prediction,
                    ExplanationGround* ground) {
  const auto best =
      std::max_element(prediction.token_probability.begin(), prediction.token_probability.end());
  if (best == prediction.token_probability.end() || *best < trained.token_threshold) return "";
  const size_t token = static_cast<size_t>(best - prediction.token_probability.begin());
  const int32_t rank = record.node_rank[input.node_begin[token]];
  int32_t node = -1;
  std::set<int32_t> same_node;
  for (size_t p = 0; p < nodes.size(); ++p) {
    if (trace.processes.rank[p] == rank) node = nodes[p];
  }
  for (size_t p = 0; p < nodes.size(); ++p) {
    if (nodes[p] == node && trace.processes.rank[p] >= 0) same_node.insert(trace.processes.rank[p]);
  }
  if (rank < 0 || node < 0 || !ground->ranks.count(rank)) return "";
  const auto local = std::distance(same_node.begin(), same_node.find(rank));
  ground->node = fmt::format("node{}", node);
  return fmt::format("rank {} (GPU {} on node{})", rank, local, node);
}

// The flagged steps next to the record's, as "step s" or "steps a-b".
std::string WhenOf(const diagnose::ModelOpinion& verdict, int64_t step) {
  std::set<int64_t> flagged;
  for (const diagnose::ModelStep& s : verdict.steps) flagged.insert(s.step);
  int64_t first = step, last = step;
  while (flagged.count(first - 1)) --first;
  while (flagged.count(last + 1)) ++last;
  return first == last ? fmt::format("step {}", first) : fmt::format("steps {}-{}", first, last);
}

// The median change of the tokens the model marks against the same tokens in the
// run's other steps, in whole percent; "" when it is not a slowdown.
std::string PercentOf(const TrainedModel& trained, const ModelInput& input,
                      const Prediction& prediction) {
  std::vector<float> changes;
  for (size_t j = 0; j < input.size(); ++j) {
    if (prediction.token_probability[j] >= trained.token_threshold)
      changes.push_back(std::exp(input.time[j * kTimeFeatures + 2]) - 1.0f);
  }
  if (changes.empty()) return "";
  std::nth_element(changes.begin(), changes.begin() + changes.size() / 2, changes.end());
  const int percent = static_cast<int>(std::lround(100.0f * changes[changes.size() / 2]));
  return percent > 0 ? fmt::format("{}", percent) : "";
}

// The decoder's sentence for the most abnormal record, realized from the trace.
void ExplainTopRecord(const TrainedModel& trained, const model::Trace& trace,
                      const step_records::RecordSet& set, const ScoredRecords& scored,
                      diagnose::ModelOpinion* verdict) {
  if (trained.options.model.explain_vocab <= 0) return;
  const int64_t top = TopRecord(trained, scored.predictions);
  if (top < 0) return;
  const step_records::StepRecord& record = set.records[top];
  const ModelInput& input = scored.inputs[top];
  const Prediction& prediction = scored.predictions[top];
  ExplanationGround ground;
  const std::vector<int32_t> nodes = cause::NodeOfProcesses(trace);
  for (size_t p = 0; p < nodes.size(); ++p) {
    if (trace.processes.rank[p] >= 0) ground.ranks.insert(trace.processes.rank[p]);
    if (nodes[p] >= 0) ground.nodes.insert(nodes[p]);
  }
  for (const step_records::StepRecord& r : set.records) {
    ground.first_step = std::min(ground.first_step, r.step);
    ground.last_step = std::max(ground.last_step, r.step);
    for (localize::OperatorFamily family : r.node_family)
      ground.families.emplace(localize::OperatorFamilyName(family));
  }
  ground.where = WhereOf(trained, trace, nodes, record, input, prediction, &ground);
  ground.when = WhenOf(*verdict, record.step);
  ground.percent = PercentOf(trained, input, prediction);
  ground.request = record.request;
  const RealizedExplanation realized =
      RealizeExplanation(trained.explanations.Decode(trained.model.Explain(input)), ground);
  verdict->explanation = realized.text;
  verdict->explanation_problems = realized.problems;
}

}  // namespace

diagnose::ModelOpinion DiagnoseWithModel(const TrainedModel& trained, const std::string& folder,
                                         const model::Trace& trace) {
  const auto start = std::chrono::steady_clock::now();
  diagnose::ModelOpinion verdict;
  verdict.model = folder;
  verdict.threshold = trained.step_threshold;
  verdict.validation_step_f1 = trained.best_val_step_f1;
  step_records::RecordSet set;
  step_records::RecordOptions options;
  options.bundle = "input";
  options.vertical = trained.options.view == "vertical";
  options.operator_tokens = trained.options.input.operator_tokens;
  options.max_logs_per_record = static_cast<size_t>(std::max(trained.options.input.max_logs, 1));
  base::Status status = step_records::AddTraceRecords(trace, options, &set);
  if (!status.ok()) {
    verdict.reason = "the model could not read the trace: " + status.message();
    return verdict;
  }
  verdict.records = static_cast<int64_t>(set.records.size());
  if (set.records.empty()) {
    verdict.reason = "the trace names no requests in its steps, and the model reads request steps";
    return verdict;
  }
  // Operator names the model's vocabulary has never seen.
  std::unordered_set<std::string> known(trained.vocab.base_symbols().begin(),
                                        trained.vocab.base_symbols().end());
  int64_t names = 0, unknown = 0;
  for (size_t s = tpe::kReservedSymbols; s < set.symbols.size(); ++s) {
    ++names;
    unknown += known.count(std::string(set.symbols.Get(static_cast<tpe::SymbolId>(s)))) == 0;
  }
  const double unknown_share = names ? static_cast<double>(unknown) / names : 0.0;
  verdict.unknown_name_share = unknown_share;
  if (unknown_share > kMaxUnknownNameShare) {
    verdict.reason = fmt::format(
        "{:.0f}% of the trace's operator names are unknown to the model "
        "(trained on other engines or libraries)",
        100 * unknown_share);
    return verdict;
  }
  ScoredRecords scored;
  auto predictions = PredictRecords(trained, set, &scored);
  if (!predictions.ok()) {
    verdict.reason = "the model failed on the trace: " + predictions.status().message();
    return verdict;
  }
  verdict.used = true;
  if (unknown_share > 0.1) {
    verdict.reason =
        fmt::format("{:.0f}% of the operator names are unknown to the model", 100 * unknown_share);
  }
  ReadPredictions(trained, set, *predictions, &verdict);
  ExplainTopRecord(trained, trace, set, scored, &verdict);
  verdict.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return verdict;
}

diagnose::ModelOpinion DiagnoseLogsWithModel(const TrainedModel& trained, const std::string& folder,
                                             const model::Trace& trace) {
  const auto start = std::chrono::steady_clock::now();
  diagnose::ModelOpinion verdict;
  verdict.model = folder;
  verdict.logs_only = true;
  verdict.threshold = trained.step_threshold;
  verdict.validation_step_f1 = trained.best_val_step_f1;
  if (trained.options.model.use_trace) {
    verdict.reason =
        "this model reads traces; log lines alone need the logs-only variant "
        "(models/logs-only, or `teller train --variant logs-only`)";
    return verdict;
  }
  if (trace.logs.size() == 0) {
    verdict.reason = "no log lines to read";
    return verdict;
  }
  step_records::RecordSet set;
  std::vector<int32_t> template_of(trace.templates.size());
  for (size_t t = 0; t < trace.templates.size(); ++t) {
    template_of[t] = set.templates.Intern(trace.str(trace.templates.pattern[t]));
  }
  // Lines in time order within each source file (lines without a time keep their
  // place after the timed ones before them).
  std::vector<uint32_t> order(trace.logs.size());
  for (uint32_t l = 0; l < order.size(); ++l) order[l] = l;
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    if (trace.logs.source[a] != trace.logs.source[b]) {
      return trace.logs.source[a].value() < trace.logs.source[b].value();
    }
    return trace.logs.line_number[a] < trace.logs.line_number[b];
  });
  const tpe::SymbolId step_name = set.symbols.Intern("log window");
  for (size_t begin = 0; begin < order.size();) {
    size_t end = begin;
    while (end < order.size() && end - begin < kLogWindowLines &&
           trace.logs.source[order[end]] == trace.logs.source[order[begin]]) {
      ++end;
    }
    step_records::StepRecord record;
    record.bundle = "input";
    record.step = static_cast<int64_t>(set.records.size());
    const uint32_t first = order[begin], last = order[end - 1];
    record.request = fmt::format("{} lines {}-{}", trace.str(trace.logs.source[first]),
                                 trace.logs.line_number[first], trace.logs.line_number[last]);
    record.serialization.AppendNode(tpe::SymbolTable::LayerSymbol(model::Layer::kStep), step_name,
                                    -1, 0);
    record.node_rank.push_back(-1);
    record.node_layer.push_back(model::Layer::kStep);
    record.node_family.push_back(localize::ClassifyOperator(model::Layer::kStep, "log window"));
    record.node_queue_ns.push_back(0);
    record.node_affected.push_back(0);
    for (size_t i = begin; i < end; ++i) {
      const uint32_t l = order[i];
      step_records::RecordLog log;
      const model::TemplateId t = trace.logs.template_id[l];
      log.template_id = t.valid() && t.value() < template_of.size()
                            ? template_of[t.value()]
                            : step_records::TemplateVocabulary::kUnknown;
      log.level = trace.logs.level[l];
      log.rank = trace.logs.rank[l];
      log.text = std::string(trace.str(trace.logs.text[l]));
      record.logs.push_back(std::move(log));
    }
    set.records.push_back(std::move(record));
    begin = end;
  }
  verdict.records = static_cast<int64_t>(set.records.size());
  auto predictions = PredictRecords(trained, set);
  if (!predictions.ok()) {
    verdict.reason = "the model failed on the log lines: " + predictions.status().message();
    return verdict;
  }
  verdict.used = true;
  ReadPredictions(trained, set, *predictions, &verdict);
  verdict.operators.clear();  // a logs-only model names no operators
  verdict.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return verdict;
}

}  // namespace teller::learn
