#include "eval/explanation_scores.h"

#include <set>
#include <vector>

#include "base/file_util.h"
#include "diagnose/diagnosis.h"
#include "store/open_trace.h"
#include "wire/labels_file.h"

namespace teller::eval {

base::StatusOr<ExplanationScores> ScoreRuleExplanations(const records::Dataset& dataset,
                                                        const std::unordered_set<std::string>& keys,
                                                        base::ProgressSink* progress) {
  std::set<std::string> wanted;
  for (const std::string& key : keys) wanted.insert(key.substr(0, key.find('/')));
  std::vector<std::string> hypotheses;
  std::vector<std::vector<std::string>> references;
  ExplanationScores scores;
  size_t done = 0;
  for (const records::DatasetBundle& bundle : dataset.bundles) {
    if (!wanted.count(bundle.name)) continue;
    base::ReportProgress(progress, "explanations", done++, wanted.size());
    TELLER_ASSIGN_OR_RETURN(std::string text,
                            base::ReadFile(bundle.path + "/" + wire::kLabelsFileName));
    TELLER_ASSIGN_OR_RETURN(wire::Labels labels, wire::ParseLabels(text, bundle.path));
    std::vector<std::string> phrasings;
    for (wire::LabelsFault& fault : labels.faults) {
      for (std::string& e : fault.explanations) phrasings.push_back(std::move(e));
    }
    if (phrasings.empty()) continue;
    TELLER_ASSIGN_OR_RETURN(model::Trace trace,
                            store::OpenTrace({bundle.path}, store::OpenOptions{}));
    TELLER_ASSIGN_OR_RETURN(diagnose::Diagnosis diagnosis, diagnose::Diagnose(trace));
    if (scores.runs == 0) {
      scores.example_run = bundle.name;
      scores.example_hypothesis = diagnosis.explanation;
      scores.example_reference = phrasings.front();
    }
    hypotheses.push_back(diagnosis.explanation);
    references.push_back(std::move(phrasings));
    ++scores.runs;
  }
  base::ReportProgress(progress, "explanations", wanted.size(), wanted.size());
  if (scores.runs == 0) return scores;
  TELLER_ASSIGN_OR_RETURN(scores.bleu, ComputeCorpusBleu(hypotheses, references));
  return scores;
}

}  // namespace teller::eval
