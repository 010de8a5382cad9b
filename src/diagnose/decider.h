// The decider: one learned ranking of the run's cause candidates. The rules' hypotheses
// (cause/hypotheses.h) are the candidates; each is read as an evidence vector (its score
// against the rules' threshold, explained share, effect, replayed cost, window, victims,
// collectives reached last, kind, the log lines of its category, and the learned model's
// step probabilities inside its window and its fault type). A logistic regression fitted
// on labelled runs (`teller score-diagnosis --fit-decider`) says how likely each is the
// cause; the most likely one is the verdict's cause when it reaches the decider's
// threshold. `teller diagnose --decider rules` keeps the rules' own order and threshold.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/logistic_regression.h"
#include "base/status.h"
#include "diagnose/diagnosis.h"
#include "diagnose/evaluation.h"

namespace teller::diagnose {

// The evidence vector's columns, in order.
const std::vector<std::string_view>& DeciderFeatureNames();
// The evidence vector of diagnosis.candidates[candidate].
std::vector<double> CandidateFeatures(const Diagnosis& diagnosis, size_t candidate);

struct Decider {
  base::LogisticRegression model;
  // Per feature: whether it held one value (its mean) over every candidate fitted on. A run
  // with a candidate off it is of a kind the decider never saw (a host-only job, when the
  // development draws hold none): the rules decide it (ApplyDecider).
  std::vector<bool> constant;
  double threshold = 0.5;  // the top candidate's probability from which it is the cause
  int64_t candidates = 0;  // samples it was fitted on
  int64_t runs = 0;
  std::string fitted_on;
  std::string source;  // the file it was loaded from
};

// A candidate the rules' discounts (a warm-up, a regime, interleaved steps) or trims left
// under this much evidence over the drift is explained away: the decider ranks it after
// every candidate with evidence and never names it the cause. Fitted freely, the decider
// named an FSDP run's long-prompt first steps (score 0.3) a slow GPU at p 0.70, from its
// victims' waits and window alone.
inline constexpr double kLeastDecidableScore = 1.0;
bool IsDecidable(const cause::Hypothesis& candidate);

struct DeciderSamples {
  std::vector<std::vector<double>> rows;
  std::vector<bool> decidable;  // IsDecidable: may be the run's top candidate
  std::vector<bool> is_cause;  // the candidate names the injected fault (CauseMatches)
  std::vector<int32_t> run;    // the run of each row
  // Per run: faulty, and whether a hypothesis models its mechanism (CauseKindsOf).
  std::vector<bool> run_faulty;
  std::vector<bool> run_modelled;
};
void AddDeciderSamples(const CaseTruth& truth, const Diagnosis& diagnosis, DeciderSamples* samples);
// The regression, then the threshold that makes the most runs right on the same samples
// (a modelled faulty run whose top candidate is its cause and reaches it, a fault-free run
// whose top candidate does not) among those that flag at most kMaxDevelopmentFalseAlarms
// of the fault-free runs: half the 5% a release may raise, a margin for runs not seen.
inline constexpr double kMaxDevelopmentFalseAlarms = 0.025;
Decider FitDecider(const DeciderSamples& samples, std::string fitted_on);

// JSON (schema teller-decider/2) and back; errors name the source and what was expected.
std::string DeciderJson(const Decider& decider);
base::StatusOr<Decider> ParseDecider(std::string_view text, std::string_view source);
base::StatusOr<Decider> LoadDecider(const std::string& path);

// Ranks diagnosis->candidates by the decider and decides the trace's cause from the top
// one (causes, alternatives, degraded, category, degraded_probability); a hang, crash or
// OOM found in the run keeps its verdict. Sets diagnosis->decider. A run with a candidate
// off a feature the decider saw constant keeps the rules' decision, with a note that names
// the feature.
void ApplyDecider(const Decider& decider, Diagnosis* diagnosis);

}  // namespace teller::diagnose
