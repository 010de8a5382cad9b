#include "diagnose/evaluation.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/median.h"
#include "base/metrics.h"
#include "cause/cause_text.h"
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
    if (fault.target.node) truth.target_node = *fault.target.node;
    if (fault.target.family) truth.target_family = *fault.target.family;
    truth.steps.insert(fault.affected_steps.begin(), fault.affected_steps.end());
  }
  for (const wire::LabelsStep& step : labels.steps) {
    if (step.paired) truth.step_delta_ns[step.step] = step.delta_ns;
  }
  truth.step_count = static_cast<int64_t>(labels.steps.size());
  for (const wire::LabelsRequest& request : labels.requests) {
    if (request.is_fault) truth.requests.insert(request.id);
  }
  if (!truth.faulty) return truth;
  std::map<localize::OperatorFamily, int64_t> slowed;
  for (const wire::LabelsOperator& op : labels.affected_operators) {
    const auto layer = model::ParseLayer(op.layer);
    if (!layer || !wire::IsScoredInstance(op.role, op.kind)) continue;
    const localize::OperatorFamily family = localize::ClassifyOperator(*layer, op.name);
    truth.operators.emplace(op.rank, op.step, family);
    truth.families.insert(family);
    truth.step_operators[op.step].push_back(op.name);
    truth.step_operator_families[op.step].emplace_back(localize::OperatorFamilyName(family));
    if (op.role == "culprit" && op.kind == "timing") ++slowed[family];
  }
  int64_t most = 0;
  for (const auto& [family, count] : slowed) {
    if (count > most) most = count, truth.slowed_family = family;
  }
  return truth;
}

std::vector<cause::CauseKind> CauseKindsOf(std::string_view mechanism) {
  using cause::CauseKind;
  static const std::map<std::string_view, std::vector<CauseKind>> kKinds = {
      {"gpu_throttle", {CauseKind::kGpuSlow}},
      {"kernel_contention", {CauseKind::kGpuSlow}},
      {"kernel_slowdown", {CauseKind::kFamilySlow}},
      // A rank whose host slows down is a straggler when its peers wait for it.
      {"host_memory_pressure", {CauseKind::kHostSlow, CauseKind::kStraggler}},
      {"allocator_slow_path", {CauseKind::kAllocator}},
      {"memory_fragmentation", {CauseKind::kAllocator}},
      {"launch_latency", {CauseKind::kLaunchLatency}},
      // Launches that fail and are retried: the retries, or the launch time they add.
      {"driver_retry", {CauseKind::kLaunchRetry, CauseKind::kLaunchLatency}},
      {"memcpy_latency", {CauseKind::kCopyLatency}},
      {"sync_latency", {CauseKind::kSyncLatency}},
      {"link_degradation", {CauseKind::kLinkDegraded}},
      {"straggler_rank", {CauseKind::kStraggler, CauseKind::kHostSlow}},
      {"engine_pause", {CauseKind::kEnginePause}},
      {"operator_reorder", {CauseKind::kReorder}},
      {"starved_request", {CauseKind::kRequestStarved}},
      {"kv_cache_pressure", {CauseKind::kRequestPreempted}},
      {"decode_misroute", {CauseKind::kRequestMisrouted}},
  };
  auto found = kKinds.find(mechanism);
  return found == kKinds.end() ? std::vector<CauseKind>{} : found->second;
}

bool CauseMatches(const CaseTruth& truth, const cause::Hypothesis& hypothesis) {
  const std::vector<cause::CauseKind> kinds = CauseKindsOf(truth.mechanism);
  if (std::find(kinds.begin(), kinds.end(), hypothesis.kind) == kinds.end()) return false;
  if (cause::IsRankCause(hypothesis.kind) && truth.target_rank >= 0 &&
      hypothesis.rank != truth.target_rank) {
    return false;
  }
  // A node's hosts: the fault's node when it names one. The simulator names node N's
  // host "nodeN"; the map numbers hosts in its own order, so the name decides.
  if (hypothesis.kind == cause::CauseKind::kHostSlow && hypothesis.node >= 0 &&
      truth.target_node >= 0) {
    const bool same = hypothesis.node_name.empty()
                          ? hypothesis.node == truth.target_node
                          : hypothesis.node_name == fmt::format("node{}", truth.target_node);
    if (!same) return false;
  }
  if (hypothesis.kind == cause::CauseKind::kRequestStarved && !truth.requests.empty() &&
      truth.requests.count(hypothesis.request) == 0) {
    return false;
  }
  // A family named by the labels' (the injector's) name or by our family of most of the
  // kernels it slowed: softmax kernels slowed as "attention" are the softmax kernels.
  if (hypothesis.kind == cause::CauseKind::kFamilySlow && !truth.target_family.empty() &&
      localize::OperatorFamilyName(hypothesis.family) != truth.target_family &&
      hypothesis.family != truth.slowed_family) {
    return false;
  }
  return true;
}

double EvaluationTotals::StepF1() const {
  return base::F1FromCounts(steps_true, steps_false, steps_missed);
}

double EvaluationTotals::ModelStepF1() const {
  return base::F1FromCounts(model_steps_true, model_steps_false, model_steps_missed);
}

double EvaluationTotals::OperatorSetF1() const {
  return operator_set_items > 0 ? operator_set_f1 / static_cast<double>(operator_set_items) : -1.0;
}

double EvaluationTotals::OperatorFamilySetF1() const {
  return operator_set_items > 0 ? operator_family_f1 / static_cast<double>(operator_set_items)
                                : -1.0;
}

double EvaluationTotals::ModelOperatorSetF1() const {
  return model_operator_set_items > 0
             ? model_operator_set_f1 / static_cast<double>(model_operator_set_items)
             : -1.0;
}

namespace {

double MacroF1OfCategories(const std::vector<base::ClassCounts>& classes) {
  std::vector<base::ClassCounts> named = classes;
  if (!named.empty()) named[static_cast<size_t>(FaultCategory::kNone)] = {};
  return base::MacroF1FromCounts(named);
}

// One faulty case's category into per-category counts.
void CountCategory(FaultCategory truth, FaultCategory predicted,
                   std::vector<base::ClassCounts>* classes) {
  if (classes->empty()) classes->resize(kFaultCategoryCount);
  if (truth == predicted) {
    ++(*classes)[static_cast<size_t>(truth)].true_positives;
    return;
  }
  ++(*classes)[static_cast<size_t>(truth)].false_negatives;
  ++(*classes)[static_cast<size_t>(predicted)].false_positives;
}

// The learned model's flagged steps against the affected ones, and its category.
void ScoreModel(const CaseTruth& truth, const ModelOpinion& model, CaseScore* score) {
  score->model_used = model.used;
  if (!model.used) return;
  score->model_category = model.category;
  std::set<int64_t> flagged;
  for (const ModelStep& step : model.steps) flagged.insert(step.step);
  for (int64_t step : flagged) {
    (truth.steps.count(step) ? score->model_steps_true : score->model_steps_false) += 1;
  }
  for (int64_t step : truth.steps) score->model_steps_missed += flagged.count(step) == 0;
}

}  // namespace

double EvaluationTotals::CategoryMacroF1() const { return MacroF1OfCategories(categories); }
double EvaluationTotals::ModelCategoryMacroF1() const {
  return MacroF1OfCategories(model_categories);
}

namespace {

// The steps the verdict's cause shows in against the affected steps.
void ScoreCauseSteps(const CaseTruth& truth, const Diagnosis& diagnosis, CaseScore* score) {
  std::set<int64_t> predicted;
  if (!diagnosis.causes.empty()) {
    const cause::Hypothesis& h = diagnosis.causes.front().hypothesis;
    for (int64_t step = h.first_group; step <= h.last_group; ++step) {
      if (h.ShowsIn(step)) predicted.insert(step);
    }
  }
  for (int64_t step : predicted) {
    (truth.steps.count(step) ? score->steps_true : score->steps_false) += 1;
  }
  for (int64_t step : truth.steps) score->steps_missed += predicted.count(step) == 0;
}

void ScoreCause(const CaseTruth& truth, const Diagnosis& diagnosis, CaseScore* score) {
  score->cause_scored = !CauseKindsOf(truth.mechanism).empty();
  if (!score->cause_scored) return;
  std::vector<const cause::Hypothesis*> ranked;
  for (const RootCause& cause : diagnosis.causes) ranked.push_back(&cause.hypothesis);
  for (const cause::Hypothesis& h : diagnosis.alternatives) ranked.push_back(&h);
  for (size_t i = 0; i < ranked.size() && i < 3; ++i) {
    if (!CauseMatches(truth, *ranked[i])) continue;
    score->cause_top1 |= i == 0 && !diagnosis.causes.empty();
    score->cause_top3 = true;
  }
  if (!score->cause_top1) return;
  const cause::Hypothesis& h = *ranked[0];
  score->impact_scored = true;
  score->impact_ns = h.impact_ns;
  score->window_ns = h.step_baseline_ns;
  for (const auto& [step, delta] : truth.step_delta_ns) {
    if (step >= h.first_group && step <= h.last_group) {
      score->twin_ns += static_cast<double>(std::max<int64_t>(0, delta));
    }
  }
}

// Per affected step, the cause's operators that moved in it, and the model's suspects in the
// steps it flags, against the step's affected operators.
void ScoreOperatorSets(const CaseTruth& truth, const Diagnosis& diagnosis, CaseScore* score) {
  std::set<int64_t> flagged;
  for (const ModelStep& step : diagnosis.model.steps) flagged.insert(step.step);
  static const std::vector<std::string> kNone;
  auto truth_of = [](const std::map<int64_t, std::vector<std::string>>& sets, int64_t step) {
    const auto found = sets.find(step);
    return found == sets.end() ? kNone : found->second;
  };
  for (const int64_t step : truth.steps) {
    std::vector<std::string> names, families;
    if (!diagnosis.causes.empty()) {
      for (const CauseOperator& op : diagnosis.causes.front().operators) {
        if (!std::binary_search(op.groups.begin(), op.groups.end(), step)) continue;
        names.push_back(op.name);
        families.emplace_back(
            localize::OperatorFamilyName(localize::ClassifyOperator(op.layer, op.name)));
      }
    }
    ++score->operator_set_items;
    score->operator_set_f1 += base::ScoreSetPair(names, truth_of(truth.step_operators, step)).f1;
    score->operator_family_f1 +=
        base::ScoreSetPair(families, truth_of(truth.step_operator_families, step)).f1;
    const std::vector<std::string>& suspects =
        flagged.count(step) ? diagnosis.model.operators : kNone;
    score->model_operator_set_f1 +=
        base::ScoreSetPair(suspects, truth_of(truth.step_operators, step)).f1;
  }
}

}  // namespace

CaseScore ScoreDiagnosis(const CaseTruth& truth, const Diagnosis& diagnosis, size_t top_k) {
  CaseScore score;
  score.faulty = truth.faulty;
  score.has_operators = !truth.operators.empty();
  score.flagged = diagnosis.degraded;
  score.predicted = diagnosis.category;
  score.category_correct = diagnosis.category == truth.category;
  score.steps_total = static_cast<int32_t>(truth.step_count);
  ScoreCauseSteps(truth, diagnosis, &score);
  ScoreModel(truth, diagnosis.model, &score);
  if (!truth.faulty) return score;
  ScoreCause(truth, diagnosis, &score);
  ScoreOperatorSets(truth, diagnosis, &score);
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

double CaseScore::ImpactLogError() const {
  const double floor = std::max(1.0, 0.01 * window_ns);
  return std::abs(std::log((std::max(impact_ns, 0.0) + floor) / (twin_ns + floor)));
}

double EvaluationTotals::MedianImpactLogError() const {
  std::vector<double> errors = impact_log_errors;
  return base::MedianInPlace(&errors);
}

int32_t EvaluationTotals::ImpactsWithin(double factor) const {
  return static_cast<int32_t>(
      std::count_if(impact_log_errors.begin(), impact_log_errors.end(),
                    [&](double error) { return error <= std::log(factor); }));
}

EvaluationTotals SumResults(const std::vector<CaseResult>& results) {
  EvaluationTotals totals;
  for (const CaseResult& result : results) {
    const CaseScore& s = result.score;
    totals.seconds += result.seconds;
    totals.steps_true += s.steps_true;
    totals.steps_false += s.steps_false;
    totals.steps_missed += s.steps_missed;
    totals.steps_total += s.steps_total;
    if (s.model_used) {
      ++totals.model_used;
      totals.model_steps_true += s.model_steps_true;
      totals.model_steps_false += s.model_steps_false;
      totals.model_steps_missed += s.model_steps_missed;
      totals.model_steps_total += s.steps_total;
    }
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
    CountCategory(result.truth.category, s.predicted, &totals.categories);
    totals.operator_set_items += s.operator_set_items;
    totals.operator_set_f1 += s.operator_set_f1;
    totals.operator_family_f1 += s.operator_family_f1;
    if (s.model_used) {
      totals.model_operator_set_items += s.operator_set_items;
      totals.model_operator_set_f1 += s.model_operator_set_f1;
      ++totals.model_faulty;
      totals.model_category_correct += s.model_category == result.truth.category;
      CountCategory(result.truth.category, s.model_category, &totals.model_categories);
    }
    totals.flagged_faulty += s.flagged;
    totals.cause_scored += s.cause_scored;
    totals.cause_top1 += s.cause_top1;
    totals.cause_top3 += s.cause_top3;
    if (s.impact_scored) totals.impact_log_errors.push_back(s.ImpactLogError());
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

// A mean, or null without items (-1).
nlohmann::ordered_json OrNull(double mean) {
  return mean < 0.0 ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(mean);
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
          {"cause_scored_cases", t.cause_scored},
          {"cause_top1_rate", ratio(t.cause_top1, t.cause_scored)},
          {"cause_top3_rate", ratio(t.cause_top3, t.cause_scored)},
          {"cause_step_f1", t.StepF1()},
          {"cause_steps",
           {{"true", t.steps_true},
            {"false", t.steps_false},
            {"missed", t.steps_missed},
            {"total", t.steps_total}}},
          {"category_macro_f1", t.CategoryMacroF1()},
          {"operator_set",
           {{"steps", t.operator_set_items},
            {"f1", OrNull(t.OperatorSetF1())},
            {"family_f1", OrNull(t.OperatorFamilySetF1())}}},
          {"model",
           {{"cases", t.model_used},
            {"step_f1", t.ModelStepF1()},
            {"operator_set_f1", OrNull(t.ModelOperatorSetF1())},
            {"steps",
             {{"true", t.model_steps_true},
              {"false", t.model_steps_false},
              {"missed", t.model_steps_missed},
              {"total", t.model_steps_total}}},
            {"category_accuracy", ratio(t.model_category_correct, t.model_faulty)},
            {"category_macro_f1", t.ModelCategoryMacroF1()}}},
          {"impact_scored_cases", t.impact_log_errors.size()},
          {"impact_median_error_factor", std::exp(t.MedianImpactLogError())},
          {"impact_within_30_percent", t.ImpactsWithin(1.3)},
          {"diagnose_seconds", t.seconds}};
}

}  // namespace

std::string EvaluationMarkdown(const std::vector<CaseResult>& results, size_t top_k) {
  const EvaluationTotals t = SumResults(results);
  std::string out = fmt::format(
      "| Faulty runs | Cause top 1 | Cause top 3 | Cause step F1 | Category correct | Flagged "
      "degraded | Normal runs | False alarms |\n"
      "| --- | --- | --- | --- | --- | --- | --- | --- |\n"
      "| {} | {} | {} | {:.3f} | {} | {} | {} | {} |\n\n",
      t.faulty, Rate(t.cause_top1, t.cause_scored), Rate(t.cause_top3, t.cause_scored), t.StepF1(),
      Rate(t.category_correct, t.faulty), Rate(t.flagged_faulty, t.faulty), t.normal,
      Rate(t.flagged_normal, t.normal));
  out += fmt::format(
      "Findings (per operator family, the evidence under the cause): step + family in top {} "
      "{}, step in top {} {}, family in top {} {}.\n\n",
      top_k, Rate(t.operator_hits, t.with_operators), top_k, Rate(t.step_hits, t.faulty), top_k,
      Rate(t.family_hits, t.faulty));
  if (!t.impact_log_errors.empty()) {
    out += fmt::format(
        "Cost of the cause, where it is right at top 1 ({} runs), against the twin's step "
        "deltas over its window: median error a factor of {:.2f}, within 30% in {}.\n\n",
        t.impact_log_errors.size(), std::exp(t.MedianImpactLogError()),
        Rate(t.ImpactsWithin(1.3), static_cast<int32_t>(t.impact_log_errors.size())));
  }
  if (t.cause_scored < t.faulty) {
    out += fmt::format(
        "Cause columns are over the {} faulty runs of mechanisms a hypothesis models; the other "
        "{} (KV-cache pressure, starvation, misroutes, crashes, hangs) are told by the logs.\n\n",
        t.cause_scored, t.faulty - t.cause_scored);
  }
  if (t.with_operators < t.faulty) {
    out += fmt::format(
        "Step + operator family is over the {} faulty runs whose fault touched operator "
        "instances; the other {} (faults on the scheduler or the KV cache) are in the step "
        "column only.\n\n",
        t.with_operators, t.faulty - t.with_operators);
  }
  out += fmt::format(
      "| Mechanism | Runs | Cause top 1 | Cause top 3 | Step + family (top {}) | Category "
      "correct | Predicted |\n"
      "| --- | --- | --- | --- | --- | --- | --- |\n",
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
      out += fmt::format("| {} | {} | - | - | - | - | {} |\n", mechanism, g.normal, predicted_text);
    } else {
      out += fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", mechanism, g.faulty,
                         Rate(g.cause_top1, g.cause_scored), Rate(g.cause_top3, g.cause_scored),
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
    cases.push_back(
        {{"bundle", r.bundle},
         {"engine", r.engine},
         {"mechanism", r.truth.mechanism},
         {"category", FaultCategoryName(r.truth.category)},
         {"predicted", FaultCategoryName(r.score.predicted)},
         {"flagged", r.score.flagged},
         {"step_hit", r.score.step_hit},
         {"family_hit", r.score.family_hit},
         {"operator_hit", r.score.operator_hit},
         {"cause", r.cause},
         {"target_rank", r.truth.target_rank},
         {"target_family", r.truth.target_family},
         {"truth_steps", r.truth.steps},
         // The verdict's cause's steps against them: the counts of the cause step F1.
         {"cause_steps",
          {{"true", r.score.steps_true},
           {"false", r.score.steps_false},
           {"missed", r.score.steps_missed}}},
         {"cause_top1", r.score.cause_top1},
         {"cause_top3", r.score.cause_top3},
         {"impact_ns", r.score.impact_scored ? nlohmann::ordered_json(r.score.impact_ns) : nullptr},
         {"twin_ns", r.score.impact_scored ? nlohmann::ordered_json(r.score.twin_ns) : nullptr},
         {"first_operator_hit", r.score.first_operator_hit},
         // Sums over the affected steps (operator_set.steps of them).
         {"operator_set",
          {{"steps", r.score.operator_set_items},
           {"f1_sum", r.score.operator_set_f1},
           {"family_f1_sum", r.score.operator_family_f1}}},
         {"seconds", r.seconds}});
  }
  out["cases"] = std::move(cases);
  return out.dump(1) + "\n";
}

}  // namespace teller::diagnose
