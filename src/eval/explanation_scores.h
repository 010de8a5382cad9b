// Explanations against the simulator's references (paper Table 2, BLEU): the rules'
// grounded explanation (diagnose::Diagnose) of each faulty run of a split part,
// scored with corpus BLEU-1..4 against every reference phrasing in its labels.json,
// and the Table 9 criteria (explanation_criteria.h) of both against the labels.
// With a learned model, its decoder's explanation of the same runs too (the
// sentence where it passes the grounding check, else the rules' grounded one).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "base/progress.h"
#include "base/status.h"
#include "eval/explanation_criteria.h"
#include "eval/metrics.h"
#include "learn/root_cause.h"
#include "step_records/dataset.h"
#include "step_records/step_records.h"

namespace teller::eval {

struct ExplanationScores {
  int64_t runs = 0;  // faulty runs of the part with reference phrasings
  BleuScores bleu;
  // The paper's Table 9 criteria against each run's labels: every reference phrasing,
  // and the rules' explanation with its next action.
  CriteriaScores reference_criteria;
  CriteriaScores rule_criteria;
  std::string example_run, example_hypothesis, example_reference;  // the first run

  // The learned model's decoder (when a model with one was given).
  bool has_model = false;
  bool model_without_decoder = false;  // a model was given, one trained without a decoder
  int64_t model_decoded = 0;           // runs where the model flagged a step and said a sentence
  int64_t model_grounded = 0;          // of them, sentences that passed the grounding check
  BleuScores model_bleu;               // every run: the grounded sentence, else the rules'
  BleuScores decoded_bleu;             // the decoded runs: every sentence, grounded or not
  CriteriaScores model_criteria;  // every run, as model_bleu (the rules' with their next action)
  std::string example_generated;  // the first decoded run's sentence
  std::vector<std::string> example_problems;  // why it was dropped, when it was
};

// A method's generated explanations in slot form (learn/explanation_text.h), record
// level: the decoded words of each abnormal test record it said a sentence for,
// against that record's reference phrasings in slot form (facts as slots on both
// sides, so a sentence is scored on what it says, not on facts filled from a trace).
struct SlotFormScores {
  std::string method;
  int64_t records = 0;     // abnormal test records with a decoded sentence
  int64_t grounded = 0;    // of them, naming only the record's ranks and operator families
  int64_t type_right = 0;  // of them, whose fault type is the record's
  BleuScores bleu;
  std::string example, example_reference;  // the first record's
};

// words[i]: the method's decoded words for test record i (empty: none); types[i]: the
// fault type it gave the record (diagnose::FaultCategory as int).
base::StatusOr<SlotFormScores> ScoreSlotForm(std::string method,
                                             const step_records::RecordSet& test,
                                             const std::vector<std::vector<std::string>>& words,
                                             const std::vector<int>& types);

// keys: "bundle/request" of the part; a bundle counts when any of its requests is in
// it. Errors when a bundle does not open; runs without a fault are skipped.
base::StatusOr<ExplanationScores> ScoreRuleExplanations(const step_records::Dataset& dataset,
                                                        const std::unordered_set<std::string>& keys,
                                                        base::ProgressSink* progress = nullptr,
                                                        const learn::TrainedModel* model = nullptr);

}  // namespace teller::eval
