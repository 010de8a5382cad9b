#include "learn/model_diagnosis.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <unordered_set>

#include <fmt/format.h>

namespace teller::learn {

diagnose::ModelVerdict DiagnoseWithModel(const TrainedModel& trained, const std::string& folder,
                                         const model::Trace& trace) {
  const auto start = std::chrono::steady_clock::now();
  diagnose::ModelVerdict verdict;
  verdict.model = folder;
  verdict.threshold = trained.step_threshold;
  verdict.validation_step_f1 = trained.best_val_step_f1;
  records::RecordSet set;
  records::RecordOptions options;
  options.bundle = "input";
  options.vertical = trained.options.view == "vertical";
  options.max_logs_per_record = static_cast<size_t>(std::max(trained.options.input.max_logs, 1));
  base::Status status = records::AddTraceRecords(trace, options, &set);
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
  if (unknown_share > kMaxUnknownNameShare) {
    verdict.reason = fmt::format("{:.0f}% of the trace's operator names are unknown to the model "
                                 "(trained on other engines or libraries)",
                                 100 * unknown_share);
    return verdict;
  }
  auto predictions = PredictRecords(trained, set);
  if (!predictions.ok()) {
    verdict.reason = "the model failed on the trace: " + predictions.status().message();
    return verdict;
  }
  verdict.used = true;
  if (unknown_share > 0.1) {
    verdict.reason = fmt::format("{:.0f}% of the operator names are unknown to the model", 100 * unknown_share);
  }
  std::array<double, diagnose::kFaultCategoryCount> type_sum{};
  std::map<std::string, int> operator_votes;
  // One entry per step: its most abnormal request.
  std::map<int64_t, diagnose::ModelStep> by_step;
  for (size_t r = 0; r < predictions->size(); ++r) {
    const RecordPrediction& p = (*predictions)[r];
    verdict.abnormal_probability = std::max<double>(verdict.abnormal_probability, p.step_probability);
    if (p.step_probability < trained.step_threshold) continue;
    const records::StepRecord& record = set.records[r];
    diagnose::ModelStep& step = by_step[record.step];
    if (p.step_probability > step.probability) step = {record.step, record.request, p.step_probability};
    for (int c = 1; c < diagnose::kFaultCategoryCount; ++c) type_sum[c] += p.type_probability[c];
    for (const std::string& name : p.operators) ++operator_votes[name];
  }
  verdict.abnormal = !by_step.empty();
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
  verdict.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return verdict;
}

}  // namespace teller::learn
