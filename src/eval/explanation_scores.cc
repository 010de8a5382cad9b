#include "eval/explanation_scores.h"

#include <algorithm>
#include <set>
#include <vector>

#include "base/file_util.h"
#include "diagnose/diagnosis.h"
#include "diagnose/wording.h"
#include "learn/explanation_text.h"
#include "learn/model_diagnosis.h"
#include "localize/operator_family.h"
#include "store/open_trace.h"
#include "wire/labels_file.h"

namespace teller::eval {

namespace {

ExplanationTruth TruthOf(const wire::LabelsFault& fault) {
  ExplanationTruth truth;
  truth.faulty = true;
  truth.category = fault.category;
  // An engine pause stalls the engine loop, whose scheduler runs on rank 0 by design:
  // its place is the loop, not that rank.
  truth.rank = fault.mechanism == "engine_pause" ? -1 : fault.target.rank.value_or(-1);
  truth.node = fault.mechanism == "engine_pause" ? -1 : fault.target.node.value_or(-1);
  truth.family = fault.target.family.value_or("");
  if (!fault.affected_steps.empty()) {
    const auto [first, last] =
        std::minmax_element(fault.affected_steps.begin(), fault.affected_steps.end());
    truth.first_step = *first, truth.last_step = *last;
  }
  return truth;
}

ExplanationWorld WorldOf(const wire::Labels& labels) {
  return {labels.cluster.nodes * labels.cluster.gpus_per_node, labels.cluster.nodes,
          static_cast<int64_t>(labels.steps.size())};
}

std::string JoinedWords(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

// What a record lets a slot-form sentence name: its ranks and its nodes' operator
// families; the slots stand for themselves (their values come from a trace).
learn::ExplanationGround SlotGround(const step_records::StepRecord& record) {
  learn::ExplanationGround ground;
  ground.ranks.insert(record.ranks.begin(), record.ranks.end());
  for (localize::OperatorFamily family : record.node_family)
    ground.families.emplace(localize::OperatorFamilyName(family));
  ground.where = learn::kSlotWhere, ground.node = learn::kSlotNode;
  ground.when = learn::kSlotWhen, ground.percent = learn::kSlotPercent;
  ground.request = learn::kSlotRequest;
  return ground;
}

}  // namespace

base::StatusOr<SlotFormScores> ScoreSlotForm(std::string method,
                                             const step_records::RecordSet& test,
                                             const std::vector<std::vector<std::string>>& words,
                                             const std::vector<int>& types) {
  if (words.size() != test.records.size() || types.size() != test.records.size())
    return base::InvalidArgument("eval: {} gave {} sentences and {} types for {} records", method,
                                 words.size(), types.size(), test.records.size());
  SlotFormScores scores;
  scores.method = std::move(method);
  std::vector<std::string> hypotheses;
  std::vector<std::vector<std::string>> references;
  for (size_t r = 0; r < words.size(); ++r) {
    const step_records::StepRecord& record = test.records[r];
    if (!record.is_anomaly || record.explanations.empty() || words[r].empty()) continue;
    std::vector<std::string> phrasings;
    for (const std::string& e : record.explanations)
      phrasings.push_back(JoinedWords(learn::DelexicalizeExplanation(e)));
    hypotheses.push_back(JoinedWords(words[r]));
    if (scores.records++ == 0) {
      scores.example = hypotheses.back();
      scores.example_reference = phrasings.front();
    }
    scores.grounded += learn::RealizeExplanation(words[r], SlotGround(record)).grounded();
    scores.type_right += types[r] == static_cast<int>(record.fault_type);
    references.push_back(std::move(phrasings));
  }
  if (!hypotheses.empty()) {
    TELLER_ASSIGN_OR_RETURN(scores.bleu, ComputeCorpusBleu(hypotheses, references));
  }
  return scores;
}

base::StatusOr<ExplanationScores> ScoreRuleExplanations(const step_records::Dataset& dataset,
                                                        const std::unordered_set<std::string>& keys,
                                                        base::ProgressSink* progress,
                                                        const learn::TrainedModel* model) {
  std::set<std::string> wanted;
  for (const std::string& key : keys) wanted.insert(key.substr(0, key.find('/')));
  std::vector<std::string> hypotheses;
  std::vector<std::vector<std::string>> references;
  std::vector<CriteriaCheck> reference_checks, rule_checks, model_checks;
  std::vector<std::string> model_hypotheses, decoded;
  std::vector<std::vector<std::string>> decoded_references;
  ExplanationScores scores;
  scores.has_model = model != nullptr && model->options.model.explain_vocab > 0;
  scores.model_without_decoder = model != nullptr && !scores.has_model;
  size_t done = 0;
  for (const step_records::DatasetBundle& bundle : dataset.bundles) {
    if (!wanted.count(bundle.name)) continue;
    base::ReportProgress(progress, "explanations", done++, wanted.size());
    TELLER_ASSIGN_OR_RETURN(std::string text,
                            base::ReadFile(bundle.path + "/" + wire::kLabelsFileName));
    TELLER_ASSIGN_OR_RETURN(wire::Labels labels, wire::ParseLabels(text, bundle.path));
    std::vector<std::string> phrasings;
    const wire::LabelsFault* first_fault = nullptr;
    for (wire::LabelsFault& fault : labels.faults) {
      // A fault whose window lies past the run's end changed nothing: no reference.
      if (!fault.manifested) continue;
      if (!fault.explanations.empty() && first_fault == nullptr) first_fault = &fault;
      for (std::string& e : fault.explanations) phrasings.push_back(std::move(e));
    }
    if (phrasings.empty()) continue;
    const ExplanationTruth truth = TruthOf(*first_fault);
    const ExplanationWorld world = WorldOf(labels);
    for (const std::string& phrasing : phrasings) {
      reference_checks.push_back(CheckExplanation(ReadExplanation(phrasing), truth, world));
    }
    TELLER_ASSIGN_OR_RETURN(model::Trace trace,
                            store::OpenTrace({bundle.path}, store::OpenOptions{}));
    TELLER_ASSIGN_OR_RETURN(diagnose::Diagnosis diagnosis, diagnose::Diagnose(trace));
    const std::string explanation = diagnose::Explanation(trace, diagnosis);
    if (scores.runs == 0) {
      scores.example_run = bundle.name;
      scores.example_hypothesis = explanation;
      scores.example_reference = phrasings.front();
    }
    rule_checks.push_back(CheckExplanation(
        ReadExplanation(explanation + " " + diagnose::NextActionOf(diagnosis)), truth, world));
    hypotheses.push_back(explanation);
    if (scores.has_model) {
      const diagnose::ModelOpinion verdict = learn::DiagnoseWithModel(*model, "", trace);
      const bool grounded = !verdict.explanation.empty() && verdict.explanation_problems.empty();
      if (!verdict.explanation.empty()) {
        if (scores.model_decoded++ == 0) {
          scores.example_generated = verdict.explanation;
          scores.example_problems = verdict.explanation_problems;
        }
        scores.model_grounded += grounded;
        decoded.push_back(verdict.explanation);
        decoded_references.push_back(phrasings);
      }
      model_hypotheses.push_back(grounded ? verdict.explanation : explanation);
      const std::string checked =
          grounded ? verdict.explanation
                   : explanation + " " + diagnose::NextActionOf(diagnosis);
      model_checks.push_back(CheckExplanation(ReadExplanation(checked), truth, world));
    }
    references.push_back(std::move(phrasings));
    ++scores.runs;
  }
  base::ReportProgress(progress, "explanations", wanted.size(), wanted.size());
  if (scores.runs == 0) return scores;
  TELLER_ASSIGN_OR_RETURN(scores.bleu, ComputeCorpusBleu(hypotheses, references));
  scores.reference_criteria = ScoreCriteria(reference_checks);
  scores.rule_criteria = ScoreCriteria(rule_checks);
  if (scores.has_model) {
    TELLER_ASSIGN_OR_RETURN(scores.model_bleu, ComputeCorpusBleu(model_hypotheses, references));
    if (!decoded.empty()) {
      TELLER_ASSIGN_OR_RETURN(scores.decoded_bleu, ComputeCorpusBleu(decoded, decoded_references));
    }
    scores.model_criteria = ScoreCriteria(model_checks);
  }
  return scores;
}

}  // namespace teller::eval
