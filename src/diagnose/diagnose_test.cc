#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/file_util.h"
#include "base/testing.h"
#include "cause/instance_peers_testing.h"
#include "diagnose/calibration.h"
#include "diagnose/diagnose_tuning.h"
#include "diagnose/diagnosis.h"
#include "diagnose/diagnosis_json.h"
#include "diagnose/evaluation.h"
#include "wire/labels_file.h"
#include "diagnose/fault_rules.h"
#include "diagnose/hook_steps.h"
#include "diagnose/wording.h"
#include "sim/fault_spec.h"
#include "sim/sim_config.h"
#include "sim/simulated_trace_testing.h"
#include "sim/simulator.h"
#include "store/open_trace.h"

namespace teller::diagnose {
namespace {

using localize::OperatorFamily;

using sim::SimulatedTrace;

TEST(FaultRulesTest, CategoryNamesRoundTrip) {
  for (int c = 0; c < kFaultCategoryCount; ++c) {
    const auto category = static_cast<FaultCategory>(c);
    EXPECT_EQ(FaultCategoryFromName(FaultCategoryName(category)), category);
  }
  EXPECT_EQ(FaultCategoryFromName("no_such_category"), FaultCategory::kNone);
}

TEST(FaultRulesTest, FamiliesPointAtTheirLayerOfTheStack) {
  EXPECT_EQ(CategoryOfFamily(OperatorFamily::kGemm), FaultCategory::kCudaKernel);
  EXPECT_EQ(CategoryOfFamily(OperatorFamily::kAttention), FaultCategory::kCudaKernel);
  EXPECT_EQ(CategoryOfFamily(OperatorFamily::kAllReduce), FaultCategory::kCommunicationNetwork);
  EXPECT_EQ(CategoryOfFamily(OperatorFamily::kSendRecv), FaultCategory::kCommunicationNetwork);
  EXPECT_EQ(CategoryOfFamily(OperatorFamily::kAlloc), FaultCategory::kMemoryResource);
  EXPECT_EQ(CategoryOfFamily(OperatorFamily::kKvCache), FaultCategory::kMemoryResource);
  EXPECT_EQ(CategoryOfFamily(OperatorFamily::kLaunch), FaultCategory::kRuntimeDriver);
  EXPECT_EQ(CategoryOfFamily(OperatorFamily::kSync), FaultCategory::kRuntimeDriver);
  EXPECT_EQ(CategoryOfFamily(OperatorFamily::kFrontend), FaultCategory::kSchedulingSoftware);
  EXPECT_EQ(CategoryOfFamily(OperatorFamily::kUnnamed), FaultCategory::kNone);
}

TEST(DiagnoseTest, VerdictIsDecidedOnceFromTheDiagnosis) {
  Diagnosis diagnosis;
  EXPECT_EQ(VerdictOf(diagnosis), RunVerdict::kUndetermined);  // nothing scored
  diagnosis.steps_scored = 12;
  EXPECT_EQ(VerdictOf(diagnosis), RunVerdict::kHealthy);
  diagnosis.category = FaultCategory::kMemoryResource;  // a category alone decides nothing
  EXPECT_EQ(VerdictOf(diagnosis), RunVerdict::kHealthy);
  diagnosis.degraded = true;
  EXPECT_EQ(VerdictOf(diagnosis), RunVerdict::kDegraded);
  diagnosis.steps_scored = 0;
  EXPECT_EQ(VerdictOf(diagnosis), RunVerdict::kDegraded);
  diagnosis.failed = true;
  EXPECT_EQ(VerdictOf(diagnosis), RunVerdict::kFailed);
  EXPECT_EQ(RunVerdictName(RunVerdict::kHealthy), "healthy");
  EXPECT_EQ(RunVerdictName(RunVerdict::kDegraded), "degraded");
  EXPECT_EQ(RunVerdictName(RunVerdict::kFailed), "failed");
  EXPECT_EQ(RunVerdictName(RunVerdict::kUndetermined), "undetermined");
}

TEST(DiagnoseTest, NeedsAReconstructedTrace) {
  model::Trace trace;
  EXPECT_FALSE(Diagnose(trace).ok());
}

// The simulator's default faults are mild (the benchmark must stay hard, see
// docs/results.md); these tests inject strong ones to check the mechanics.
constexpr const char* kLinkFault = "link_degradation:magnitude=2.0";

// One answer: the findings on the verdict's cause's ranks and steps come first, and each
// part keeps the findings' order.
// Without a cause none supports one.
void ExpectCauseSupportFirst(const Diagnosis& diagnosis) {
  const std::vector<Finding>& findings = diagnosis.findings;
  for (size_t i = 0; i < findings.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "finding " << i);
    EXPECT_EQ(findings[i].supports_cause,
              diagnosis.degraded && !diagnosis.causes.empty() &&
                  SupportsCause(diagnosis.causes[0], findings[i].rank, findings[i].group));
    if (i == 0) continue;
    EXPECT_GE(findings[i - 1].supports_cause, findings[i].supports_cause);
    if (findings[i - 1].supports_cause == findings[i].supports_cause) {
      EXPECT_TRUE(FindingBefore(findings[i - 1], findings[i]));
    }
  }
}

TEST(DiagnoseTest, DegradedLinkIsFoundInItsStepsAndCalledACommunicationFault) {
  const model::Trace trace = SimulatedTrace(kLinkFault, "diagnose_link");
  auto truth = ParseTruth(trace.meta.labels_json);
  ASSERT_TRUE(truth.ok()) << truth.status().message();
  ASSERT_TRUE(truth->faulty);
  EXPECT_EQ(truth->mechanism, "link_degradation");
  ASSERT_FALSE(truth->operators.empty());

  auto diagnosis = Diagnose(trace);
  ASSERT_TRUE(diagnosis.ok()) << diagnosis.status().message();
  ASSERT_GE(diagnosis->findings.size(), 3u);
  ExpectCauseSupportFirst(*diagnosis);
  const CaseScore score = ScoreDiagnosis(*truth, *diagnosis, 3);
  EXPECT_TRUE(score.step_hit);
  // The degraded links are the cross-node send/recv; the top findings are the
  // all-reduces of the ranks that wait for them, a symptom the labels do not mark.
  // Suspects are instances of the finding's family in its step; the slice keeps them.
  const Finding& top = diagnosis->findings.front();
  EXPECT_TRUE(localize::IsCollectiveFamily(top.family));
  ASSERT_FALSE(top.suspects.empty());
  localize::FamilyCache families(trace);
  for (model::NodeIndex node : top.suspects) {
    EXPECT_EQ(trace.nodes.step[node.value()], top.step);
    EXPECT_EQ(families.Get(trace.nodes.event[node.value()]), top.family);
    EXPECT_TRUE(std::binary_search(top.slice.nodes.begin(), top.slice.nodes.end(), node));
  }
  EXPECT_LT(top.slice.nodes.size(), static_cast<size_t>(top.slice.step_nodes));
  ASSERT_FALSE(diagnosis->requests.empty());
  ASSERT_FALSE(diagnosis->steps.empty());
  EXPECT_TRUE(truth->steps.count(diagnosis->steps.front().number));
  // The closest cause is the send/recv collectives' link, in the fault's steps. In so
  // short a run (24 steps a rank) its score stays under the threshold (chosen so that no
  // fault-free run of the development set reaches it), so the run reads healthy and the
  // explanation names the link as the closest cause.
  const std::vector<RootCause>& causes = diagnosis->causes;
  const cause::Hypothesis& cause =
      causes.empty() ? diagnosis->alternatives.at(0) : causes.front().hypothesis;
  const std::string explanation = Explanation(trace, *diagnosis);
  EXPECT_EQ(cause.kind, cause::CauseKind::kLinkDegraded) << explanation;
  EXPECT_EQ(cause.family, OperatorFamily::kSendRecv);
  EXPECT_TRUE(truth->steps.count(cause.first_group)) << cause.first_group;
  EXPECT_NE(explanation.find(localize::OperatorFamilyName(cause.family)), std::string::npos)
      << explanation;
  EXPECT_EQ(diagnosis->category,
            causes.empty() ? FaultCategory::kNone : FaultCategory::kCommunicationNetwork);
}

TEST(DiagnoseTest, SlowLaunchesOnOneRankAreAmongTheTopFindings) {
  const model::Trace trace =
      SimulatedTrace("launch_latency:rank=1,magnitude=3.0", "diagnose_launch");
  auto truth = ParseTruth(trace.meta.labels_json);
  ASSERT_TRUE(truth.ok());
  EXPECT_EQ(truth->target_rank, 1);
  auto diagnosis = Diagnose(trace);
  ASSERT_TRUE(diagnosis.ok());
  const CaseScore score = ScoreDiagnosis(*truth, *diagnosis, 3);
  EXPECT_TRUE(score.operator_hit);
  bool launch_on_rank_1 = false;
  for (size_t i = 0; i < 3 && i < diagnosis->findings.size(); ++i) {
    launch_on_rank_1 |= diagnosis->findings[i].rank == 1 &&
                        diagnosis->findings[i].family == OperatorFamily::kLaunch;
  }
  EXPECT_TRUE(launch_on_rank_1);
}

TEST(DiagnoseTest, AKernelSlowdownOnEveryRankForMostStepsIsFound) {
  // Every rank and most steps are slow: the run's median is the fault's, and only
  // leaving the slow regime out of the baseline shows the attention family.
  const model::Trace trace = SimulatedTrace(
      "kernel_slowdown:family=attention,magnitude=0.4,onset=10,duration=70", "diagnose_slowdown");
  auto truth = ParseTruth(trace.meta.labels_json);
  ASSERT_TRUE(truth.ok());
  ASSERT_TRUE(truth->faulty);
  DiagnoseOptions options;
  auto diagnosis = Diagnose(trace, options);
  ASSERT_TRUE(diagnosis.ok());
  EXPECT_TRUE(ScoreDiagnosis(*truth, *diagnosis, 3).operator_hit);
  options.exclude_shifts = false;
  auto without = Diagnose(trace, options);
  ASSERT_TRUE(without.ok());
  auto attention_score = [](const Diagnosis& d) {
    double best = 0.0;
    for (const Finding& f : d.findings) {
      if (f.family == OperatorFamily::kAttention) best = std::max(best, f.score);
    }
    return best;
  };
  EXPECT_GT(attention_score(*diagnosis), attention_score(*without));
}

TEST(DiagnoseTest, AllocatorStallsOnAnIdleDataParallelRankAreAMemoryFault) {
  // Torch FSDP, 6 data-parallel ranks, 3 requests: ranks 3-5 serve nothing and run
  // dummy steps to keep their collectives in step. cudaMalloc shows up inside the
  // steps of rank 4 only while the fault lasts.
  const model::Trace trace = SimulatedTrace(
      sim::SmallConfig(sim::EngineKind::kTorchFsdp, 4, 3),
      "allocator_slow_path:rank=4,onset=4,duration=8,magnitude=0.3", "diagnose_idle");
  auto truth = ParseTruth(trace.meta.labels_json);
  ASSERT_TRUE(truth.ok());
  ASSERT_TRUE(truth->faulty);
  DiagnoseOptions options;
  auto diagnosis = Diagnose(trace, options);
  ASSERT_TRUE(diagnosis.ok());
  EXPECT_TRUE(ScoreDiagnosis(*truth, *diagnosis, 3).operator_hit);
  std::string votes;
  for (const CategoryVote& vote : diagnosis->votes) votes += vote.reason + "; ";
  EXPECT_EQ(diagnosis->category, FaultCategory::kMemoryResource) << votes;
  bool alloc_on_rank_4 = false;
  for (const Finding& f : diagnosis->findings) {
    if (f.rank == 4 && f.family == OperatorFamily::kAlloc) {
      alloc_on_rank_4 = true;
      EXPECT_EQ(f.median, 0.0);  // no allocations in its comparable steps
    }
  }
  EXPECT_TRUE(alloc_on_rank_4);
  // Without idle steps, rank 4 (which serves no request) is never scored.
  options.score_idle_steps = false;
  auto without = Diagnose(trace, options);
  ASSERT_TRUE(without.ok());
  for (const Finding& f : without->findings) EXPECT_NE(f.rank, 4);
}

TEST(DiagnoseTest, TwoGcPausesAFewStepsApartDoNotFlagAFaultFreeRun) {
  // Seed 8 pauses the engine loop for garbage collection in steps 11 and 15.
  const model::Trace trace = SimulatedTrace("", "diagnose_gc", 8);
  const nlohmann::json labels = nlohmann::json::parse(trace.meta.labels_json);
  std::vector<int64_t> pauses;
  for (const auto& step : labels["steps"]) {
    if (step["benign"] == "gc_pause") pauses.push_back(step["step"].get<int64_t>());
  }
  bool close_pair = false;
  for (size_t i = 1; i < pauses.size(); ++i) close_pair |= pauses[i] - pauses[i - 1] < 5;
  ASSERT_TRUE(close_pair) << "the simulator no longer pauses twice within 5 steps on seed 8";
  DiagnoseOptions options;
  options.flag_trim_steps = 0;
  auto untrimmed = Diagnose(trace, options);
  ASSERT_TRUE(untrimmed.ok());
  ASSERT_FALSE(untrimmed->findings.empty());
  EXPECT_EQ(untrimmed->findings.front().family, OperatorFamily::kFrontend);
  // The window mean of two capped spikes would make a finding; no cause is fitted to it.
  EXPECT_GE(untrimmed->findings.front().flag_score, untrimmed->threshold);
  EXPECT_FALSE(untrimmed->degraded);
  auto diagnosis = Diagnose(trace, DiagnoseOptions{});
  ASSERT_TRUE(diagnosis.ok());
  EXPECT_FALSE(diagnosis->degraded);
  EXPECT_EQ(VerdictOf(*diagnosis), RunVerdict::kHealthy);
  for (const Finding& f : diagnosis->findings) {
    EXPECT_LE(f.flag_score, f.score);
    EXPECT_LT(f.flag_score, diagnosis->threshold);
  }
}

TEST(DiagnoseTest, OperatorsRunInAnotherOrderAreASoftwareChange) {
  // Rotary before the q/k norm in half the layers: the same kernels, the same times.
  const model::Trace trace =
      SimulatedTrace(sim::SmallConfig(sim::EngineKind::kSglang, 24, 8),
                     "operator_reorder:magnitude=0.5,onset=10,duration=15", "diagnose_reorder");
  auto truth = ParseTruth(trace.meta.labels_json);
  ASSERT_TRUE(truth.ok());
  ASSERT_TRUE(truth->faulty);
  auto diagnosis = Diagnose(trace, DiagnoseOptions{});
  ASSERT_TRUE(diagnosis.ok());
  EXPECT_TRUE(ScoreDiagnosis(*truth, *diagnosis, 3).operator_hit);
  ASSERT_FALSE(diagnosis->findings.empty());
  // Among the top 3: the norm or rotary family, by its kernels out of order.
  std::string listed;
  bool order_finding = false;
  for (size_t i = 0; i < diagnosis->findings.size(); ++i) {
    const Finding& f = diagnosis->findings[i];
    listed += fmt::format("{} {} r{} s{} {:.1f} {}/{}; ", localize::OperatorFamilyName(f.family),
                          localize::FeatureName(f.feature), f.rank, f.step_number, f.score, f.value,
                          f.median);
    if (i < 3 && f.feature == localize::Feature::kOrderBreaks &&
        (f.family == OperatorFamily::kNorm || f.family == OperatorFamily::kRotary)) {
      order_finding = true;
      EXPECT_GT(f.value, f.median);
    }
  }
  EXPECT_TRUE(order_finding) << listed;
  EXPECT_EQ(diagnosis->category, FaultCategory::kSchedulingSoftware);
}

TEST(DiagnoseTest, FaultFreeRunScoresBelowTheFaultyOne) {
  const model::Trace normal = SimulatedTrace("", "diagnose_normal");
  const model::Trace faulty = SimulatedTrace(kLinkFault, "diagnose_faulty");
  auto normal_diagnosis = Diagnose(normal);
  auto faulty_diagnosis = Diagnose(faulty);
  ASSERT_TRUE(normal_diagnosis.ok());
  ASSERT_TRUE(faulty_diagnosis.ok());
  ASSERT_FALSE(normal_diagnosis->findings.empty());
  EXPECT_LT(normal_diagnosis->findings.front().score, faulty_diagnosis->findings.front().score);
  auto truth = ParseTruth(normal.meta.labels_json);
  ASSERT_TRUE(truth.ok());
  EXPECT_FALSE(truth->faulty);
  // Steps that serve no request (warm-up, graph capture) and the first serving
  // step of each rank never make a finding.
  for (const Finding& finding : normal_diagnosis->findings) {
    EXPECT_GT(normal.steps.requests_count[finding.step.value()], 0u);
  }
}

// Whichever candidate decides (the rules' first, or the decider's choice), its own findings
// were kept, come first and carry their slices; a benign spike elsewhere is not among them.
TEST(DiagnoseTest, TheChosenCandidatesFindingsComeFirstWhicheverIsChosen) {
  const model::Trace trace = SimulatedTrace(kLinkFault, "diagnose_link_candidates");
  auto diagnosis = Diagnose(trace);
  ASSERT_TRUE(diagnosis.ok()) << diagnosis.status().message();
  ASSERT_GE(diagnosis->candidates.size(), 2u);
  const localize::StepFeatures features = localize::ComputeStepFeatures(trace);
  Diagnosis scratch;
  const std::vector<Finding> all = ScoreAllFindings(
      localize::FeatureRowsOfPart(trace, features), DiagnoseOptions{}, &scratch);
  for (size_t chosen = 0; chosen < diagnosis->candidates.size(); ++chosen) {
    SCOPED_TRACE(::testing::Message() << "candidate " << chosen);
    std::vector<size_t> order(diagnosis->candidates.size());
    std::iota(order.begin(), order.end(), 0);
    std::rotate(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(chosen),
                order.begin() + static_cast<std::ptrdiff_t>(chosen) + 1);
    ChooseCause(order, true, 0.9, {}, &*diagnosis);
    ExpectCauseSupportFirst(*diagnosis);
    const RootCause& cause = diagnosis->candidates[chosen];
    // The best of all that support it, as many as a report shows.
    std::vector<const Finding*> best;
    for (const Finding& f : all) {
      if (SupportsCause(cause, f.rank, f.group)) best.push_back(&f);
    }
    best.resize(std::min(best.size(), diagnosis->max_findings));
    ASSERT_EQ(ListedOf(*diagnosis, diagnosis->findings, diagnosis->max_findings), best.size());
    for (size_t i = 0; i < best.size(); ++i) {
      const Finding& kept = diagnosis->findings[i];
      EXPECT_EQ(kept.rank, best[i]->rank) << i;
      EXPECT_EQ(kept.family, best[i]->family) << i;
      EXPECT_EQ(kept.step, best[i]->step) << i;
      if (i < 5) {
        EXPECT_TRUE(kept.slice.step.valid()) << i;
      }
    }
  }
}

TEST(DiagnoseTest, JsonCarriesTheFindingsAndParses) {
  const model::Trace trace = SimulatedTrace(kLinkFault, "diagnose_json");
  auto diagnosis = Diagnose(trace);
  ASSERT_TRUE(diagnosis.ok());
  const nlohmann::json json = nlohmann::json::parse(DiagnosisToJson(trace, *diagnosis));
  EXPECT_EQ(json["schema"], kDiagnosisSchema);
  EXPECT_EQ(json["verdict"], RunVerdictName(VerdictOf(*diagnosis)));
  EXPECT_EQ(json["category"], FaultCategoryName(diagnosis->category));
  EXPECT_EQ(json["cause"].is_null(), diagnosis->causes.empty());
  ASSERT_FALSE(json["cause"].is_null());
  EXPECT_EQ(json["cause"]["kind"], "link_degraded") << json["cause"].dump(1);
  EXPECT_EQ(json["cause"]["family"], "sendrecv");
  EXPECT_EQ(json["verdict"], "degraded");
  // Those of the cause and the others, at most max_findings each.
  const size_t supporting = static_cast<size_t>(
      std::count_if(diagnosis->findings.begin(), diagnosis->findings.end(),
                    [](const Finding& f) { return f.supports_cause; }));
  ASSERT_GT(supporting, 0u);
  ASSERT_EQ(json["findings"].size(),
            std::min(supporting, diagnosis->max_findings) +
                std::min(diagnosis->findings.size() - supporting, diagnosis->max_findings));
  const nlohmann::json& top = json["findings"][0];
  EXPECT_TRUE(top["supports_cause"].get<bool>());
  EXPECT_EQ(top["rank"], diagnosis->findings[0].rank);
  EXPECT_EQ(top["step"], diagnosis->findings[0].step_number);
  EXPECT_EQ(top["family"], localize::OperatorFamilyName(diagnosis->findings[0].family));
  EXPECT_EQ(top["suspects"].size(), diagnosis->findings[0].suspects.size());
  EXPECT_EQ(top["slice"]["kept_nodes"], diagnosis->findings[0].slice.nodes.size());
  EXPECT_EQ(json["abnormal_requests"].size(), diagnosis->requests.size());
}

// --tune sets a registered value by name, the diagnosis runs with it, and the JSON
// records every value it ran with.
TEST(DiagnoseTest, ATunedValueChangesTheVerdictAndTheJsonRecordsIt) {
  const model::Trace trace = SimulatedTrace(kLinkFault, "diagnose_json");
  DiagnoseOptions options;
  const std::vector<std::pair<std::string, double>> defaults = TuningOf(options);
  ASSERT_EQ(defaults.size(), base::TunedValues().size());
  for (size_t i = 0; i < defaults.size(); ++i) {
    EXPECT_EQ(defaults[i].first, base::TunedValues()[i].Name());
    EXPECT_DOUBLE_EQ(defaults[i].second, base::TunedValues()[i].default_value);
  }
  auto tuned = base::ParseTuningOverride("cause.min_score=1e9");
  ASSERT_TRUE(tuned.ok());
  ASSERT_TRUE(ApplyTuning(*tuned, &options).ok());
  EXPECT_EQ(options.causes.min_score, 1e9);
  auto diagnosis = Diagnose(trace, options);
  ASSERT_TRUE(diagnosis.ok());
  EXPECT_TRUE(diagnosis->causes.empty());
  const nlohmann::json json = nlohmann::json::parse(DiagnosisToJson(trace, *diagnosis));
  EXPECT_EQ(json["verdict"], "healthy");
  EXPECT_EQ(json["tuning"]["cause.min_score"], 1e9);
  EXPECT_EQ(json["tuning"]["cause.drift"], options.causes.drift);
  EXPECT_EQ(json["tuning"].size(), defaults.size());
}

TEST(CalibrationTest, FittedOnLabelledRunsTheFaultyRunIsMoreLikelyFaulty) {
  const model::Trace normal = SimulatedTrace("", "calibration_normal");
  const model::Trace link = SimulatedTrace(kLinkFault, "calibration_link");
  const model::Trace launch =
      SimulatedTrace("launch_latency:rank=1,magnitude=3.0", "calibration_launch");
  CalibrationSamples samples;
  std::vector<Diagnosis> diagnoses;
  for (const model::Trace* trace : {&normal, &link, &launch}) {
    auto truth = ParseTruth(trace->meta.labels_json);
    ASSERT_TRUE(truth.ok());
    auto diagnosis = Diagnose(*trace, DiagnoseOptions{});
    ASSERT_TRUE(diagnosis.ok());
    AddCalibrationSamples(*truth, *diagnosis, &samples);
    diagnoses.push_back(std::move(diagnosis).value());
  }
  ASSERT_EQ(samples.run_scores.size(), 3u);
  ASSERT_EQ(samples.finding_scores.size(), samples.finding_hits.size());
  ASSERT_GT(std::count(samples.finding_hits.begin(), samples.finding_hits.end(), true), 0);
  const DiagnoseCalibration calibration = FitCalibration(samples, "three simulated runs");
  EXPECT_EQ(calibration.runs, 3);
  for (Diagnosis& diagnosis : diagnoses) {
    ApplyCalibration(calibration, &diagnosis);
    EXPECT_GE(diagnosis.degraded_probability, 0.0);
    EXPECT_LE(diagnosis.degraded_probability, 1.0);
    for (size_t i = 1; i < diagnosis.findings.size(); ++i) {
      // Findings are ranked by score (those of the cause first) and the calibration is
      // monotone in it.
      if (diagnosis.findings[i].supports_cause != diagnosis.findings[i - 1].supports_cause) {
        continue;
      }
      EXPECT_LE(diagnosis.findings[i].probability, diagnosis.findings[i - 1].probability + 1e-12);
    }
  }
  EXPECT_LT(diagnoses[0].degraded_probability, diagnoses[1].degraded_probability);
}

TEST(CalibrationTest, JsonRoundTripsAndBadFilesAreClearErrors) {
  DiagnoseCalibration calibration;
  calibration.finding = base::PlattScaler::FromParameters(1.5, -4.0);
  calibration.run = base::PlattScaler::FromParameters(2.0, -3.0);
  calibration.findings = 120;
  calibration.runs = 12;
  calibration.fitted_on = "dev";
  auto parsed = ParseCalibration(CalibrationJson(calibration), "c.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_DOUBLE_EQ(parsed->finding.a(), 1.5);
  EXPECT_DOUBLE_EQ(parsed->run.b(), -3.0);
  EXPECT_EQ(parsed->findings, 120);
  EXPECT_EQ(parsed->fitted_on, "dev");
  EXPECT_DOUBLE_EQ(parsed->run.Probability(5.0), calibration.run.Probability(5.0));
  const std::string path = base::TempDir("calibration_file") + "/c.json";
  ASSERT_TRUE(base::WriteFileAtomic(path, CalibrationJson(calibration)).ok());
  auto loaded = LoadCalibration(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_DOUBLE_EQ(loaded->finding.b(), -4.0);
  auto missing = LoadCalibration(path + ".missing");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("c.json.missing"), std::string::npos);
  for (const char* bad : {"", "[]", "{\"schema\": \"other\"}", "{\"schema\": 3}",
                          "{\"schema\": \"teller-diagnose-calibration/1\", \"finding\": 1}",
                          "{\"schema\": \"teller-diagnose-calibration/1\", "
                          "\"finding\": {\"a\": 1}}",
                          "{\"schema\": \"teller-diagnose-calibration/1\", \"finding\": {\"a\": 1, "
                          "\"b\": 2}, \"run\": {\"a\": \"x\", \"b\": 0}}"}) {
    auto result = ParseCalibration(bad, "bad.json");
    ASSERT_FALSE(result.ok()) << bad;
    EXPECT_NE(result.status().message().find("bad.json"), std::string::npos);
  }
}

TEST(EvaluationTest, RejectsWhatIsNotALabelsDocument) {
  EXPECT_FALSE(ParseTruth("").ok());
  EXPECT_FALSE(ParseTruth("[1,2]").ok());
  EXPECT_FALSE(ParseTruth("{\"schema\": \"something-else\"}").ok());
  EXPECT_FALSE(ParseTruth("{not json").ok());
}

// A node's hosts are right for a fault on that node, wrong for one on another node or on
// one rank.
TEST(EvaluationTest, ANodesHostsMatchAFaultOnThatNode) {
  CaseTruth truth;
  truth.faulty = true;
  truth.mechanism = "host_memory_pressure";
  truth.target_node = 1;
  cause::Hypothesis node_hosts;
  node_hosts.kind = cause::CauseKind::kHostSlow;
  node_hosts.node = 1;
  EXPECT_TRUE(CauseMatches(truth, node_hosts));
  node_hosts.node = 0;
  EXPECT_FALSE(CauseMatches(truth, node_hosts));
  truth.mechanism = "straggler_rank";
  truth.target_rank = 4;
  node_hosts.node = 1;
  EXPECT_FALSE(CauseMatches(truth, node_hosts));
}

// The injector labels a kernel slowdown with its own coarse family ("attention" holds
// softmax kernels); a cause naming our family of the kernels it slowed (softmax_warp:
// softmax) is right, one naming a family it did not slow is not.
TEST(EvaluationTest, AFamilyIsRightByTheKernelsTheFaultSlowed) {
  wire::Labels labels;
  wire::LabelsFault fault;
  fault.mechanism = "kernel_slowdown";
  fault.category = "cuda_kernel";
  fault.manifested = true;
  fault.target.family = "attention";
  labels.faults.push_back(fault);
  wire::LabelsOperator softmax;
  softmax.step = 3;
  softmax.rank = 0;
  softmax.layer = "K";
  softmax.name = "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10>";
  for (int i = 0; i < 3; ++i) labels.affected_operators.push_back(softmax);
  wire::LabelsOperator copy = softmax;
  copy.name = "Memcpy DtoD (Device -> Device)";
  copy.layer = "MEM";
  labels.affected_operators.push_back(copy);
  auto truth = ParseTruth(wire::WriteLabelsJson(labels));
  ASSERT_TRUE(truth.ok()) << truth.status().message();
  EXPECT_EQ(truth->slowed_family, OperatorFamily::kSoftmax);
  cause::Hypothesis named;
  named.kind = cause::CauseKind::kFamilySlow;
  for (OperatorFamily family : {OperatorFamily::kSoftmax, OperatorFamily::kAttention}) {
    named.family = family;
    EXPECT_TRUE(CauseMatches(*truth, named)) << localize::OperatorFamilyName(family);
  }
  for (OperatorFamily family : {OperatorFamily::kGemm, OperatorFamily::kMemcpy}) {
    named.family = family;
    EXPECT_FALSE(CauseMatches(*truth, named)) << localize::OperatorFamilyName(family);
  }
}

// Where the cause is right, its cost is compared with what the twin lost over its window;
// a wrong cause's cost is not scored.
TEST(EvaluationTest, ACausesCostIsScoredAgainstItsTwinWhereItIsRight) {
  CaseTruth truth;
  truth.faulty = true;
  truth.mechanism = "gpu_throttle";
  truth.target_rank = 1;
  truth.step_delta_ns = {{4, 3'000'000}, {5, 1'000'000}, {6, 1'000'000}, {7, -500'000}};
  Diagnosis diagnosis;
  RootCause cause;
  cause.hypothesis.kind = cause::CauseKind::kGpuSlow;
  cause.hypothesis.rank = 1;
  cause.hypothesis.first_group = 5;
  cause.hypothesis.last_group = 8;
  cause.hypothesis.impact_ns = 2'200'000;
  cause.hypothesis.step_baseline_ns = 40'000'000;
  diagnosis.causes.push_back(cause);
  CaseScore score = ScoreDiagnosis(truth, diagnosis);
  ASSERT_TRUE(score.impact_scored);
  EXPECT_DOUBLE_EQ(score.twin_ns, 2'000'000);  // steps 5-8, losses only
  // Both floored at 1% of the window's 40 ms: 2.6 ms against 2.4 ms.
  EXPECT_NEAR(score.ImpactLogError(), std::log(2.6 / 2.4), 1e-9);
  diagnosis.causes[0].hypothesis.rank = 0;
  EXPECT_FALSE(ScoreDiagnosis(truth, diagnosis).impact_scored);
}

// A cause's steps are its window's, or the steps it lists: a misrouted request's window is
// its life, its abnormal steps only those it arrived in undecoded.
TEST(EvaluationTest, TheVerdictsStepsAreTheOnesItsCauseShowsIn) {
  CaseTruth truth;
  truth.faulty = true;
  truth.mechanism = "decode_misroute";
  truth.steps = {8, 11};
  truth.step_count = 40;
  Diagnosis diagnosis;
  RootCause cause;
  cause.hypothesis.kind = cause::CauseKind::kRequestMisrouted;
  cause.hypothesis.first_group = 8;
  cause.hypothesis.last_group = 30;
  diagnosis.causes.push_back(cause);
  CaseScore window = ScoreDiagnosis(truth, diagnosis);
  EXPECT_EQ(window.steps_true, 2);
  EXPECT_EQ(window.steps_false, 21);
  diagnosis.causes[0].hypothesis.lists_abnormal_steps = true;
  diagnosis.causes[0].hypothesis.abnormal_groups = {8, 12};
  CaseScore listed = ScoreDiagnosis(truth, diagnosis);
  EXPECT_EQ(listed.steps_true, 1);
  EXPECT_EQ(listed.steps_false, 1);
  EXPECT_EQ(listed.steps_missed, 1);
}

// The learned model alone is scored beside the verdict: its flagged steps against the
// affected ones, and its category; per-category counts give the macro F1 over the truth's
// categories (a missed run counts against its own, kNone is no class).
TEST(EvaluationTest, TheModelAloneIsScoredBesideTheVerdict) {
  CaseTruth truth;
  truth.faulty = true;
  truth.mechanism = "gpu_throttle";
  truth.category = FaultCategory::kCudaKernel;
  truth.steps = {3, 4};
  truth.step_count = 10;
  Diagnosis diagnosis;
  diagnosis.category = FaultCategory::kNone;  // the verdict missed it
  diagnosis.model.used = true;
  diagnosis.model.category = FaultCategory::kCudaKernel;
  diagnosis.model.steps = {{4, "", 0.9}, {5, "", 0.8}};
  CaseResult missed{"a", "vllm", truth, ScoreDiagnosis(truth, diagnosis), 0.0, ""};
  EXPECT_EQ(missed.score.model_steps_true, 1);
  EXPECT_EQ(missed.score.model_steps_false, 1);
  EXPECT_EQ(missed.score.model_steps_missed, 1);
  EXPECT_EQ(missed.score.steps_total, 10);

  truth.category = FaultCategory::kMemoryResource;
  diagnosis.category = FaultCategory::kMemoryResource;
  CaseResult found{"b", "vllm", truth, ScoreDiagnosis(truth, diagnosis), 0.0, ""};
  const EvaluationTotals totals = SumResults({missed, found});
  EXPECT_DOUBLE_EQ(totals.ModelStepF1(), 4.0 / 8.0);  // 2 tp, 2 fp, 2 missed
  // Verdict: cuda_kernel 0 of 1 (F1 0), memory 1 of 1 (F1 1).
  EXPECT_DOUBLE_EQ(totals.CategoryMacroF1(), 0.5);
  // Model: cuda_kernel right (tp), memory called cuda_kernel: cuda F1 2/3, memory 0.
  EXPECT_DOUBLE_EQ(totals.ModelCategoryMacroF1(), (2.0 / 3.0) / 2.0);
  EXPECT_EQ(totals.model_used, 2);
}

TEST(EvaluationTest, HitsNeedTheRankStepAndFamilyOfAnAffectedInstance) {
  CaseTruth truth;
  truth.faulty = true;
  truth.mechanism = "kernel_slowdown";
  truth.category = FaultCategory::kCudaKernel;
  truth.steps = {4, 5};
  truth.operators = {{1, 4, OperatorFamily::kAttention}, {1, 5, OperatorFamily::kAttention}};
  truth.families = {OperatorFamily::kAttention};
  Diagnosis diagnosis;
  diagnosis.category = FaultCategory::kCudaKernel;
  auto finding = [](int32_t rank, int64_t step, OperatorFamily family) {
    Finding f;
    f.rank = rank;
    f.step_number = step;
    f.family = family;
    return f;
  };
  diagnosis.findings = {finding(0, 5, OperatorFamily::kAllReduce),   // step only
                        finding(0, 5, OperatorFamily::kAttention),   // wrong rank
                        finding(1, 9, OperatorFamily::kAttention),   // wrong step
                        finding(1, 5, OperatorFamily::kAttention)};  // exact, but 4th
  CaseScore score = ScoreDiagnosis(truth, diagnosis, 3);
  EXPECT_TRUE(score.step_hit);
  EXPECT_TRUE(score.family_hit);
  EXPECT_FALSE(score.operator_hit);
  EXPECT_TRUE(score.category_correct);
  score = ScoreDiagnosis(truth, diagnosis, 4);
  EXPECT_TRUE(score.operator_hit);
  EXPECT_EQ(score.first_operator_hit, 4);

  CaseResult hit{"b0", "vllm-v0", truth, score, 0.5, ""};
  CaseTruth normal_truth;
  CaseScore false_alarm;
  false_alarm.flagged = true;
  CaseResult normal{"b1", "sglang", normal_truth, false_alarm, 0.25, ""};
  const EvaluationTotals totals = SumResults({hit, normal});
  EXPECT_EQ(totals.faulty, 1);
  EXPECT_EQ(totals.operator_hits, 1);
  EXPECT_EQ(totals.normal, 1);
  EXPECT_EQ(totals.flagged_normal, 1);
  EXPECT_DOUBLE_EQ(totals.seconds, 0.75);
  const std::string markdown = EvaluationMarkdown({hit, normal}, 4);
  // No cause in this diagnosis: the cause columns miss, the findings hit.
  EXPECT_NE(markdown.find("| 1 | 0/1 (0%) | 0/1 (0%) | 0.000 | 1/1 (100%) |"), std::string::npos)
      << markdown;
  EXPECT_NE(markdown.find("step + family in top 4 1/1 (100%), step in top 4 1/1 (100%)"),
            std::string::npos)
      << markdown;
  EXPECT_NE(markdown.find("| kernel_slowdown | 1 | 0/1 (0%) | 0/1 (0%) | 1/1 (100%) | 1/1 (100%) | "
                          "cuda_kernel x1 |"),
            std::string::npos)
      << markdown;
  const nlohmann::json json = nlohmann::json::parse(EvaluationJson({hit, normal}, 4));
  EXPECT_EQ(json["totals"]["false_alarm_rate"], 1.0);
  EXPECT_EQ(json["cases"].size(), 2u);

  // A fault that touches no operator (a collective timeout, told by the logs): its run
  // counts in the step column and not in the operator rate's denominator.
  CaseTruth scheduler_truth;
  scheduler_truth.faulty = true;
  scheduler_truth.mechanism = "nccl_timeout";
  scheduler_truth.steps = {5};
  const CaseScore scheduler_score = ScoreDiagnosis(scheduler_truth, diagnosis, 3);
  EXPECT_FALSE(scheduler_score.has_operators);
  EXPECT_TRUE(scheduler_score.step_hit);
  CaseResult scheduler{"b2", "vllm-v0", scheduler_truth, scheduler_score, 0.5, ""};
  const EvaluationTotals mixed = SumResults({hit, scheduler});
  EXPECT_EQ(mixed.faulty, 2);
  EXPECT_EQ(mixed.with_operators, 1);
  EXPECT_EQ(mixed.step_hits, 2);
  const std::string mixed_markdown = EvaluationMarkdown({hit, scheduler}, 4);
  EXPECT_NE(mixed_markdown.find("step + family in top 4 1/1 (100%), step in top 4 2/2 (100%)"),
            std::string::npos)
      << mixed_markdown;
  EXPECT_NE(mixed_markdown.find("| nccl_timeout | 1 | - | - | - |"), std::string::npos)
      << mixed_markdown;
  EXPECT_EQ(nlohmann::json::parse(
                EvaluationJson({hit, scheduler}, 4))["totals"]["faulty_cases_with_operators"],
            1);
}

// A recorded run whose steps came from no STEP hook (the hooks were on) says so in the
// diagnosis notes; the simulated run, whose engine steps are STEP ranges, does not.
TEST(DiagnoseTest, ARunWhoseStepsCameFromNoStepHookSaysSo) {
  model::Trace trace = SimulatedTrace("", "hook_steps");
  const std::string said = "the Python hooks were on but no STEP hook fired";
  auto has_note = [&](const Diagnosis& diagnosis) {
    return std::any_of(diagnosis.notes.begin(), diagnosis.notes.end(),
                       [&](const std::string& note) { return note.rfind(said, 0) == 0; });
  };
  auto with_steps = Diagnose(trace);
  ASSERT_TRUE(with_steps.ok());
  EXPECT_FALSE(has_note(*with_steps));
  for (model::Layer& layer : trace.events.layer) {
    if (layer == model::Layer::kStep) layer = model::Layer::kFe;
  }
  auto without = Diagnose(trace);
  ASSERT_TRUE(without.ok());
  EXPECT_TRUE(has_note(*without));
  EXPECT_EQ(HooksWithoutStepsNote(trace).rfind(said, 0), 0u);
}

// A one-step capture has no baseline of steps: its repeated kernel calls tell it healthy,
// and a GPU that slowed over its last 40% degraded, with the rank's GPU named by its peers
// (the learned decider, fitted on runs with a baseline, leaves that verdict alone).
TEST(ShortCaptureTest, RepeatedCallsTellAOneStepCapture) {
  if (base::RealTracesDir().empty()) GTEST_SKIP() << "../shared/real-traces is absent";
  model::Trace trace = cause::OpenRealTrace(cause::kDecodeStep);
  auto healthy = Diagnose(trace, {});
  ASSERT_TRUE(healthy.ok()) << healthy.status().message();
  EXPECT_EQ(healthy->steps_scored, 0);
  EXPECT_EQ(VerdictOf(*healthy), RunVerdict::kHealthy) << VerdictWithoutCause(*healthy);
  EXPECT_NE(VerdictWithoutCause(*healthy).find("other calls"), std::string::npos);
  // The learned model flagging what the peers do not: no verdict either way.
  healthy->model.used = true;
  healthy->model.abnormal = true;
  EXPECT_EQ(VerdictOf(*healthy), RunVerdict::kUndetermined);

  cause::SlowKernels(&trace, localize::OperatorFamily::kUnnamed, 0.4, 1.4);
  auto degraded = Diagnose(trace, {});
  ASSERT_TRUE(degraded.ok()) << degraded.status().message();
  ASSERT_EQ(VerdictOf(*degraded), RunVerdict::kDegraded);
  const cause::Hypothesis& h = degraded->causes.front().hypothesis;
  EXPECT_TRUE(h.by_instance_peers);
  EXPECT_EQ(h.kind, cause::CauseKind::kGpuSlow);
  EXPECT_EQ(degraded->category, FaultCategory::kCudaKernel);
}

// A candidate below the threshold is the cause when the logs' first cause confirms it (its
// category, the line within a step of its window); a line far from its window leaves the
// logs to name the category alone.
TEST(DiagnoseTest, ACandidateTheLogsConfirmIsTheCause) {
  auto candidate = [](cause::CauseKind kind, FaultCategory category, int64_t first, int64_t last) {
    RootCause c;
    c.hypothesis.kind = kind;
    c.hypothesis.first_group = first;
    c.hypothesis.last_group = last;
    c.hypothesis.score = 9.0;
    c.category = category;
    return c;
  };
  Diagnosis d;
  d.cause_threshold = 15.0;
  d.max_alternatives = 4;
  d.candidates = {
      candidate(cause::CauseKind::kLinkDegraded, FaultCategory::kCommunicationNetwork, 20, 30),
      candidate(cause::CauseKind::kRequestPreempted, FaultCategory::kMemoryResource, 23, 31)};
  LogEvidence retract;
  retract.category = FaultCategory::kMemoryResource;
  retract.weight = kDegradingLogWeight;
  retract.step = 22;
  d.logs = {retract};
  ChooseCause({0, 1}, /*degraded=*/false, 0.0, {}, &d);
  EXPECT_TRUE(d.degraded);
  ASSERT_EQ(d.causes.size(), 1u);
  EXPECT_EQ(d.causes[0].hypothesis.kind, cause::CauseKind::kRequestPreempted);
  EXPECT_NE(d.causes[0].confirmed_by_log.find("at step 22"), std::string::npos);
  ASSERT_EQ(d.alternatives.size(), 1u);
  EXPECT_EQ(d.alternatives[0].kind, cause::CauseKind::kLinkDegraded);

  d.logs[0].step = 40;
  ChooseCause({0, 1}, /*degraded=*/false, 0.0, {}, &d);
  EXPECT_TRUE(d.degraded);
  EXPECT_TRUE(d.causes.empty());
  EXPECT_EQ(d.category, FaultCategory::kMemoryResource);
}

}  // namespace
}  // namespace teller::diagnose
