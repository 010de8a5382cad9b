#include "diagnose/evaluation.h"

#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/layer.h"
#include "wire/labels_file.h"

namespace teller::diagnose {

base::StatusOr<CaseTruth> ParseTruth(std::string_view labels_json) {
  if (labels_json.empty()) return base::NotFound("evaluate: the input carries no labels.json");
  TELLER_ASSIGN_OR_RETURN(const wire::Labels labels, wire::ParseLabels(labels_json, "evaluate"));
  CaseTruth truth;
  for (const wire::LabelsFault& fault : labels.faults) {
    if (!fault.manifested) continue;
    truth.faulty = true;
    truth.mechanism = fault.mechanism;
    truth.category = FaultCategoryFromName(fault.category);
    if (fault.target.rank) truth.target_rank = *fault.target.rank;
    truth.steps.insert(fault.affected_steps.begin(), fault.affected_steps.end());
  }
  if (!truth.faulty) return truth;
  for (const wire::LabelsOperator& op : labels.affected_operators) {
    const auto layer = model::ParseLayer(op.layer);
    if (!layer || !wire::IsScoredInstance(op.role, op.kind)) continue;
    const localize::OperatorFamily family = localize::ClassifyOperator(*layer, op.name);
    truth.operators.emplace(op.rank, op.step, family);
    truth.families.insert(family);
  }
  return truth;
}

CaseScore ScoreDiagnosis(const CaseTruth& truth, const Diagnosis& diagnosis, size_t top_k) {
  CaseScore score;
  score.faulty = truth.faulty;
  score.has_operators = !truth.operators.empty();
  score.flagged = diagnosis.abnormal;
  score.predicted = diagnosis.category;
  score.category_correct = diagnosis.category == truth.category;
  if (!truth.faulty) return score;
  for (size_t i = 0; i < diagnosis.findings.size() && i < top_k; ++i) {
    const Finding& finding = diagnosis.findings[i];
    score.step_hit |= truth.steps.count(finding.step_number) > 0;
    score.family_hit |= truth.families.count(finding.family) > 0;
    if (truth.operators.count({finding.rank, finding.step_number, finding.family})) {
      if (!score.operator_hit) score.first_operator_hit = static_cast<int32_t>(i + 1);
      score.operator_hit = true;
    }
  }
  return score;
}

EvaluationTotals SumResults(const std::vector<CaseResult>& results) {
  EvaluationTotals totals;
  for (const CaseResult& result : results) {
    const CaseScore& s = result.score;
    totals.seconds += result.seconds;
    if (!s.faulty) {
      ++totals.normal;
      totals.flagged_normal += s.flagged;
      continue;
    }
    ++totals.faulty;
    totals.with_operators += s.has_operators;
    totals.step_hits += s.step_hit;
    totals.family_hits += s.family_hit;
    totals.operator_hits += s.operator_hit;
    totals.category_correct += s.category_correct;
    totals.flagged_faulty += s.flagged;
  }
  return totals;
}

namespace {

std::string Rate(int32_t hits, int32_t total) {
  if (total == 0) return "-";
  return fmt::format("{}/{} ({:.0f}%)", hits, total, 100.0 * hits / total);
}

std::map<std::string, std::vector<CaseResult>> ByMechanism(const std::vector<CaseResult>& results) {
  std::map<std::string, std::vector<CaseResult>> groups;
  for (const CaseResult& result : results) groups[result.truth.mechanism].push_back(result);
  return groups;
}

nlohmann::ordered_json TotalsJson(const EvaluationTotals& t) {
  auto ratio = [](int32_t a, int32_t b) {
    return b ? nlohmann::ordered_json(double(a) / b) : nullptr;
  };
  return {{"faulty_cases", t.faulty},
          {"faulty_cases_with_operators", t.with_operators},
          {"normal_cases", t.normal},
          {"step_and_operator_hit_rate", ratio(t.operator_hits, t.with_operators)},
          {"step_hit_rate", ratio(t.step_hits, t.faulty)},
          {"family_hit_rate", ratio(t.family_hits, t.faulty)},
          {"category_accuracy", ratio(t.category_correct, t.faulty)},
          {"flagged_faulty_rate", ratio(t.flagged_faulty, t.faulty)},
          {"false_alarm_rate", ratio(t.flagged_normal, t.normal)},
          {"diagnose_seconds", t.seconds}};
}

}  // namespace

std::string EvaluationMarkdown(const std::vector<CaseResult>& results, size_t top_k) {
  const EvaluationTotals t = SumResults(results);
  std::string out = fmt::format(
      "| Faulty runs | Step + operator family in top {} | Step in top {} | Family in top {} | "
      "Category correct | Flagged abnormal | Normal runs | False alarms |\n"
      "| --- | --- | --- | --- | --- | --- | --- | --- |\n"
      "| {} | {} | {} | {} | {} | {} | {} | {} |\n\n",
      top_k, top_k, top_k, t.faulty, Rate(t.operator_hits, t.with_operators),
      Rate(t.step_hits, t.faulty), Rate(t.family_hits, t.faulty),
      Rate(t.category_correct, t.faulty), Rate(t.flagged_faulty, t.faulty), t.normal,
      Rate(t.flagged_normal, t.normal));
  if (t.with_operators < t.faulty) {
    out += fmt::format(
        "Step + operator family is over the {} faulty runs whose fault touched operator "
        "instances; the other {} (faults on the scheduler or the KV cache) are in the step "
        "column only.\n\n",
        t.with_operators, t.faulty - t.with_operators);
  }
  out += fmt::format(
      "| Mechanism | Runs | Step + family (top {}) | Category correct | Predicted |\n"
      "| --- | --- | --- | --- | --- |\n",
      top_k);
  for (const auto& [mechanism, group] : ByMechanism(results)) {
    const EvaluationTotals g = SumResults(group);
    std::map<std::string_view, int> predicted;
    for (const CaseResult& r : group) ++predicted[FaultCategoryName(r.score.predicted)];
    std::string predicted_text;
    for (const auto& [name, count] : predicted) {
      predicted_text += fmt::format("{}{} x{}", predicted_text.empty() ? "" : ", ", name, count);
    }
    if (g.faulty == 0) {
      out += fmt::format("| {} | {} | - | - | {} |\n", mechanism, g.normal, predicted_text);
    } else {
      out += fmt::format("| {} | {} | {} | {} | {} |\n", mechanism, g.faulty,
                         Rate(g.operator_hits, g.with_operators),
                         Rate(g.category_correct, g.faulty), predicted_text);
    }
  }
  return out;
}

std::string EvaluationJson(const std::vector<CaseResult>& results, size_t top_k) {
  nlohmann::ordered_json out;
  out["top_k"] = top_k;
  out["totals"] = TotalsJson(SumResults(results));
  nlohmann::ordered_json mechanisms = nlohmann::ordered_json::object();
  for (const auto& [mechanism, group] : ByMechanism(results)) {
    mechanisms[mechanism] = TotalsJson(SumResults(group));
  }
  out["mechanisms"] = std::move(mechanisms);
  nlohmann::ordered_json cases = nlohmann::ordered_json::array();
  for (const CaseResult& r : results) {
    cases.push_back({{"bundle", r.bundle},
                     {"engine", r.engine},
                     {"mechanism", r.truth.mechanism},
                     {"category", FaultCategoryName(r.truth.category)},
                     {"predicted", FaultCategoryName(r.score.predicted)},
                     {"flagged", r.score.flagged},
                     {"step_hit", r.score.step_hit},
                     {"family_hit", r.score.family_hit},
                     {"operator_hit", r.score.operator_hit},
                     {"first_operator_hit", r.score.first_operator_hit},
                     {"seconds", r.seconds}});
  }
  out["cases"] = std::move(cases);
  return out.dump(1) + "\n";
}

}  // namespace teller::diagnose
