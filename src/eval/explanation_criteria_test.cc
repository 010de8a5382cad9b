#include "eval/explanation_criteria.h"

#include <gtest/gtest.h>

namespace teller::eval {
namespace {

ExplanationTruth Throttle() {
  ExplanationTruth truth;
  truth.faulty = true;
  truth.category = "cuda_kernel";
  truth.rank = 4;
  truth.node = 1;
  truth.first_step = 19;
  truth.last_step = 43;
  return truth;
}

const ExplanationWorld kWorld{6, 2, 70};

bool Meets(const CriteriaCheck& check, Criterion c) { return check[static_cast<size_t>(c)]; }

TEST(ExplanationCriteriaTest, ReadsRanksNodesStepsAmountsAndActions) {
  const ExplanationFacts facts = ReadExplanation(
      "Rank 1's GPU ran its compute kernels 1.29x slower in steps 5-8; it added about 4.0 ms "
      "to each of those steps (19% of a step); ranks 0, 2 and 3 more waited 4.1 ms each a step "
      "for it; rank 1 reached 296 of the 296 collectives last. Check nvidia-smi on node1.");
  EXPECT_TRUE(facts.claims_fault);
  EXPECT_EQ(facts.category, "cuda_kernel");
  EXPECT_EQ(facts.ranks, (std::vector<int32_t>{1, 0, 2, 1}));  // "3 more" is a count
  EXPECT_EQ(facts.nodes, (std::vector<int32_t>{1}));
  ASSERT_EQ(facts.steps.size(), 1u);
  EXPECT_EQ(facts.steps[0], (std::pair<int64_t, int64_t>{5, 8}));
  EXPECT_TRUE(facts.names_amount);
  EXPECT_TRUE(facts.names_action);
  EXPECT_FALSE(ReadExplanation("steps 5-8 on rank 2").names_amount);
  EXPECT_FALSE(ReadExplanation("rank 2's host work 3 times").names_amount);
}

// The simulator's references of three mechanisms meet every criterion against their labels.
TEST(ExplanationCriteriaTest, ReferencesMeetEveryCriterionAgainstTheirLabels) {
  const std::string throttle =
      "GPU throttling on rank 4 (GPU 1 on node1): from steps 19-43 its kernels ran about 30% "
      "slower than the same kernels on its peers, and the peers waited for it inside the NCCL "
      "all-reduce. Check nvidia-smi clocks and throttle reasons (power, thermal) for that GPU.";
  for (int c = 0; c < kCriterionCount; ++c) {
    EXPECT_TRUE(CheckExplanation(ReadExplanation(throttle), Throttle(), kWorld)[c])
        << CriterionName(static_cast<Criterion>(c));
  }
  ExplanationTruth pressure;
  pressure.faulty = true;
  pressure.category = "memory_resource";
  pressure.node = 0;
  pressure.first_step = 18;
  pressure.last_step = 40;
  const CriteriaCheck host = CheckExplanation(
      ReadExplanation("Host memory pressure on node0 slowed CPU-side work by about 35% during "
                      "steps 18-40: Python ranges, launches and host-to-device copies of its "
                      "ranks took longer while GPU kernels were unchanged. Check swap and "
                      "page-cache pressure on that node."),
      pressure, kWorld);
  for (int c = 0; c < kCriterionCount; ++c) {
    EXPECT_TRUE(host[c]) << CriterionName(static_cast<Criterion>(c));
  }
  ExplanationTruth slow_norm;
  slow_norm.faulty = true;
  slow_norm.category = "cuda_kernel";
  slow_norm.family = "norm";
  slow_norm.first_step = 9;
  slow_norm.last_step = 25;
  const CriteriaCheck family = CheckExplanation(
      ReadExplanation("The norm kernels slowed down by about 40% on every rank during steps "
                      "9-25. Check for a changed kernel build."),
      slow_norm, kWorld);
  EXPECT_TRUE(Meets(family, Criterion::kCausal));
  EXPECT_TRUE(Meets(family, Criterion::kComplete));
}

// Each criterion fails on the sentence that breaks it.
TEST(ExplanationCriteriaTest, EachCriterionFailsWhereItShould) {
  const ExplanationTruth truth = Throttle();
  auto check = [&](const std::string& text) {
    return CheckExplanation(ReadExplanation(text), truth, kWorld);
  };
  const CriteriaCheck healthy =
      check("No cause stands above this run's noise: nothing moved over a window of steps.");
  EXPECT_FALSE(Meets(healthy, Criterion::kAnomaly));
  EXPECT_FALSE(Meets(healthy, Criterion::kCausal));
  // The victim named as the culprit, a link called: wrong type and place.
  const CriteriaCheck victim =
      check("The allreduce collectives took 1.3x longer on rank 2 in steps 19-43 (the link).");
  EXPECT_TRUE(Meets(victim, Criterion::kAnomaly));
  EXPECT_FALSE(Meets(victim, Criterion::kFaultType));
  EXPECT_FALSE(Meets(victim, Criterion::kCausal));
  // A rank and a step that do not exist.
  EXPECT_FALSE(Meets(check("Rank 9's GPU ran its kernels 1.3x slower in steps 19-43."),
                     Criterion::kLocator));
  EXPECT_FALSE(Meets(check("Rank 4's GPU ran its kernels 1.3x slower in steps 19-90."),
                     Criterion::kLocator));
  // The right rank in the wrong window.
  EXPECT_FALSE(
      Meets(check("Rank 4's GPU ran its kernels 1.3x slower in steps 50-60."), Criterion::kCausal));
  // No amount, no action.
  const CriteriaCheck vague = check("Rank 4's GPU was throttled in steps 19-43.");
  EXPECT_TRUE(Meets(vague, Criterion::kCausal));
  EXPECT_FALSE(Meets(vague, Criterion::kComplete));
  EXPECT_FALSE(Meets(vague, Criterion::kActionable));
  // A healthy run said healthy meets every criterion but actionability's action.
  ExplanationTruth none;
  const CriteriaCheck quiet =
      CheckExplanation(ReadExplanation("HEALTHY: no cause stands out."), none, kWorld);
  EXPECT_TRUE(Meets(quiet, Criterion::kAnomaly));
  EXPECT_TRUE(Meets(quiet, Criterion::kCausal));
}

TEST(ExplanationCriteriaTest, SharesAndTheirMean) {
  CriteriaCheck all{};
  all.fill(true);
  CriteriaCheck none{};
  const CriteriaScores scores = ScoreCriteria({all, none});
  EXPECT_EQ(scores.checked, 2);
  for (double share : scores.share) EXPECT_DOUBLE_EQ(share, 0.5);
  EXPECT_DOUBLE_EQ(scores.overall, 0.5);
  EXPECT_EQ(ScoreCriteria({}).checked, 0);
}

}  // namespace
}  // namespace teller::eval
