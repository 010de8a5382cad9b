// Explanations against the simulator's references (paper Table 2, BLEU): the rules'
// grounded explanation (diagnose::Diagnose) of each faulty run of a split part,
// scored with corpus BLEU-1..4 against every reference phrasing in its labels.json,
// and the Table 9 criteria (explanation_criteria.h) of both against the labels.
// The learned model has no explanation decoder, so this is the only hypothesis.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_set>

#include "base/progress.h"
#include "base/status.h"
#include "eval/explanation_criteria.h"
#include "eval/metrics.h"
#include "records/dataset.h"

namespace teller::eval {

struct ExplanationScores {
  int64_t runs = 0;  // faulty runs of the part with reference phrasings
  BleuScores bleu;
  // The paper's Table 9 criteria against each run's labels: every reference phrasing,
  // and the rules' explanation with its next action.
  CriteriaScores reference_criteria;
  CriteriaScores rule_criteria;
  std::string example_run, example_hypothesis, example_reference;  // the first run
};

// keys: "bundle/request" of the part; a bundle counts when any of its requests is in
// it. Errors when a bundle does not open; runs without a fault are skipped.
base::StatusOr<ExplanationScores> ScoreRuleExplanations(const records::Dataset& dataset,
                                                        const std::unordered_set<std::string>& keys,
                                                        base::ProgressSink* progress = nullptr);

}  // namespace teller::eval
