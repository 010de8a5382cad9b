#include "diagnose/decider.h"

#include <gtest/gtest.h>

#include <cmath>

#include "diagnose/diagnosis.h"
#include "sim/simulated_trace_testing.h"

namespace teller::diagnose {
namespace {

using sim::SimulatedTrace;

size_t FeatureIndex(std::string_view name) {
  const auto& names = DeciderFeatureNames();
  return static_cast<size_t>(std::find(names.begin(), names.end(), name) - names.begin());
}

// A decider that reads one feature: p = logistic(weight * (x - mean)), threshold 0.5.
Decider OneFeatureDecider(std::string_view feature, double weight, double mean) {
  const size_t width = DeciderFeatureNames().size();
  std::vector<double> means(width, 0.0), scales(width, 1.0), weights(width, 0.0);
  means[FeatureIndex(feature)] = mean;
  weights[FeatureIndex(feature)] = weight;
  Decider decider;
  decider.model = base::LogisticRegression::FromParameters(means, scales, weights, 0.0);
  return decider;
}

Diagnosis DiagnosedThrottle() {
  const model::Trace trace = SimulatedTrace("gpu_throttle:magnitude=1.6", "decider_throttle");
  auto diagnosis = Diagnose(trace);
  EXPECT_TRUE(diagnosis.ok()) << diagnosis.status().message();
  return diagnosis.ok() ? std::move(diagnosis).value() : Diagnosis{};
}

// Every candidate is read as a vector of the documented width, and the rules' first
// candidate is the one their verdict names.
TEST(DeciderTest, CandidatesAreTheRulesHypothesesInTheirOrder) {
  const Diagnosis diagnosis = DiagnosedThrottle();
  ASSERT_GE(diagnosis.candidates.size(), 2u);
  ASSERT_FALSE(diagnosis.causes.empty());
  EXPECT_EQ(diagnosis.candidates[0].hypothesis.kind, diagnosis.causes[0].hypothesis.kind);
  EXPECT_EQ(diagnosis.candidates[0].hypothesis.rank, diagnosis.causes[0].hypothesis.rank);
  for (size_t i = 0; i < diagnosis.candidates.size(); ++i) {
    const std::vector<double> x = CandidateFeatures(diagnosis, i);
    ASSERT_EQ(x.size(), DeciderFeatureNames().size());
    for (double v : x) EXPECT_TRUE(std::isfinite(v));
    EXPECT_EQ(x[FeatureIndex("rules_top")], i == 0 ? 1.0 : 0.0);
  }
  EXPECT_EQ(diagnosis.decider, "rules");
}

// A decider that reads only the rules' own threshold bit gives the rules' verdict.
TEST(DeciderTest, ADeciderOfTheRulesThresholdGivesTheRulesVerdict) {
  Diagnosis diagnosis = DiagnosedThrottle();
  const Diagnosis rules = diagnosis;
  ApplyDecider(OneFeatureDecider("above_rule_threshold", 20.0, 0.5), &diagnosis);
  EXPECT_EQ(diagnosis.decider, "learned");
  EXPECT_EQ(VerdictOf(diagnosis), VerdictOf(rules));
  ASSERT_EQ(diagnosis.causes.empty(), rules.causes.empty());
  EXPECT_EQ(diagnosis.causes[0].hypothesis.kind, rules.causes[0].hypothesis.kind);
  EXPECT_EQ(diagnosis.category, rules.category);
  EXPECT_EQ(diagnosis.candidate_probabilities.size(), diagnosis.candidates.size());
}

// The decider's ranking, not the rules', names the cause: one that prefers the rules'
// second candidate makes it the verdict's cause and the rules' first an alternative.
TEST(DeciderTest, TheDecidersTopCandidateIsTheCause) {
  Diagnosis diagnosis = DiagnosedThrottle();
  ASSERT_GE(diagnosis.candidates.size(), 2u);
  const cause::Hypothesis second = diagnosis.candidates[1].hypothesis;
  const cause::Hypothesis first = diagnosis.candidates[0].hypothesis;
  Decider decider = OneFeatureDecider("rules_top", -20.0, 0.5);  // anything but the first
  decider.threshold = 0.5;
  ApplyDecider(decider, &diagnosis);
  ASSERT_EQ(diagnosis.causes.size(), 1u);  // the rules' second cause goes with their first
  EXPECT_EQ(diagnosis.causes[0].hypothesis.kind, second.kind);
  EXPECT_EQ(diagnosis.causes[0].hypothesis.rank, second.rank);
  EXPECT_EQ(diagnosis.category, diagnosis.causes[0].category);
  EXPECT_TRUE(std::any_of(
      diagnosis.alternatives.begin(), diagnosis.alternatives.end(),
      [&](const cause::Hypothesis& h) { return h.kind == first.kind && h.rank == first.rank; }));
  EXPECT_LT(diagnosis.alternatives.size(), diagnosis.candidates.size());
}

// A candidate the rules' discounts left under one unit of evidence is never the cause,
// however likely the decider rates it: the next candidate with evidence is; with none,
// the run is healthy.
TEST(DeciderTest, ACandidateExplainedAwayIsNeverTheCause) {
  Diagnosis diagnosis = DiagnosedThrottle();
  ASSERT_GE(diagnosis.candidates.size(), 2u);
  diagnosis.candidates[1].hypothesis.score = 0.3;
  const cause::Hypothesis first = diagnosis.candidates[0].hypothesis;
  Decider decider = OneFeatureDecider("rules_top", -20.0, 0.5);  // anything but the first
  decider.threshold = 0.0;
  Diagnosis one = diagnosis;
  ApplyDecider(decider, &one);
  ASSERT_FALSE(one.causes.empty());
  EXPECT_EQ(one.causes[0].hypothesis.kind, first.kind);
  EXPECT_EQ(one.causes[0].hypothesis.rank, first.rank);
  for (auto& candidate : diagnosis.candidates) candidate.hypothesis.score = 0.5;
  ApplyDecider(decider, &diagnosis);
  EXPECT_TRUE(diagnosis.causes.empty());
  EXPECT_EQ(VerdictOf(diagnosis), RunVerdict::kHealthy);
  EXPECT_DOUBLE_EQ(diagnosis.degraded_probability, 0.0);
}

// Below its threshold no candidate is the cause: the run is healthy unless logs say more.
TEST(DeciderTest, ATopCandidateBelowTheThresholdLeavesTheRunHealthy) {
  Diagnosis diagnosis = DiagnosedThrottle();
  Decider decider = OneFeatureDecider("log_score", 0.0, 0.0);  // p = 0.5 everywhere
  decider.threshold = 0.9;
  ApplyDecider(decider, &diagnosis);
  EXPECT_TRUE(diagnosis.causes.empty());
  ASSERT_FALSE(diagnosis.failed);  // a throttle writes no log line that degrades the run
  EXPECT_EQ(VerdictOf(diagnosis), RunVerdict::kHealthy);
  EXPECT_EQ(diagnosis.category, FaultCategory::kNone);
  EXPECT_DOUBLE_EQ(diagnosis.degraded_probability, 0.5);
  // Every candidate is an alternative, as many as the report shows.
  EXPECT_EQ(diagnosis.alternatives.size(),
            std::min(diagnosis.candidates.size(), diagnosis.max_alternatives));
}

// Fitted on labelled candidates where one feature tells the cause, the decider ranks by it
// and its threshold separates the runs.
TEST(DeciderTest, FitLearnsTheFeatureThatTellsTheCause) {
  DeciderSamples samples;
  const size_t width = DeciderFeatureNames().size();
  const size_t explained = FeatureIndex("explained");
  for (int run = 0; run < 40; ++run) {
    const bool faulty = run % 2 == 0;
    samples.run_faulty.push_back(faulty);
    samples.run_modelled.push_back(faulty);
    for (int c = 0; c < 3; ++c) {
      std::vector<double> x(width, 0.0);
      const bool cause = faulty && c == 1;
      x[explained] = cause ? 0.8 + 0.005 * run : 0.1 + 0.002 * run;
      samples.rows.push_back(x);
      samples.is_cause.push_back(cause);
      samples.decidable.push_back(true);
      samples.run.push_back(run);
    }
  }
  const Decider decider = FitDecider(samples, "test");
  EXPECT_GT(decider.model.weights()[explained], 0.0);
  // Every other feature held one value (0) over the samples.
  ASSERT_EQ(decider.constant.size(), width);
  for (size_t j = 0; j < width; ++j) EXPECT_EQ(decider.constant[j], j != explained) << j;
  std::vector<double> strong(width, 0.0), weak(width, 0.0);
  strong[explained] = 0.85;
  weak[explained] = 0.15;
  EXPECT_GE(decider.model.Probability(strong), decider.threshold);
  EXPECT_LT(decider.model.Probability(weak), decider.threshold);
  EXPECT_EQ(decider.runs, 40);
  EXPECT_EQ(decider.candidates, 120);
}

// Four of 20 fault-free runs carry a candidate as strong as most faulty runs' causes: the
// threshold that sets the most runs right would flag them (20% false alarms for 40 more
// faulty runs named); the fitted one flags none, as it may flag at most 2.5% of them.
TEST(DeciderTest, TheThresholdFlagsFewFaultFreeDevelopmentRuns) {
  DeciderSamples samples;
  const size_t width = DeciderFeatureNames().size();
  const size_t explained = FeatureIndex("explained");
  auto add_run = [&](bool faulty, double top) {
    const int run = static_cast<int>(samples.run_faulty.size());
    samples.run_faulty.push_back(faulty);
    samples.run_modelled.push_back(faulty);
    for (int c = 0; c < 2; ++c) {
      std::vector<double> x(width, 0.0);
      x[explained] = c == 0 ? top : 0.05;
      samples.rows.push_back(x);
      samples.is_cause.push_back(faulty && c == 0);
      samples.decidable.push_back(true);
      samples.run.push_back(run);
    }
  };
  for (int i = 0; i < 80; ++i) add_run(true, 0.5 + 0.45 * i / 79.0);
  for (int i = 0; i < 20; ++i) add_run(false, i < 4 ? 0.8 : 0.1);
  const Decider decider = FitDecider(samples, "test");
  int false_alarms = 0, named = 0;
  for (size_t row = 0; row < samples.rows.size(); row += 2) {
    const bool flagged = decider.model.Probability(samples.rows[row]) >= decider.threshold;
    (samples.run_faulty[samples.run[row]] ? named : false_alarms) += flagged;
  }
  EXPECT_EQ(false_alarms, 0);
  EXPECT_GT(named, 0);
  EXPECT_LT(named, 80);
}

// A run the model read is fitted twice: as read, and with the model's columns zeroed, as
// the decider reads a trace the model did not run on.
TEST(DeciderTest, ARunTheModelReadIsAlsoFittedWithoutIt) {
  Diagnosis diagnosis = DiagnosedThrottle();
  CaseTruth truth;
  truth.faulty = true;
  truth.mechanism = "gpu_throttle";
  DeciderSamples without_model;
  AddDeciderSamples(truth, diagnosis, &without_model);
  EXPECT_EQ(without_model.run_faulty.size(), 1u);

  diagnosis.model.used = true;
  diagnosis.model.abnormal_probability = 0.9;
  diagnosis.model.step_probabilities = {{5, "", 0.95}, {6, "", 0.9}};
  DeciderSamples with_model;
  AddDeciderSamples(truth, diagnosis, &with_model);
  const size_t candidates = diagnosis.candidates.size();
  ASSERT_EQ(with_model.run_faulty.size(), 2u);
  ASSERT_EQ(with_model.rows.size(), 2 * candidates);
  for (size_t i = 0; i < candidates; ++i) {
    const std::vector<double>& read = with_model.rows[i];
    const std::vector<double>& unread = with_model.rows[candidates + i];
    EXPECT_EQ(read[FeatureIndex("model_used")], 1.0);
    EXPECT_EQ(read[FeatureIndex("model_run_p")], 0.9);
    EXPECT_EQ(unread, without_model.rows[i]);  // as if the model never ran
    EXPECT_EQ(with_model.is_cause[i], with_model.is_cause[candidates + i]);
    EXPECT_EQ(with_model.run[candidates + i], 1);
  }
}

// A run of a kind the decider was fitted on none of (a host-only job, where the draws hold
// none: the feature held 0 over all it saw) keeps the rules' decision and says why.
TEST(DeciderTest, ARunOfAKindNeverFittedOnKeepsTheRulesDecision) {
  Diagnosis diagnosis = DiagnosedThrottle();
  ASSERT_FALSE(diagnosis.causes.empty());
  Decider decider = OneFeatureDecider("rules_top", -20.0, 0.5);  // anything but the first
  decider.threshold = 0.5;
  decider.constant.assign(DeciderFeatureNames().size(), false);
  decider.constant[FeatureIndex("host_only_job")] = true;  // held 0 (its mean)
  Diagnosis seen = diagnosis;
  ApplyDecider(decider, &seen);
  EXPECT_EQ(seen.decider, "learned");  // fitted on runs like it: the decider's choice
  EXPECT_NE(seen.causes[0].hypothesis.kind, diagnosis.causes[0].hypothesis.kind);

  diagnosis.candidates[1].hypothesis.host_only_job = true;
  const Diagnosis rules = diagnosis;
  ApplyDecider(decider, &diagnosis);
  EXPECT_EQ(diagnosis.decider, "rules");
  EXPECT_TRUE(diagnosis.candidate_probabilities.empty());
  EXPECT_EQ(diagnosis.causes[0].hypothesis.kind, rules.causes[0].hypothesis.kind);
  EXPECT_EQ(diagnosis.causes[0].hypothesis.rank, rules.causes[0].hypothesis.rank);
  ASSERT_FALSE(diagnosis.notes.empty());
  EXPECT_NE(diagnosis.notes.back().find("host_only_job"), std::string::npos)
      << diagnosis.notes.back();
}

TEST(DeciderTest, JsonRoundTripsAndBadFilesSayWhy) {
  Decider decider = OneFeatureDecider("explained", 3.0, 0.4);
  decider.constant.assign(DeciderFeatureNames().size(), false);
  decider.constant[FeatureIndex("by_stall")] = true;
  auto back = ParseDecider(DeciderJson(decider), "decider.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->constant, decider.constant);
  std::vector<double> x(DeciderFeatureNames().size(), 0.2);
  EXPECT_DOUBLE_EQ(back->model.Probability(x), decider.model.Probability(x));
  EXPECT_DOUBLE_EQ(back->threshold, decider.threshold);

  auto not_json = ParseDecider("[1, 2", "d.json");
  ASSERT_FALSE(not_json.ok());
  EXPECT_NE(not_json.status().message().find("d.json"), std::string::npos);
  auto wrong_schema = ParseDecider(R"({"schema": "other/1"})", "d.json");
  ASSERT_FALSE(wrong_schema.ok());
  EXPECT_NE(wrong_schema.status().message().find("teller-decider/2"), std::string::npos);
  std::string bad_constant = DeciderJson(decider);
  bad_constant.replace(bad_constant.find("\"constant\": true"), 16, "\"constant\": 3");
  auto constant_not_bool = ParseDecider(bad_constant, "d.json");
  ASSERT_FALSE(constant_not_bool.ok());
  EXPECT_NE(constant_not_bool.status().message().find("constant"), std::string::npos);
  auto too_few = ParseDecider(R"({"schema": "teller-decider/2", "features": []})", "d.json");
  ASSERT_FALSE(too_few.ok());
  EXPECT_NE(too_few.status().message().find("expected"), std::string::npos);
}

}  // namespace
}  // namespace teller::diagnose
