#include "diagnose/cause_operators.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "cause/deviation_map.h"
#include "cause/hypotheses.h"
#include "diagnose/evaluation.h"
#include "localize/step_features.h"
#include "sim/simulated_trace_testing.h"

namespace teller::diagnose {
namespace {

using sim::SimulatedTrace;

const CauseOperator* FindOperator(const RootCause& cause, std::string_view name) {
  for (const CauseOperator& op : cause.operators) {
    if (op.name == name) return &op;
  }
  return nullptr;
}

void ExpectInsideTheWindow(const RootCause& cause) {
  for (const CauseOperator& op : cause.operators) {
    ASSERT_FALSE(op.groups.empty()) << op.name;
    EXPECT_GE(op.groups.front(), cause.hypothesis.first_group) << op.name;
    EXPECT_LE(op.groups.back(), cause.hypothesis.last_group) << op.name;
  }
}

// Launch calls 3x slower on rank 1: the calls are the culprits, with the host ranges they
// made longer up to the step; no kernel is (the GPU ran as fast); peers' collectives waited.
TEST(CauseOperatorsTest, SlowLaunchesNameTheirCallsAndTheRangesTheyLengthened) {
  const model::Trace trace =
      SimulatedTrace("launch_latency:rank=1,magnitude=3.0", "cause_operators_launch");
  auto diagnosis = Diagnose(trace);
  ASSERT_TRUE(diagnosis.ok());
  ASSERT_FALSE(diagnosis->causes.empty());
  const RootCause& cause = diagnosis->causes.front();
  ASSERT_EQ(cause.hypothesis.kind, cause::CauseKind::kLaunchLatency);
  ExpectInsideTheWindow(cause);
  const CauseOperator* launch = FindOperator(cause, "cudaLaunchKernel");
  ASSERT_NE(launch, nullptr);
  EXPECT_FALSE(launch->victim);
  EXPECT_EQ(launch->layer, model::Layer::kRt);
  const CauseOperator* step = FindOperator(cause, "EngineCore.step");
  ASSERT_NE(step, nullptr);
  EXPECT_FALSE(step->victim);
  for (const CauseOperator& op : cause.operators) {
    EXPECT_TRUE(op.layer != model::Layer::kK || op.victim) << op.name;
    EXPECT_TRUE(op.layer != model::Layer::kComm || op.victim) << op.name;
  }
  // Per affected step, what it names against the labels' affected operators.
  auto truth = ParseTruth(trace.meta.labels_json);
  ASSERT_TRUE(truth.ok());
  const CaseScore score = ScoreDiagnosis(*truth, *diagnosis);
  ASSERT_GT(score.operator_set_items, 0);
  EXPECT_GT(score.operator_set_f1 / score.operator_set_items, 0.8);
}

// The engine loop stalls in its scheduler before steps 8-12: the scheduler's range is the
// culprit in each of them; the model's module ranges, which did not wait, are not named in
// most of them, and no kernel is.
TEST(CauseOperatorsTest, APausedEngineNamesTheSchedulerRangeThatStalled) {
  const model::Trace trace =
      SimulatedTrace(sim::SmallConfig(sim::EngineKind::kVllmV1Online, 4, 16),
                     "engine_pause:onset=8,duration=5,magnitude=0.6", "cause_operators_pause");
  auto diagnosis = Diagnose(trace);
  ASSERT_TRUE(diagnosis.ok());
  ASSERT_FALSE(diagnosis->causes.empty());
  const RootCause& cause = diagnosis->causes.front();
  ASSERT_EQ(cause.hypothesis.kind, cause::CauseKind::kEnginePause);
  ExpectInsideTheWindow(cause);
  ASSERT_FALSE(cause.operators.empty());
  EXPECT_EQ(cause.operators.front().name, "Scheduler.schedule");
  EXPECT_EQ(cause.operators.front().groups, (std::vector<int64_t>{8, 9, 10, 11, 12}));
  for (const CauseOperator& op : cause.operators) {
    EXPECT_NE(op.layer, model::Layer::kK) << op.name;
    if (op.name == "Qwen3ForCausalLM") {
      EXPECT_LE(op.groups.size(), 2u);
    }
  }
}

// Rotary before the q/k norm in half the layers over steps 10-24: the kernels named are
// those that now follow another kernel (rotary, norm, and what follows the pair), not the
// gemm before them, and no range.
TEST(CauseOperatorsTest, KernelsRunInAnotherOrderAreNamedByTheNeighbourTheyChanged) {
  const model::Trace trace =
      SimulatedTrace(sim::SmallConfig(sim::EngineKind::kSglang, 24, 8),
                     "operator_reorder:magnitude=0.5,onset=10,duration=15", "cause_operators_order");
  auto diagnosis = Diagnose(trace);
  ASSERT_TRUE(diagnosis.ok());
  ASSERT_FALSE(diagnosis->causes.empty());
  const RootCause& cause = diagnosis->causes.front();
  ASSERT_EQ(cause.hypothesis.kind, cause::CauseKind::kReorder);
  ExpectInsideTheWindow(cause);
  std::set<localize::OperatorFamily> families;
  for (const CauseOperator& op : cause.operators) {
    EXPECT_EQ(op.layer, model::Layer::kK) << op.name;
    EXPECT_FALSE(op.victim) << op.name;
    families.insert(localize::ClassifyOperator(op.layer, op.name));
  }
  EXPECT_TRUE(families.count(localize::OperatorFamily::kNorm));
  EXPECT_TRUE(families.count(localize::OperatorFamily::kRotary));
  EXPECT_FALSE(families.count(localize::OperatorFamily::kGemm));
}

// Per affected step: the cause's operators that moved in it against the step's affected
// ones; a step neither names scores 1, a step the cause misses 0.
TEST(CauseOperatorsTest, TheOperatorSetIsScoredPerAffectedStep) {
  CaseTruth truth;
  truth.faulty = true;
  truth.mechanism = "launch_latency";
  truth.steps = {5, 6, 7};
  truth.step_operators = {{5, {"cudaLaunchKernel", "aten::mm"}}, {7, {"cudaLaunchKernel"}}};
  Diagnosis diagnosis;
  diagnosis.degraded = true;
  RootCause cause;
  cause.hypothesis.kind = cause::CauseKind::kLaunchLatency;
  cause.hypothesis.first_group = 5;
  cause.hypothesis.last_group = 6;
  cause.operators.push_back({model::Layer::kRt, "cudaLaunchKernel", false, false, false, {5}});
  diagnosis.causes.push_back(cause);
  const CaseScore score = ScoreDiagnosis(truth, diagnosis);
  EXPECT_EQ(score.operator_set_items, 3);
  // Step 5: 2 * 1 / (1 + 2); step 6: both empty; step 7: missed.
  EXPECT_DOUBLE_EQ(score.operator_set_f1, 2.0 / 3.0 + 1.0 + 0.0);
  CaseResult result;
  result.truth = truth;
  result.score = score;
  EXPECT_DOUBLE_EQ(SumResults({result}).OperatorSetF1(), (2.0 / 3.0 + 1.0) / 3.0);
}

// The work splits by rank: a throttled GPU's query answered rank by rank (as the processes
// holding the ranks answer it) merges to the whole trace's answer, and a query cut to a span
// of steps keeps those rows, renumbered from the span's start.
TEST(CauseOperatorsTest, AQueryAnsweredRankByRankMergesToTheWholeAnswer) {
  const model::Trace trace = SimulatedTrace("gpu_throttle:rank=1", "cause_operators_split");
  const localize::StepFeatures features = localize::ComputeStepFeatures(trace);
  const cause::DeviationMap map = cause::BuildDeviationMap(trace, features, {});
  const cause::CauseAnalysis analysis = cause::AnalyzeCauses(map);
  ASSERT_TRUE(analysis.degraded);
  const cause::Hypothesis& cause = analysis.ranked.front();
  const OperatorQuery query = QueryOfCause(map, cause);
  std::set<int32_t> ranks;
  for (const OperatorCell& cell : query.cells) ranks.insert(cell.rank);
  ASSERT_GE(ranks.size(), 2u) << "the culprit and ranks that waited";
  const std::vector<cause::NodeCell> node_cells = cause::NodeCells(trace, features);
  std::vector<std::vector<CauseOperator>> by_rank;
  for (int32_t rank : ranks) {
    OperatorQuery one{query.first_group, query.last_group, query.later_kernels, {}};
    for (const OperatorCell& cell : query.cells) {
      if (cell.rank == rank) one.cells.push_back(cell);
    }
    by_rank.push_back(FindOperatorsOfPart(trace, node_cells, one));
  }
  CauseOperatorFinder finder(trace, features, map);
  const std::vector<CauseOperator> whole = finder.Find(cause);
  ASSERT_FALSE(whole.empty());
  // A GPU slower at every kernel: kernels after the slow ones started later too, and are
  // listed after the culprits whose own time grew.
  ASSERT_TRUE(query.later_kernels);
  const auto later = std::find_if(whole.begin(), whole.end(),
                                  [](const CauseOperator& op) { return op.started_later; });
  ASSERT_NE(later, whole.end());
  EXPECT_EQ(later->layer, model::Layer::kK);
  EXPECT_FALSE(whole.front().started_later);
  for (auto op = later; op != whole.end() && !op->victim; ++op) {
    EXPECT_TRUE(op->started_later || op->holds_moved) << op->name;
  }
  const std::vector<CauseOperator> merged = MergeOperators(by_rank);
  ASSERT_EQ(merged.size(), whole.size());
  for (size_t i = 0; i < whole.size(); ++i) {
    EXPECT_EQ(merged[i].name, whole[i].name) << i;
    EXPECT_EQ(merged[i].layer, whole[i].layer) << whole[i].name;
    EXPECT_EQ(merged[i].victim, whole[i].victim) << whole[i].name;
    EXPECT_EQ(merged[i].holds_moved, whole[i].holds_moved) << whole[i].name;
    EXPECT_EQ(merged[i].started_later, whole[i].started_later) << whole[i].name;
    EXPECT_EQ(merged[i].groups, whole[i].groups) << whole[i].name;
  }

  const uint32_t begin = 10, end = static_cast<uint32_t>(trace.steps.size()) - 10;
  const OperatorQuery cut = QueryOfSteps(query, begin, end);
  size_t rows = 0, kept = 0;
  for (const OperatorCell& cell : query.cells) {
    for (const OperatorRow& row : cell.rows) rows += 1, kept += row.step >= begin && row.step < end;
  }
  size_t cut_rows = 0;
  for (const OperatorCell& cell : cut.cells) {
    for (const OperatorRow& row : cell.rows) {
      ++cut_rows;
      EXPECT_LT(row.step, end - begin);
    }
  }
  EXPECT_LT(kept, rows);
  EXPECT_EQ(cut_rows, kept);
  EXPECT_EQ(QueryOfSteps(query, 0, static_cast<uint32_t>(trace.steps.size())), query);
}

}  // namespace
}  // namespace teller::diagnose
