#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>

#include "base/testing.h"
#include "cause/baseline_fit.h"
#include "cause/cause_text.h"
#include "cause/deviation_map.h"
#include "cause/hypotheses.h"
#include "cause/step_replay.h"
#include "perturb/perturb.h"
#include "perturb/step_templates.h"
#include "reconstruct/call_chain_builder.h"
#include "reconstruct/test_trace.h"
#include "sim/dataset.h"
#include "sim/fault_spec.h"
#include "sim/simulator.h"
#include "store/open_trace.h"
#include "wire/labels_file.h"

namespace teller::cause {
namespace {

using localize::OperatorFamily;

// --- Hand-built deviation maps ------------------------------------------------

// A map of `steps` groups on `ranks` ranks, every cell drawn around its baseline with
// 2% noise: compute (gemm, attention), collectives, the frontend and the step gap.
struct MapBuilder {
  int32_t ranks = 4;
  int32_t ranks_per_node = 0;  // 0: the ranks' node is unknown
  int64_t steps = 40;
  std::mt19937 rng{11};
  // (rank, channel, family) -> multiplier over [first, last] steps.
  struct Change {
    int32_t rank;  // -1 every rank
    Channel channel;
    OperatorFamily family;
    int64_t first, last;
    double factor;
    double add = 0.0;  // added to the value (counts, or time over a baseline of 0)
  };
  std::vector<Change> changes;
  // Channels beside the default ones: (channel, family, expected value).
  std::vector<std::tuple<Channel, OperatorFamily, double>> extra_channels;

  // Every rank but the culprit waits in its all-reduce, factor times its time, over the steps.
  void WaitInCollectives(int32_t culprit, int64_t first, int64_t last, double factor) {
    for (int32_t peer = 0; peer < ranks; ++peer) {
      if (peer == culprit) continue;
      changes.push_back(
          {peer, Channel::kCollective, OperatorFamily::kAllReduce, first, last, factor});
    }
  }

  DeviationMap Build() {
    DeviationMap map;
    std::normal_distribution<double> noise(0.0, 1.0);
    std::vector<std::tuple<Channel, OperatorFamily, double>> channels = {
        {Channel::kCompute, OperatorFamily::kGemm, 10e6},
        {Channel::kCompute, OperatorFamily::kAttention, 2e6},
        {Channel::kCollective, OperatorFamily::kAllReduce, 1e6},
        {Channel::kFrontend, OperatorFamily::kUnnamed, 0.5e6},
        {Channel::kStepGap, OperatorFamily::kUnnamed, 0.1e6},
    };
    channels.insert(channels.end(), extra_channels.begin(), extra_channels.end());
    for (int32_t rank = 0; rank < ranks; ++rank) map.ranks.push_back(rank);
    for (int32_t rank = 0; rank < ranks; ++rank) {
      for (int64_t number = 0; number < steps; ++number) {
        MapStep step;
        step.rank = rank;
        step.node = ranks_per_node > 0 ? rank / ranks_per_node : -1;
        step.number = step.group = number;
        step.start_ns = number * 20'000'000;
        step.cells_begin = static_cast<uint32_t>(map.cells.size());
        for (const auto& [channel, family, expected] : channels) {
          Cell cell;
          cell.step_row = static_cast<uint32_t>(map.steps.size());
          cell.channel = channel;
          cell.family = family;
          cell.expected = expected;
          cell.sigma = channel == Channel::kFailedCalls ? 0.25 : 0.02 * expected;
          cell.value = expected * (1.0 + 0.02 * noise(rng));
          for (const Change& c : changes) {
            if ((c.rank < 0 || c.rank == rank) && c.channel == channel && c.family == family &&
                number >= c.first && number <= c.last) {
              cell.value += (c.factor - 1.0) * expected + c.add;
            }
          }
          map.cells.push_back(cell);
        }
        step.cells_end = static_cast<uint32_t>(map.cells.size());
        map.steps.push_back(step);
      }
    }
    return map;
  }
};

TEST(CauseTest, NoiseAloneIsNoCause) {
  MapBuilder builder;
  const CauseAnalysis analysis = AnalyzeCauses(builder.Build());
  EXPECT_FALSE(analysis.degraded);
  if (!analysis.ranked.empty()) {
    EXPECT_LT(analysis.ranked[0].score, CauseOptions().min_score);
  }
}

// Rank 2's compute 1.3x in steps 10-17; its peers wait in their all-reduce.
TEST(CauseTest, ASlowGpuIsFoundWithItsWindowEffectAndVictims) {
  MapBuilder builder;
  builder.changes = {{2, Channel::kCompute, OperatorFamily::kGemm, 10, 17, 1.3},
                     {2, Channel::kCompute, OperatorFamily::kAttention, 10, 17, 1.3}};
  // 30% of 12 ms of compute waited for, against a 1 ms all-reduce.
  builder.WaitInCollectives(2, 10, 17, 4.6);
  const CauseAnalysis analysis = AnalyzeCauses(builder.Build());
  ASSERT_TRUE(analysis.degraded);
  const Hypothesis& top = analysis.ranked[0];
  EXPECT_EQ(top.kind, CauseKind::kGpuSlow);
  EXPECT_EQ(top.rank, 2);
  EXPECT_EQ(top.first_group, 10);
  EXPECT_EQ(top.last_group, 17);
  EXPECT_NEAR(top.effect, 0.3, 0.03);
  EXPECT_EQ(top.victims, (std::vector<int32_t>{0, 1, 3}));
  EXPECT_NEAR(top.impact_ns / top.steps, 0.3 * 12e6, 0.05 * 12e6);
  const std::string sentence = CauseSentence(top);
  EXPECT_NE(sentence.find("rank 2's GPU ran its compute kernels 1.2"), std::string::npos)
      << sentence;
  EXPECT_NE(sentence.find("in steps 10-17"), std::string::npos) << sentence;
  // 3.6 ms of extra compute a step, waited for by each peer.
  EXPECT_NE(sentence.find("ranks 0, 1, 3 waited 3.6 ms each"), std::string::npos) << sentence;
}

// Only attention, on every rank: a kernel family, not a GPU.
// A GPU 6% slower than its peers for the whole window is within the spread of healthy
// GPUs of one SKU, however significant over 20 steps; 15% is a fault.
TEST(CauseTest, AGpuWithinTheFleetsSpreadIsNoCause) {
  for (const double factor : {1.06, 1.15}) {
    MapBuilder builder;
    builder.changes = {{2, Channel::kCompute, OperatorFamily::kGemm, 10, 29, factor},
                       {2, Channel::kCompute, OperatorFamily::kAttention, 10, 29, factor}};
    const CauseAnalysis analysis = AnalyzeCauses(builder.Build());
    const bool named = !analysis.ranked.empty() && analysis.ranked[0].kind == CauseKind::kGpuSlow &&
                       analysis.degraded;
    EXPECT_EQ(named, factor > 1.1) << factor;
  }
}

// Slow first steps that pass are the engine warming up; the same steps later, with
// normal steps before them, are an incident.
TEST(CauseTest, SlowFirstStepsAreAWarmUp) {
  for (const int64_t first : {0, 12}) {
    MapBuilder builder;
    builder.changes = {{2, Channel::kCompute, OperatorFamily::kGemm, first, first + 7, 1.3},
                       {2, Channel::kCompute, OperatorFamily::kAttention, first, first + 7, 1.3}};
    const CauseAnalysis analysis = AnalyzeCauses(builder.Build());
    EXPECT_EQ(analysis.degraded, first > 0) << first;
  }
}

// A short capture of one rank, 9 steps, the last 6 slow: too few normal steps for a
// family's baseline to be trusted, so each family is read against the 3 steps beside the
// window. GEMMs and embeddings as before while five other families ran 1.4x: not the
// GPU (a slower GPU slows its GEMMs most). Every family 1.3x slower: the GPU.
TEST(CauseTest, AShortCapturesUnmovedGemmsAreNoSlowGpu) {
  const OperatorFamily moved[] = {OperatorFamily::kElementwise, OperatorFamily::kOptimizer,
                                  OperatorFamily::kIndexing, OperatorFamily::kReduction,
                                  OperatorFamily::kSort};
  for (const bool gemm_moved : {false, true}) {
    MapBuilder builder;
    builder.ranks = 1;
    builder.steps = 9;
    builder.extra_channels = {{Channel::kCompute, OperatorFamily::kEmbedding, 8e6}};
    const double factor = gemm_moved ? 1.3 : 1.4;
    for (const OperatorFamily family : moved) {
      builder.extra_channels.emplace_back(Channel::kCompute, family, 2e6);
      builder.changes.push_back({0, Channel::kCompute, family, 3, 8, factor});
    }
    if (gemm_moved) {
      for (const OperatorFamily family :
           {OperatorFamily::kGemm, OperatorFamily::kAttention, OperatorFamily::kEmbedding}) {
        builder.changes.push_back({0, Channel::kCompute, family, 3, 8, factor});
      }
    }
    const CauseAnalysis analysis = AnalyzeCauses(builder.Build());
    ASSERT_FALSE(analysis.ranked.empty()) << gemm_moved;
    const Hypothesis& top = analysis.ranked[0];
    EXPECT_EQ(top.kind == CauseKind::kGpuSlow, gemm_moved) << CauseSentence(top);
  }
}

TEST(CauseTest, OneFamilyOnEveryRankIsThatFamily) {
  MapBuilder builder;
  builder.changes = {{-1, Channel::kCompute, OperatorFamily::kAttention, 20, 29, 1.25}};
  const CauseAnalysis analysis = AnalyzeCauses(builder.Build());
  ASSERT_TRUE(analysis.degraded);
  EXPECT_EQ(analysis.ranked[0].kind, CauseKind::kFamilySlow);
  EXPECT_EQ(analysis.ranked[0].family, OperatorFamily::kAttention);
  EXPECT_NEAR(analysis.ranked[0].effect, 0.25, 0.03);
}

// Data-parallel replicas each serve their own batch: a kernel one replica runs only for
// some requests (a sampler's sort for top-p) is slower in its steps while the other
// replicas' ranks run as usual. Two replicas of three a step, which two changing: those
// replicas' own batches, not a family slower on every rank.
TEST(CauseTest, OneReplicasSlowerFamilyIsNoFamilyOfEveryRank) {
  MapBuilder builder;
  builder.ranks = 12;
  builder.ranks_per_node = 4;
  for (int64_t step = 6; step <= 42; ++step) {
    for (int32_t node = 0; node < 3; ++node) {
      if ((step + node) % 3 == 0) continue;
      for (int32_t rank = 4 * node; rank < 4 * node + 4; ++rank) {
        builder.changes.push_back(
            {rank, Channel::kCompute, OperatorFamily::kAttention, step, step, 1.25});
      }
    }
  }
  for (const Hypothesis& h : AnalyzeCauses(builder.Build()).ranked) {
    if (h.kind == CauseKind::kFamilySlow) {
      EXPECT_LT(h.score, CauseOptions().min_score) << CauseSentence(h);
    }
  }
}

// Every rank's all-reduce slower, nothing else: the link.
TEST(CauseTest, EveryRanksCollectivesSlowerIsTheLink) {
  MapBuilder builder;
  builder.changes = {{-1, Channel::kCollective, OperatorFamily::kAllReduce, 5, 14, 1.5}};
  const CauseAnalysis analysis = AnalyzeCauses(builder.Build());
  ASSERT_TRUE(analysis.degraded);
  EXPECT_EQ(analysis.ranked[0].kind, CauseKind::kLinkDegraded);
}

// Two huge spikes a few steps apart (GC pauses) are not a window.
TEST(CauseTest, IsolatedSpikesAreNotACause) {
  MapBuilder builder;
  builder.changes = {{-1, Channel::kStepGap, OperatorFamily::kUnnamed, 12, 12, 80.0},
                     {-1, Channel::kStepGap, OperatorFamily::kUnnamed, 30, 30, 80.0}};
  EXPECT_FALSE(AnalyzeCauses(builder.Build()).degraded);
}

// GEMMs 1.2x on every rank in every other step (a capture that alternates two step
// bodies with the same kernels, one on longer inputs): the strong steps interleave with
// quiet ones, which a fault that set in and lasted does not do.
TEST(CauseTest, AlternatingStrongAndQuietStepsAreNoCause) {
  MapBuilder builder;
  for (int64_t step = 10; step <= 30; step += 2) {
    builder.changes.push_back({-1, Channel::kCompute, OperatorFamily::kGemm, step, step, 1.2});
  }
  const CauseAnalysis analysis = AnalyzeCauses(builder.Build());
  EXPECT_FALSE(analysis.degraded) << CauseSentence(analysis.ranked[0]);
  // The same slowdown in every step of the window is the family.
  builder.changes = {{-1, Channel::kCompute, OperatorFamily::kGemm, 10, 30, 1.2}};
  const CauseAnalysis sustained = AnalyzeCauses(builder.Build());
  ASSERT_TRUE(sustained.degraded);
  EXPECT_EQ(sustained.ranked[0].kind, CauseKind::kFamilySlow);
}

// A second cause is what the first leaves unexplained.
TEST(CauseTest, TwoCausesAtOnceAreBothNamed) {
  MapBuilder builder;
  builder.changes = {{1, Channel::kCompute, OperatorFamily::kGemm, 5, 14, 1.3},
                     {1, Channel::kCompute, OperatorFamily::kAttention, 5, 14, 1.3},
                     {-1, Channel::kStepGap, OperatorFamily::kUnnamed, 25, 34, 20.0}};
  const CauseAnalysis analysis = AnalyzeCauses(builder.Build());
  ASSERT_TRUE(analysis.degraded);
  ASSERT_TRUE(analysis.has_second);
  std::set<CauseKind> kinds = {analysis.ranked[0].kind, analysis.second.kind};
  EXPECT_EQ(kinds, (std::set<CauseKind>{CauseKind::kGpuSlow, CauseKind::kEnginePause}));
}

// Two data-parallel replicas, each its own engine loop on its first rank (0 and 4): both
// loops stall 10 ms inside their scheduler's range, their workers idle as long before the
// step. Rank 4's gap did not move; counting its gap alone, it read as the rank that did
// not wait, and the pause lost its evidence.
TEST(CauseTest, EveryReplicasLoopStallingIsAPause) {
  MapBuilder builder;
  builder.ranks = 8;
  builder.extra_channels = {{Channel::kLaunch, OperatorFamily::kUnnamed, 2e6},
                            {Channel::kBackend, OperatorFamily::kUnnamed, 1e6}};
  for (int32_t rank = 0; rank < 8; ++rank) {
    const Channel channel = rank % 4 == 0 ? Channel::kFrontend : Channel::kStepGap;
    builder.changes.push_back({rank, channel, OperatorFamily::kUnnamed, 20, 29, 1.0, 10e6});
  }
  const CauseAnalysis analysis = AnalyzeCauses(builder.Build());
  ASSERT_TRUE(analysis.degraded);
  EXPECT_EQ(analysis.ranked[0].kind, CauseKind::kEnginePause) << CauseSentence(analysis.ranked[0]);
  EXPECT_EQ(analysis.ranked[0].first_group, 20);
  EXPECT_EQ(analysis.ranked[0].last_group, 29);
}

// The scheduler (rank 0) stalls 10 ms inside its range; every other rank idles as long
// before the step. One range moved a hundredfold and none of rank 0's calls: a pause, not
// a slow host (whose fit predicts its launches and backend ops slower too).
TEST(CauseTest, OneRangeStretchedWhileTheOthersIdleIsAPauseNotASlowHost) {
  MapBuilder builder;
  builder.extra_channels = {{Channel::kLaunch, OperatorFamily::kUnnamed, 2e6},
                            {Channel::kBackend, OperatorFamily::kUnnamed, 1e6}};
  builder.changes = {{0, Channel::kFrontend, OperatorFamily::kUnnamed, 20, 29, 1.0, 10e6}};
  for (int32_t peer : {1, 2, 3}) {
    builder.changes.push_back(
        {peer, Channel::kStepGap, OperatorFamily::kUnnamed, 20, 29, 1.0, 10e6});
  }
  const CauseAnalysis analysis = AnalyzeCauses(builder.Build());
  ASSERT_TRUE(analysis.degraded);
  EXPECT_EQ(analysis.ranked[0].kind, CauseKind::kEnginePause) << CauseSentence(analysis.ranked[0]);
  EXPECT_EQ(analysis.ranked[0].first_group, 20);
  EXPECT_EQ(analysis.ranked[0].last_group, 29);
  // One of the host's three channels moved: the fit's cosine is 1/sqrt(3).
  for (const Hypothesis& h : analysis.ranked) {
    if (h.kind == CauseKind::kStraggler || h.kind == CauseKind::kHostSlow) {
      EXPECT_LT(h.score, 0.6 * analysis.ranked[0].score) << CauseSentence(h);
    }
  }
}

// Rank 2's launches fail and are retried, 6 a step, which makes its launch time 20%
// longer: the failures name the cause, the longer launches are its cost.
TEST(CauseTest, FailedCallsAreLaunchRetries) {
  MapBuilder builder;
  builder.extra_channels = {{Channel::kLaunch, OperatorFamily::kUnnamed, 2e6},
                            {Channel::kFailedCalls, OperatorFamily::kUnnamed, 0.0}};
  builder.changes = {{2, Channel::kFailedCalls, OperatorFamily::kUnnamed, 10, 19, 1.0, 6.0},
                     {2, Channel::kLaunch, OperatorFamily::kUnnamed, 10, 19, 1.2}};
  const CauseAnalysis analysis = AnalyzeCauses(builder.Build());
  ASSERT_TRUE(analysis.degraded);
  const Hypothesis& top = analysis.ranked[0];
  EXPECT_EQ(top.kind, CauseKind::kLaunchRetry) << CauseSentence(top);
  EXPECT_EQ(top.rank, 2);
  EXPECT_NEAR(top.effect, 6.0, 0.5);
  EXPECT_NE(CauseSentence(top).find("6 runtime calls a step failed on rank 2"), std::string::npos)
      << CauseSentence(top);
}

// Retries are random per launch: one step of rank 1's window has a burst of failures
// (an eager step: many launches), the next one or none. The window runs over the
// failures' span; a lone failure in a healthy run is no cause.
TEST(CauseTest, IntermittentRetriesAreOneWindowAndALoneFailureIsNone) {
  MapBuilder builder;
  builder.steps = 60;
  builder.extra_channels = {{Channel::kFailedCalls, OperatorFamily::kUnnamed, 0.0}};
  for (int64_t step = 20; step <= 45; ++step) {
    const double failures = step % 6 == 0 ? 12.0 : step % 3 == 0 ? 1.0 : 0.0;
    if (failures > 0.0) {
      builder.changes.push_back(
          {1, Channel::kFailedCalls, OperatorFamily::kUnnamed, step, step, 1.0, failures});
    }
  }
  const CauseAnalysis analysis = AnalyzeCauses(builder.Build());
  ASSERT_TRUE(analysis.degraded);
  const Hypothesis& top = analysis.ranked[0];
  EXPECT_EQ(top.kind, CauseKind::kLaunchRetry) << CauseSentence(top);
  EXPECT_EQ(top.rank, 1);
  EXPECT_GE(top.first_group, 20);
  EXPECT_LE(top.first_group, 24);
  EXPECT_GE(top.last_group, 42);
  EXPECT_LE(top.last_group, 45);
  // It shows in the steps where calls failed, not in those between them.
  std::vector<int64_t> failed;
  for (int64_t step = top.first_group; step <= top.last_group; ++step) {
    if (step % 3 == 0) failed.push_back(step);
  }
  EXPECT_TRUE(top.lists_abnormal_steps);
  EXPECT_EQ(top.abnormal_groups, failed);

  MapBuilder lone;
  lone.steps = 60;
  lone.extra_channels = {{Channel::kFailedCalls, OperatorFamily::kUnnamed, 0.0}};
  lone.changes = {{1, Channel::kFailedCalls, OperatorFamily::kUnnamed, 30, 30, 1.0, 1.0}};
  for (const Hypothesis& h : AnalyzeCauses(lone.Build()).ranked) {
    if (h.kind == CauseKind::kLaunchRetry) {
      EXPECT_LT(h.score, CauseOptions().min_score);
    }
  }
}

// A cause off the critical path whose peers waited for it: they waited instead of idling,
// and the sentence says so rather than giving a cost of nothing beside long waits.
TEST(CauseTest, WaitsOffTheCriticalPathAreTimeThePeersIdledAnyway) {
  Hypothesis h;
  h.kind = CauseKind::kGpuSlow;
  h.rank = 3;
  h.first_group = 10;
  h.last_group = 13;
  h.steps = 4;
  h.effect = 0.2;
  h.step_baseline_ns = 40e6;
  h.impact_ns = 0.1e6;
  h.impact_replayed = true;
  h.cost_negligible = true;  // what the replay decides of 0.1 ms in 40 ms (step_replay.h)
  h.victims = {0, 1};
  h.victim_wait_ns = 8e6;
  const std::string off_path = CauseSentence(h);
  EXPECT_NE(off_path.find("almost no time"), std::string::npos) << off_path;
  EXPECT_NE(off_path.find("ranks 0, 1 waited 1.0 ms each a step for it, time they would have "
                          "idled anyway"),
            std::string::npos)
      << off_path;
  h.impact_ns = 4e6;
  h.cost_negligible = false;
  const std::string on_path = CauseSentence(h);
  EXPECT_EQ(on_path.find("idled anyway"), std::string::npos) << on_path;
  EXPECT_NE(on_path.find("it added about 1.0 ms to each of those steps"), std::string::npos)
      << on_path;
}

// Host work 1.3x on the three ranks of node 1 (memory pressure on that host): the node's
// hosts, not one of its ranks.
TEST(CauseTest, EveryRankOfANodeSlowerOnTheHostIsThatNodesHosts) {
  MapBuilder builder;
  builder.ranks = 6;
  builder.ranks_per_node = 3;
  builder.extra_channels = {{Channel::kBackend, OperatorFamily::kUnnamed, 0.3e6}};
  for (int32_t rank : {3, 4, 5}) {
    builder.changes.push_back({rank, Channel::kFrontend, OperatorFamily::kUnnamed, 10, 25, 1.3});
    builder.changes.push_back({rank, Channel::kBackend, OperatorFamily::kUnnamed, 10, 25, 1.3});
  }
  const CauseAnalysis analysis = AnalyzeCauses(builder.Build());
  ASSERT_TRUE(analysis.degraded);
  const Hypothesis& top = analysis.ranked[0];
  EXPECT_EQ(top.kind, CauseKind::kHostSlow) << CauseSentence(top);
  EXPECT_EQ(top.rank, -1);
  EXPECT_EQ(top.node, 1);
  EXPECT_NEAR(top.effect, 0.3, 0.03);
  EXPECT_EQ(CauseLocation(top), "node 1's hosts");
  EXPECT_NE(CauseSentence(top).find("host work on every rank of node 1"), std::string::npos)
      << CauseSentence(top);
  // With host names the cause says the node's: the map's numbering is its own (a fleet's
  // hosts node0, node1, node10, ... in name order put node20 at index 13).
  DeviationMap named = builder.Build();
  named.node_names = {"gpu-a7", "gpu-b20"};
  const CauseAnalysis named_analysis = AnalyzeCauses(named);
  const Hypothesis& by_name = named_analysis.ranked[0];
  EXPECT_EQ(by_name.node_name, "gpu-b20");
  EXPECT_EQ(CauseLocation(by_name), "gpu-b20's hosts");
  EXPECT_NE(CauseSentence(by_name).find("every rank of gpu-b20"), std::string::npos);
}

// The rank is the run's straggler, and no slow launches stand beside it.
void ExpectAStragglerNotSlowLaunches(const CauseAnalysis& analysis, int32_t rank) {
  ASSERT_TRUE(analysis.degraded);
  EXPECT_EQ(analysis.ranked[0].kind, CauseKind::kStraggler) << CauseSentence(analysis.ranked[0]);
  EXPECT_EQ(analysis.ranked[0].rank, rank);
  for (const Hypothesis& h : analysis.ranked) {
    if (h.kind == CauseKind::kLaunchLatency) {
      EXPECT_LT(h.score, CauseOptions().min_score);
    }
  }
}

// Rank 2's collective launch calls 8x longer (it reaches each collective late and waits
// inside the call) while its other launches keep their time; its peers wait in their
// all-reduce. Slow launches would slow every launch call alike: this is a late rank.
TEST(CauseTest, OnlyTheCollectivesLaunchesGrowingIsALateRankNotSlowLaunches) {
  MapBuilder builder;
  builder.extra_channels = {{Channel::kLaunch, OperatorFamily::kUnnamed, 0.2e6},
                            {Channel::kCollectiveLaunch, OperatorFamily::kUnnamed, 0.02e6}};
  builder.changes = {{2, Channel::kCollectiveLaunch, OperatorFamily::kUnnamed, 10, 25, 8.0},
                     {2, Channel::kFrontend, OperatorFamily::kUnnamed, 10, 25, 1.2}};
  builder.WaitInCollectives(2, 10, 25, 1.15);
  ExpectAStragglerNotSlowLaunches(AnalyzeCauses(builder.Build()), 2);
}

// Every launch call of rank 2 1.5x longer, collectives' and the others' alike.
TEST(CauseTest, EveryLaunchCallLongerIsSlowLaunches) {
  MapBuilder builder;
  builder.extra_channels = {{Channel::kLaunch, OperatorFamily::kUnnamed, 0.2e6},
                            {Channel::kCollectiveLaunch, OperatorFamily::kUnnamed, 0.02e6}};
  builder.changes = {{2, Channel::kLaunch, OperatorFamily::kUnnamed, 10, 25, 1.5},
                     {2, Channel::kCollectiveLaunch, OperatorFamily::kUnnamed, 10, 25, 1.5}};
  const CauseAnalysis analysis = AnalyzeCauses(builder.Build());
  ASSERT_TRUE(analysis.degraded);
  EXPECT_EQ(analysis.ranked[0].kind, CauseKind::kLaunchLatency)
      << CauseSentence(analysis.ranked[0]);
  EXPECT_EQ(analysis.ranked[0].rank, 2);
  EXPECT_NEAR(analysis.ranked[0].effect, 0.5, 0.05);
}

// Rank 2's host 1.4x slower in all it does, its launch calls with the rest, and its peers
// wait for it: a straggler. Its launches alone at 1.4x would be the driver's; beside the
// rest of its work they are nothing of their own.
TEST(CauseTest, LaunchesSlowedWithTheRestOfTheHostAreTheHosts) {
  MapBuilder builder;
  builder.extra_channels = {{Channel::kLaunch, OperatorFamily::kUnnamed, 0.2e6},
                            {Channel::kBackend, OperatorFamily::kUnnamed, 0.3e6}};
  for (Channel channel : {Channel::kLaunch, Channel::kFrontend, Channel::kBackend}) {
    builder.changes.push_back({2, channel, OperatorFamily::kUnnamed, 10, 25, 1.4});
  }
  builder.WaitInCollectives(2, 10, 25, 1.3);
  ExpectAStragglerNotSlowLaunches(AnalyzeCauses(builder.Build()), 2);
}

// Rank 2's attention 1.6x over steps 10-25 while its gemms kept their time (its batch's
// longer context): no slower GPU, which would slow its gemms too. The same GPU with its
// gemms 1.3x and its attention (memory-bound) 1.1x is one.
TEST(CauseTest, OneFamilyMovingAloneOnARankIsNoSlowerGpu) {
  MapBuilder alone;
  alone.changes = {{2, Channel::kCompute, OperatorFamily::kAttention, 10, 25, 1.6}};
  for (const Hypothesis& h : AnalyzeCauses(alone.Build()).ranked) {
    if (h.kind == CauseKind::kGpuSlow) {
      EXPECT_LT(h.score, CauseOptions().min_score) << CauseSentence(h);
    }
  }
  MapBuilder throttled;
  throttled.changes = {{2, Channel::kCompute, OperatorFamily::kGemm, 10, 25, 1.3},
                       {2, Channel::kCompute, OperatorFamily::kAttention, 10, 25, 1.1}};
  const CauseAnalysis analysis = AnalyzeCauses(throttled.Build());
  ASSERT_TRUE(analysis.degraded);
  EXPECT_EQ(analysis.ranked[0].kind, CauseKind::kGpuSlow) << CauseSentence(analysis.ranked[0]);
  EXPECT_EQ(analysis.ranked[0].rank, 2);
}

// One kernel class that our families split: softmax kernels (0.5 ms a step) slowed 1.4x
// with attention (2 ms) over steps 10-25 on every rank. One cause, named by attention, whose
// kernels added the more time, with softmax beside it and no second cause of softmax. The
// same window with softmax 1.9x is two faults: softmax's stays a cause of its own.
TEST(CauseTest, FamiliesSlowedAlikeAreOneCauseNamedByTheCostlier) {
  MapBuilder alike;
  alike.extra_channels = {{Channel::kCompute, OperatorFamily::kSoftmax, 0.5e6}};
  alike.changes = {{-1, Channel::kCompute, OperatorFamily::kAttention, 10, 25, 1.4},
                   {-1, Channel::kCompute, OperatorFamily::kSoftmax, 10, 25, 1.4}};
  const CauseAnalysis joined = AnalyzeCauses(alike.Build());
  ASSERT_TRUE(joined.degraded);
  const Hypothesis& top = joined.ranked[0];
  EXPECT_EQ(top.kind, CauseKind::kFamilySlow) << CauseSentence(top);
  EXPECT_EQ(top.family, OperatorFamily::kAttention) << CauseSentence(top);
  EXPECT_EQ(top.also_families, std::vector<OperatorFamily>{OperatorFamily::kSoftmax});
  EXPECT_NE(CauseSentence(top).find("attention and softmax kernels"), std::string::npos)
      << CauseSentence(top);
  for (const Hypothesis& h : joined.ranked) EXPECT_NE(h.family, OperatorFamily::kSoftmax);
  EXPECT_FALSE(joined.has_second && joined.second.family == OperatorFamily::kSoftmax);

  MapBuilder apart = alike;
  apart.rng.seed(11);
  apart.changes[1].factor = 1.9;
  const CauseAnalysis separate = AnalyzeCauses(apart.Build());
  ASSERT_TRUE(separate.degraded);
  EXPECT_TRUE(separate.ranked[0].also_families.empty()) << CauseSentence(separate.ranked[0]);
  bool softmax_named = separate.has_second && separate.second.family == OperatorFamily::kSoftmax;
  for (const Hypothesis& h : separate.ranked) softmax_named |= h.family == OperatorFamily::kSoftmax;
  EXPECT_TRUE(softmax_named);
}

// Three families of one kernel class slowed 1.4x on every rank: softmax over steps 6-29 (the
// longest window, ranked first), attention over 10-29 (the costliest: it leads once joined)
// and norm over 6-24. Each shares three quarters of the first cause's window, so all three
// are one cause, whichever leads; norm shares less of attention's own window.
TEST(CauseTest, FamiliesJoinAgainstTheFirstCausesWindowWhoeverLeads) {
  MapBuilder builder;
  builder.extra_channels = {{Channel::kCompute, OperatorFamily::kSoftmax, 0.5e6},
                            {Channel::kCompute, OperatorFamily::kNorm, 0.3e6}};
  builder.changes = {{-1, Channel::kCompute, OperatorFamily::kSoftmax, 6, 29, 1.4},
                     {-1, Channel::kCompute, OperatorFamily::kAttention, 10, 29, 1.4},
                     {-1, Channel::kCompute, OperatorFamily::kNorm, 6, 24, 1.4}};
  const CauseAnalysis analysis = AnalyzeCauses(builder.Build());
  ASSERT_TRUE(analysis.degraded);
  const Hypothesis& top = analysis.ranked[0];
  EXPECT_EQ(top.family, OperatorFamily::kAttention) << CauseSentence(top);
  std::set<OperatorFamily> also(top.also_families.begin(), top.also_families.end());
  EXPECT_EQ(also, (std::set<OperatorFamily>{OperatorFamily::kSoftmax, OperatorFamily::kNorm}))
      << CauseSentence(top);
  for (size_t i = 1; i < analysis.ranked.size(); ++i) {
    EXPECT_NE(analysis.ranked[i].family, OperatorFamily::kNorm) << CauseSentence(analysis.ranked[i]);
  }
}

// --- Baselines ---------------------------------------------------------------

// Decode attention grows with the context its requests carry; the linear model follows
// it where a median would call the long-context steps slow.
TEST(BaselineFitTest, TheContextModelFollowsADecodesAttention) {
  std::vector<StepShape> shapes;
  std::vector<double> values;
  std::mt19937 rng(3);
  std::normal_distribution<double> noise(0.0, 0.01);
  for (int i = 0; i < 60; ++i) {
    StepShape shape{4.0, 1000.0 + 50.0 * i, 4.0};
    shapes.push_back(shape);
    values.push_back((20e3 + 30.0 * shape.context) * (1.0 + noise(rng)));
  }
  const ChannelBaseline linear(shapes, values, 1000.0, ShapeModel::kLinearInTokens);
  const ChannelBaseline median(shapes, values, 1000.0, ShapeModel::kPowerLawInSize);
  const StepShape late{4.0, 1000.0 + 50.0 * 59, 4.0};
  EXPECT_NEAR(linear.Expected(late), values.back(), 3.0 * linear.sigma());
  // The median's spread is the trend it cannot follow.
  EXPECT_LT(linear.sigma(), 0.2 * median.sigma());
}

// Expert kernels load the weights of each expert their rows reach: a batch of 2 tokens
// reaches few of a rank's 8 experts, one of 12 nearly all of them, and beyond that only
// the rows add. A line or a power law in the tokens runs under the knee (steps of 7-20
// tokens read 1.2x slow); the experts' model follows it.
TEST(BaselineFitTest, ExpertKernelsFollowTheExpertsTheirBatchReaches) {
  std::vector<StepShape> shapes;
  std::vector<double> values;
  std::mt19937 rng(5);
  std::normal_distribution<double> noise(0.0, 0.01);
  auto truth = [](double tokens) {
    const double reached = 8.0 * (1.0 - std::pow(1.0 - 1.0 / 8.0, tokens));
    return 60e3 + 50e3 * reached + 200.0 * tokens;
  };
  for (int i = 0; i < 200; ++i) {
    const double tokens = 1.0 + (i * 37) % 64;
    StepShape shape{tokens, 0.0, tokens};
    shapes.push_back(shape);
    values.push_back(truth(tokens) * (1.0 + noise(rng)));
  }
  const ChannelBaseline experts(shapes, values, 1000.0, ShapeModel::kSaturating);
  for (double tokens : {2.0, 8.0, 14.0, 60.0}) {
    EXPECT_NEAR(experts.Expected({tokens, 0.0, tokens}), truth(tokens), 0.03 * truth(tokens))
        << tokens;
  }
  const ChannelBaseline line(shapes, values, 1000.0, ShapeModel::kTokenWork);
  EXPECT_LT(experts.sigma(), 0.5 * line.sigma());
}

TEST(BaselineFitTest, AFaultWindowDoesNotWidenItsOwnBaseline) {
  std::vector<StepShape> shapes(40, StepShape{8.0, 0.0, 8.0});
  std::vector<double> values(40, 1e6);
  for (size_t i = 0; i < values.size(); ++i) values[i] *= 1.0 + 0.01 * ((i * 7) % 5 - 2);
  for (size_t i = 10; i < 20; ++i) values[i] *= 1.5;
  const ChannelBaseline baseline(shapes, values, 1000.0, ShapeModel::kPowerLawInSize);
  EXPECT_NEAR(baseline.Expected(shapes[0]), 1e6, 0.02e6);
  EXPECT_LT(baseline.sigma(), 0.05e6);
}

// GEMMs do work per token: a decode batch draining from 10 sequences to 1, with the
// GEMMs 1.4x slower over most single-sequence steps, must not read as GEMMs that get
// faster with more tokens. The work-per-token model keeps its slopes at or above zero,
// so the slow window stands above every normal step in what the fit leaves (the
// common slow regime is found there); the full linear model tilts into it.
TEST(BaselineFitTest, WorkPerTokenNeverGetsFasterWithMoreTokens) {
  std::vector<StepShape> shapes;
  std::vector<double> values;
  std::vector<bool> slow;
  std::mt19937 rng(11);
  std::normal_distribution<double> noise(0.0, 0.01);
  for (int i = 0; i < 44; ++i) {
    const double tokens = std::max(1.0, 10.0 - i / 2);  // one token per sequence
    shapes.push_back(StepShape{tokens, tokens * (300.0 + i), tokens});
    slow.push_back(i >= 20 && i <= 40);
    values.push_back((4.4e6 + 2e3 * tokens) * (slow.back() ? 1.4 : 1.0) * (1.0 + noise(rng)));
  }
  auto separable = [&](const ChannelBaseline& fit) {
    double least_slow = 1e18, most_normal = -1e18;
    for (size_t i = 0; i < values.size(); ++i) {
      const double residual = values[i] - fit.Expected(shapes[i]);
      (slow[i] ? least_slow : most_normal) =
          slow[i] ? std::min(least_slow, residual) : std::max(most_normal, residual);
    }
    return least_slow > most_normal;
  };
  const ChannelBaseline per_token(shapes, values, 1000.0, ShapeModel::kTokenWork);
  const ChannelBaseline full(shapes, values, 1000.0, ShapeModel::kLinearInTokens);
  EXPECT_GE(per_token.Expected(shapes[0]), per_token.Expected(shapes.back()));
  EXPECT_TRUE(separable(per_token));
  EXPECT_LT(full.Expected(shapes[0]), full.Expected(shapes.back()));
}

// A scheduler's time between steps is a fixed cost plus a cost per sequence: as a
// decode batch drains from 120 sequences to 5, the affine model follows it where a
// power law bends under the large batches and calls them slow.
TEST(BaselineFitTest, HostWorkIsAFixedCostPlusACostPerSequence) {
  std::vector<StepShape> shapes;
  std::vector<double> values;
  std::mt19937 rng(5);
  std::normal_distribution<double> noise(0.0, 0.05);
  for (int i = 0; i < 120; ++i) {
    const double requests = 120.0 - i;
    shapes.push_back(StepShape{requests, 0.0, requests});
    values.push_back((350e3 + 17e3 * requests) * (1.0 + noise(rng)));
  }
  const ChannelBaseline affine(shapes, values, 1000.0, ShapeModel::kAffineInRequests);
  const ChannelBaseline power(shapes, values, 1000.0, ShapeModel::kPowerLawInSize);
  for (const double requests : {120.0, 60.0, 5.0}) {
    const double truth = 350e3 + 17e3 * requests;
    EXPECT_NEAR(affine.Expected(StepShape{requests, 0.0, requests}), truth, 0.1 * truth)
        << requests;
  }
  EXPECT_LT(affine.sigma(), power.sigma());
  // Without the batch's sequences it knows only the median.
  EXPECT_GT(affine.Expected(StepShape{}), 0.0);
}

// Expert kernels saturate with the batch (fewer tokens activate fewer experts, each
// loading its weights): their model keeps the power law when it fits the run's steps
// better than the linear model.
TEST(BaselineFitTest, ExpertKernelsThatSaturateKeepThePowerLaw) {
  std::vector<StepShape> shapes;
  std::vector<double> values;
  std::mt19937 rng(9);
  std::normal_distribution<double> noise(0.0, 0.02);
  for (int i = 0; i < 120; ++i) {
    const double tokens = 2.0 + i;  // a decode batch draining
    shapes.push_back(StepShape{tokens, 100.0 * tokens, tokens});
    values.push_back(100e3 * std::sqrt(tokens) * (1.0 + noise(rng)));
  }
  const ChannelBaseline device(shapes, values, 1000.0, ShapeModel::kSaturating);
  for (const double tokens : {4.0, 20.0, 60.0, 120.0}) {
    const double truth = 100e3 * std::sqrt(tokens);
    EXPECT_NEAR(device.Expected(StepShape{tokens, 100.0 * tokens, tokens}), truth, 0.06 * truth)
        << tokens;
  }
}

// A collective is a latency plus its bytes, which follow the step's tokens, not its
// sequences: a prefill of one long prompt moves more than a decode of many.
TEST(BaselineFitTest, ACollectiveIsALatencyPlusItsBytes) {
  std::vector<StepShape> shapes;
  std::vector<double> values;
  std::mt19937 rng(8);
  std::normal_distribution<double> noise(0.0, 0.03);
  for (int i = 0; i < 80; ++i) {
    const double tokens = i % 4 == 0 ? 2000.0 + 50.0 * i : 100.0 - i;  // prefills, a decode
    const double requests = i % 4 == 0 ? 1.0 : tokens;
    shapes.push_back(StepShape{tokens, 0.0, requests});
    values.push_back((20e3 + 40.0 * tokens) * (1.0 + noise(rng)));
  }
  const ChannelBaseline bytes(shapes, values, 1000.0, ShapeModel::kAffineInSize);
  for (const double tokens : {3000.0, 500.0, 30.0}) {
    const double truth = 20e3 + 40.0 * tokens;
    EXPECT_NEAR(bytes.Expected(StepShape{tokens, 0.0, 1.0}), truth, 0.1 * truth) << tokens;
  }
}

// A gather of each sequence's logits (the tensor-parallel LM head) moves bytes that follow
// the sequences, not the tokens: mixed steps whose long prompts add tokens but no
// sequences. The linear model in tokens and sequences (all-gathers' cells) expects it
// within its noise; one in the tokens alone is off by far more.
TEST(BaselineFitTest, AGatherOfLogitsFollowsTheSequences) {
  std::vector<StepShape> shapes;
  std::vector<double> values;
  std::mt19937 rng(9);
  std::normal_distribution<double> noise(0.0, 0.03);
  std::uniform_real_distribution<double> prompt(0.0, 6000.0);
  for (int i = 0; i < 120; ++i) {
    const double requests = 40.0 + i / 2;
    const double tokens = requests + (i % 3 == 0 ? prompt(rng) : 0.0);
    shapes.push_back(StepShape{tokens, 0.0, requests});
    values.push_back((14e3 + 600.0 * requests) * (1.0 + noise(rng)));
  }
  const ChannelBaseline gather(shapes, values, 1000.0, ShapeModel::kTokenWork);
  const ChannelBaseline by_tokens(shapes, values, 1000.0, ShapeModel::kAffineInSize);
  double worst = 0.0, worst_by_tokens = 0.0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const double truth = 14e3 + 600.0 * shapes[i].requests;
    worst = std::max(worst, std::abs(gather.Expected(shapes[i]) - truth) / truth);
    worst_by_tokens = std::max(worst_by_tokens, std::abs(by_tokens.Expected(shapes[i]) - truth) / truth);
  }
  EXPECT_LT(worst, 0.08);
  EXPECT_GT(worst_by_tokens, 0.2);
}

// --- Simulated runs ------------------------------------------------------------

model::Trace OpenSimulatedRun(const sim::SimConfig& config) {
  const std::string dir = base::TempDir("cause_sim") + "/run.teller";
  auto summary = sim::RunSimulation(config, dir);
  EXPECT_TRUE(summary.ok()) << summary.status().message();
  auto opened = store::OpenTrace({dir}, {});
  EXPECT_TRUE(opened.ok()) << opened.status().message();
  return opened.ok() ? std::move(*opened) : model::Trace{};
}

model::Trace OpenSimulated(const std::string& fault, uint64_t seed,
                           sim::EngineKind engine = sim::EngineKind::kVllmV1Online) {
  sim::SimConfig config = sim::DefaultConfig(engine);
  config.model.layers = 4;
  config.workload.num_requests = 12;
  config.seed = seed;
  if (!fault.empty()) {
    auto faults = sim::ParseFaults(fault);
    EXPECT_TRUE(faults.ok()) << faults.status().message();
    config.faults = faults.value();
  }
  return OpenSimulatedRun(config);
}

CauseAnalysis Simulate(const std::string& fault, uint64_t seed) {
  return AnalyzeCauses(BuildDeviationMap(OpenSimulated(fault, seed)));
}

// The causes of an SGLang run of a paper-preset draw (its seed; `requests`, 0: the engine's
// default) with one fault.
CauseAnalysis AnalyzeSglangDraw(uint64_t seed, int32_t requests, const std::string& fault) {
  sim::SimConfig config = sim::DefaultConfig(sim::EngineKind::kSglang);
  config.seed = seed;
  if (requests > 0) config.workload.num_requests = requests;
  auto faults = sim::ParseFaults(fault);
  EXPECT_TRUE(faults.ok()) << faults.status().message();
  if (faults.ok()) config.faults = *faults;
  return AnalyzeCauses(BuildDeviationMap(OpenSimulatedRun(config)));
}

// SGLang replays CUDA graphs for its decode steps and launches kernel by kernel only in its
// prefill steps: launch calls 1.6x slower on rank 1 over steps 20-51 show in the few
// prefills of that window, hardly in the decodes between them (over every step the window's
// score was 8.2, below the threshold). Over the prefill steps alone the fault's are
// contiguous, and its window spans them.
TEST(SimulatedCauseTest, SlowerLaunchesShowInTheStepsThatLaunchEagerly) {
  const CauseAnalysis analysis =  // a paper-preset draw's seed (seed 21)
      AnalyzeSglangDraw(10929723288269424098u, 0,
                        "launch_latency:rank=1,magnitude=0.6,onset=20,duration=32");
  ASSERT_TRUE(analysis.degraded);
  const Hypothesis& top = analysis.ranked[0];
  EXPECT_EQ(top.kind, CauseKind::kLaunchLatency) << CauseSentence(top);
  EXPECT_EQ(top.rank, 1);
  EXPECT_GE(top.first_group, 20);
  EXPECT_LE(top.last_group, 51);
  EXPECT_GE(top.steps, 20);
}

// The same of a slower host: rank 2's host 1.4x slower over steps 25-51 of an SGLang run
// shows in its eager prefills, where its host work is, and little in its graph-replayed
// decodes; it made its peers wait, so it straggles (over every step the best it read as was
// slower launches at 4.7).
TEST(SimulatedCauseTest, ASlowerHostShowsInTheStepsThatLaunchEagerly) {
  const CauseAnalysis analysis =  // a paper-preset draw's seed (seed 21)
      AnalyzeSglangDraw(11997095570395500063u, 10,
                        "straggler_rank:rank=2,magnitude=0.4,onset=25,duration=27");
  ASSERT_TRUE(analysis.degraded);
  const Hypothesis& top = analysis.ranked[0];
  EXPECT_EQ(top.kind, CauseKind::kStraggler) << CauseSentence(top);
  EXPECT_EQ(top.rank, 2);
  EXPECT_GE(top.first_group, 25);
  EXPECT_LE(top.last_group, 51);
}

TEST(SimulatedCauseTest, AFaultFreeRunIsNotDegraded) { EXPECT_FALSE(Simulate("", 7).degraded); }

// Data-parallel replicas step in lock step: one without requests runs a dummy batch, and
// beside another replica's prefill it does a prefill's work while its tokens say none.
// Judged as a decode, each prefill of this fault-free 16-rank run stretched the idle
// replica's ranges, and the run read as an engine pause (score 28.9).
TEST(SimulatedCauseTest, ADummyBatchBesideAPrefillIsNoCause) {
  sim::SimConfig config = sim::DefaultConfig(sim::EngineKind::kSglang);
  config.workload.num_requests = 12;
  config.seed = 2;
  ASSERT_TRUE(sim::FleetConfig(16, 8, &config).ok());
  const CauseAnalysis analysis = AnalyzeCauses(BuildDeviationMap(OpenSimulatedRun(config)));
  EXPECT_FALSE(analysis.degraded);
  for (const Hypothesis& h : analysis.ranked) {
    EXPECT_LT(h.score, 5.0) << CauseSentence(h);
  }
}

// An offline batch admits its prompts in one step: the trace gives their tokens, not each
// prompt's, so each request is counted at its share. While every request of the batch is
// in it their sum is known; once some finish, the ones left may hold longer or shorter
// prompts, and the context's spread says how much.
TEST(SimulatedCauseTest, AContextIsUncertainOnceSomeOfItsAdmissionHaveLeft) {
  sim::SimConfig config = sim::DefaultConfig(sim::EngineKind::kVllmV1Offline);
  config.workload.num_requests = 10;
  config.seed = 2;
  const model::Trace trace = OpenSimulatedRun(config);
  const std::vector<StepShape> shapes = StepShapes(trace);
  auto requests_of = [&](size_t s) {
    std::set<uint32_t> ids;
    const uint32_t begin = trace.steps.requests_begin[s];
    for (uint32_t i = begin; i < begin + trace.steps.requests_count[s]; ++i) {
      ids.insert(trace.step_requests[i].value());
    }
    return ids;
  };
  std::map<int32_t, std::set<uint32_t>> first_admission;  // rank -> its first batch
  size_t whole = 0, partial = 0;
  for (size_t s = 0; s < shapes.size(); ++s) {  // steps in time order on each rank
    const std::set<uint32_t> ids = requests_of(s);
    if (ids.empty() || shapes[s].context == 0.0) continue;
    auto [first, is_first] = first_admission.try_emplace(trace.steps.rank[s], ids);
    if (first->second.size() < 2) continue;
    const bool within = std::includes(first->second.begin(), first->second.end(), ids.begin(),
                                      ids.end());
    if (ids == first->second) {
      EXPECT_EQ(shapes[s].context_spread, 0.0) << s;
      ++whole;
    } else if (within) {
      EXPECT_GT(shapes[s].context_spread, 0.0) << s;
      // No more than every share's spread: cv (1) x share x sqrt(k (n - k) / (n - 1)).
      EXPECT_LT(shapes[s].context_spread, shapes[s].context * 2.0) << s;
      ++partial;
    }
  }
  EXPECT_GT(whole, 0u);
  EXPECT_GT(partial, 0u);
}

// Expert-parallel replicas pad their batches to the largest replica's, and each records
// the tokens it scheduled: a step's padded size is the largest size of its global step,
// which differs from its own where the replicas' batches do.
TEST(SimulatedCauseTest, AStepsPaddedSizeIsItsGlobalStepsLargest) {
  sim::SimConfig config = sim::DefaultConfig(sim::EngineKind::kVllmV1Online);
  config.workload.num_requests = 48;
  config.seed = 5;
  ASSERT_TRUE(sim::FleetConfig(16, 4, &config).ok());
  config.model = sim::MoeModel();
  config.model.layers = 4;
  config.cluster.expert_parallel = true;
  const model::Trace trace = OpenSimulatedRun(config);
  const std::vector<StepShape> shapes = StepShapes(trace);
  std::map<int64_t, double> largest;
  for (size_t s = 0; s < shapes.size(); ++s) {
    ASSERT_GE(trace.steps.global_step[s], 0);
    largest[trace.steps.global_step[s]] =
        std::max(largest[trace.steps.global_step[s]], shapes[s].size);
  }
  size_t differs = 0;
  for (size_t s = 0; s < shapes.size(); ++s) {
    EXPECT_EQ(shapes[s].padded_size, largest[trace.steps.global_step[s]]) << s;
    differs += shapes[s].padded_size != shapes[s].size;
  }
  EXPECT_GT(differs, 0u);
}

// A real trace of ../shared/real-traces replayed for `steps` steps with one fault
// (perturb/); an empty trace (and a skip by the caller) when the traces are absent.
model::Trace ReplayRealTrace(const std::string& file, const std::string& fault, int64_t steps) {
  const std::string traces = base::RealTracesDir();
  if (traces.empty()) return {};
  auto templates = perturb::LoadTemplates({traces + "/" + file});
  EXPECT_TRUE(templates.ok()) << templates.status().message();
  if (!templates.ok()) return {};
  perturb::PerturbOptions options;
  options.steps = steps;
  auto faults = sim::ParseFaults(fault);
  EXPECT_TRUE(faults.ok()) << faults.status().message();
  if (!faults.ok()) return {};
  options.fault = faults->at(0);
  const std::string dir = base::TempDir("cause_real") + "/run";
  auto replayed = perturb::RunPerturb(*templates, options, dir);
  EXPECT_TRUE(replayed.ok()) << replayed.status().message();
  auto opened = store::OpenTrace({dir}, {});
  EXPECT_TRUE(opened.ok()) << opened.status().message();
  return opened.ok() ? std::move(*opened) : model::Trace{};
}

// A short capture of one rank (the real A100 training trace replayed for 8 steps) whose
// last 4 steps ran on a throttled GPU: with no peers and as many slow steps as normal
// ones, the first steps are the baseline (a change point), and the GPU is named.
TEST(RealTraceCauseTest, AShortCaptureEndingOnAThrottledGpu) {
  if (base::RealTracesDir().empty()) GTEST_SKIP() << "../shared/real-traces is absent";
  const model::Trace trace =
      ReplayRealTrace("hta__a100-80gb_16rank_rank0.json.gz",
                      "gpu_throttle:rank=0,onset=4,duration=4,magnitude=0.3", 8);
  const CauseAnalysis analysis = AnalyzeCauses(BuildDeviationMap(trace));
  ASSERT_TRUE(analysis.degraded);
  EXPECT_EQ(analysis.ranked[0].kind, CauseKind::kGpuSlow) << CauseSentence(analysis.ranked[0]);
  EXPECT_EQ(analysis.ranked[0].first_group, 4);
  EXPECT_EQ(analysis.ranked[0].last_group, 7);
}

// The real V100 training trace replayed for 6 steps, its GPU throttled from step 2 to the
// end: one normal scored step before four slow ones. The slow steps hold one level, so
// they are not the rank's normal, and a window with an onset is an incident, not a regime,
// however much of the capture it takes.
TEST(RealTraceCauseTest, AShortCaptureThrottledFromItsSecondScoredStep) {
  if (base::RealTracesDir().empty()) GTEST_SKIP() << "../shared/real-traces is absent";
  const model::Trace trace =
      ReplayRealTrace("hta__v100_2rank_allreduce_rank1.json.gz",
                      "gpu_throttle:rank=0,onset=2,duration=4,magnitude=0.3", 6);
  const CauseAnalysis analysis = AnalyzeCauses(BuildDeviationMap(trace));
  ASSERT_TRUE(analysis.degraded);
  EXPECT_EQ(analysis.ranked[0].kind, CauseKind::kGpuSlow) << CauseSentence(analysis.ranked[0]);
  EXPECT_EQ(analysis.ranked[0].first_group, 2);
  EXPECT_EQ(analysis.ranked[0].last_group, 5);
  // The same capture without the fault: its first scored step is no normal to judge
  // the others by.
  const model::Trace healthy = ReplayRealTrace("hta__v100_2rank_allreduce_rank1.json.gz",
                                               "gpu_throttle:rank=0,onset=2,duration=4,magnitude=0",
                                               6);
  EXPECT_FALSE(AnalyzeCauses(BuildDeviationMap(healthy)).degraded);
}

// The real B200 vLLM step replayed for 6 steps, its engine loop stalled before each step
// from step 2 on (about 60% of a step, host jitter 15%): the stall from ~1 ms to 44-67 ms is
// a level the slow steps hold, and it is judged against the rank's normal steps' time.
TEST(RealTraceCauseTest, AShortCaptureWithAPausedEngineFromItsSecondScoredStep) {
  if (base::RealTracesDir().empty()) GTEST_SKIP() << "../shared/real-traces is absent";
  const model::Trace trace =
      ReplayRealTrace("tracelens__b200_vllm_tp8_rank0_eager.json.gz",
                      "engine_pause:onset=2,duration=4,magnitude=0.6", 6);
  const CauseAnalysis analysis = AnalyzeCauses(BuildDeviationMap(trace));
  ASSERT_TRUE(analysis.degraded);
  EXPECT_EQ(analysis.ranked[0].kind, CauseKind::kEnginePause) << CauseSentence(analysis.ranked[0]);
  EXPECT_EQ(analysis.ranked[0].first_group, 2);
  EXPECT_EQ(analysis.ranked[0].last_group, 5);
}

// The same step replayed for 6 steps, its engine loop stalled in the last 3 (half of the 5
// scored steps): three steps at one level in a short capture are a fault's window, not a
// blip of three strong steps, and the pause's effect is its length (the stall cells'
// excess), not the z cap's worth of it (2.9 ms a step was named for 57 ms).
TEST(RealTraceCauseTest, AShortCapturesLastThreeStepsPausedAreAPauseOfItsLength) {
  if (base::RealTracesDir().empty()) GTEST_SKIP() << "../shared/real-traces is absent";
  const model::Trace trace =
      ReplayRealTrace("tracelens__b200_vllm_tp8_rank0_eager.json.gz",
                      "engine_pause:onset=3,duration=3,magnitude=0.6", 6);
  const DeviationMap map = BuildDeviationMap(trace);
  const CauseAnalysis analysis = AnalyzeCauses(map);
  ASSERT_TRUE(analysis.degraded);
  const Hypothesis& top = analysis.ranked[0];
  EXPECT_EQ(top.kind, CauseKind::kEnginePause) << CauseSentence(top);
  EXPECT_EQ(top.first_group, 3);
  EXPECT_EQ(top.last_group, 5);
  double excess = 0.0;
  int stalls = 0;
  for (const MapStep& step : map.steps) {
    if (step.group < 3) continue;
    for (uint32_t c = step.cells_begin; c < step.cells_end; ++c) {
      if (map.cells[c].channel != Channel::kStall) continue;
      excess += map.cells[c].value - map.cells[c].expected;
      ++stalls;
    }
  }
  ASSERT_EQ(stalls, 3);
  EXPECT_NEAR(top.effect, excess / stalls, 0.1 * excess / stalls) << CauseSentence(top);
}

// Launch calls 1.6x longer on the real A100 training trace (8 steps), off the critical
// path (the GPU is the bottleneck, the steps do not move). A launch call takes ~8 us, so
// 5 us more is 5 times the 1 us timing resolution alone, but the step's mean over its
// thousands of calls resolves far finer: the launches are named, not left in the noise.
TEST(RealTraceCauseTest, SlowerLaunchCallsAreFoundInTheirMeanOverAStep) {
  if (base::RealTracesDir().empty()) GTEST_SKIP() << "../shared/real-traces is absent";
  const model::Trace trace =
      ReplayRealTrace("hta__a100-80gb_16rank_rank0.json.gz",
                      "launch_latency:rank=0,onset=3,duration=5,magnitude=0.6", 8);
  const CauseAnalysis analysis = AnalyzeCauses(BuildDeviationMap(trace));
  ASSERT_TRUE(analysis.degraded);
  EXPECT_EQ(analysis.ranked[0].kind, CauseKind::kLaunchLatency)
      << CauseSentence(analysis.ranked[0]);
  EXPECT_EQ(analysis.ranked[0].first_group, 3);
}

// Host memory pressure on a real ResNet-50 training step: Python, the host's ops and
// its copies to and from host memory slow down together. That is the host, not slow
// copies alone (the copies were its largest cells, and copy latency was named).
TEST(RealTraceCauseTest, HostMemoryPressureIsTheHostNotItsCopies) {
  if (base::RealTracesDir().empty()) GTEST_SKIP() << "../shared/real-traces is absent";
  const model::Trace trace =
      ReplayRealTrace("kineto__resnet50_worker0_legacy_schema.pt.trace.json.gz",
                      "host_memory_pressure:onset=6,duration=6,magnitude=0.35", 16);
  const CauseAnalysis analysis = AnalyzeCauses(BuildDeviationMap(trace));
  ASSERT_TRUE(analysis.degraded);
  EXPECT_EQ(analysis.ranked[0].kind, CauseKind::kHostSlow) << CauseSentence(analysis.ranked[0]);
  EXPECT_EQ(analysis.ranked[0].rank, 0);
}

// An engine loop that stalls at the start of each step (a GC pause: nothing launched,
// the GPU idle) on the real vLLM decode trace: its one rank has no gap between steps
// to show it, and no peer to wait for; the stall inside the step is the pause.
TEST(RealTraceCauseTest, AStallInsideTheStepIsAnEnginePause) {
  if (base::RealTracesDir().empty()) GTEST_SKIP() << "../shared/real-traces is absent";
  const model::Trace trace = ReplayRealTrace("tracelens__mi300x_vllm_decode_cudagraph_step.json.gz",
                                             "engine_pause:onset=13,duration=5,magnitude=0.6", 24);
  const CauseAnalysis analysis = AnalyzeCauses(BuildDeviationMap(trace));
  ASSERT_TRUE(analysis.degraded);
  const Hypothesis& top = analysis.ranked[0];
  EXPECT_EQ(top.kind, CauseKind::kEnginePause) << CauseSentence(top);
  EXPECT_EQ(top.first_group, 13);
  EXPECT_EQ(top.last_group, 17);
}

// The real nsys capture alternates two step bodies under one name (6 kernels, then 2):
// without a batch to read, each body is a kind of step with its own baseline, so the
// throttled GPU is found where every other step looked slow against one baseline (a
// slow launch was named).
TEST(RealTraceCauseTest, AlternatingStepBodiesAreTwoKindsOfStep) {
  if (base::RealTracesDir().empty()) GTEST_SKIP() << "../shared/real-traces is absent";
  const model::Trace trace =
      ReplayRealTrace("nvfuser__h200_cross_entropy_report1.sqlite",
                      "gpu_throttle:rank=0,onset=10,duration=8,magnitude=0.3", 24);
  const CauseAnalysis analysis = AnalyzeCauses(BuildDeviationMap(trace));
  ASSERT_TRUE(analysis.degraded);
  const Hypothesis& top = analysis.ranked[0];
  EXPECT_EQ(top.kind, CauseKind::kGpuSlow) << CauseSentence(top);
  EXPECT_GE(top.first_group, 10);
  EXPECT_LE(top.last_group, 17);
}

TEST(SimulatedCauseTest, EachCauseIsFoundWhereItWasInjected) {
  struct Case {
    std::string fault;
    CauseKind kind;
    int32_t rank;
    bool above_threshold;
  };
  for (const Case& c : std::vector<Case>{
           {"gpu_throttle:rank=1", CauseKind::kGpuSlow, 1, true},
           {"allocator_slow_path:rank=1", CauseKind::kAllocator, 1, true},
           {"engine_pause", CauseKind::kEnginePause, -1, true},
       }) {
    const CauseAnalysis analysis = Simulate(c.fault, 7);
    ASSERT_FALSE(analysis.ranked.empty()) << c.fault;
    EXPECT_EQ(analysis.degraded, c.above_threshold)
        << c.fault << ": score " << analysis.ranked[0].score;
    const Hypothesis& top = analysis.ranked[0];
    EXPECT_EQ(top.kind, c.kind) << c.fault << ": " << CauseSentence(top);
    EXPECT_EQ(top.rank, c.rank) << c.fault;
    // The simulator's default onset is step 27.
    EXPECT_LE(top.first_group, 28) << c.fault;
    EXPECT_GE(top.last_group, 29) << c.fault;
  }
}

// A kernel family slower on every rank for almost half the run: the ranks' role baseline
// leaves that window out, or the slowdown would be half of its normal.
TEST(SimulatedCauseTest, AFamilySlowOnEveryRankForHalfTheRunIsThatFamily) {
  const CauseAnalysis analysis = AnalyzeCauses(BuildDeviationMap(
      OpenSimulated("kernel_slowdown:family=gemm,magnitude=0.3,onset=30,duration=60", 7)));
  ASSERT_TRUE(analysis.degraded);
  const Hypothesis& top = analysis.ranked[0];
  EXPECT_EQ(top.kind, CauseKind::kFamilySlow) << CauseSentence(top);
  EXPECT_EQ(top.family, OperatorFamily::kGemm) << CauseSentence(top);
  EXPECT_LE(top.first_group, 32);
  EXPECT_GE(top.last_group, 85);
}

// The largest z of a channel's cells over steps 27-34 (the simulator's default fault
// window), leaving out one rank.
double LargestZ(const DeviationMap& map, Channel channel, int32_t except_rank) {
  double largest = 0.0;
  for (const Cell& cell : map.cells) {
    const MapStep& step = map.steps[cell.step_row];
    if (cell.channel != channel || step.rank == except_rank) continue;
    if (step.group >= 27 && step.group <= 34) largest = std::max(largest, cell.z());
  }
  return largest;
}

// A slow GPU's peers wait longer in their collectives, but the transfers after the last
// member arrived do not grow; a degraded link's do.
TEST(SimulatedCauseTest, TransfersGrowOnADegradedLinkNotForASlowRanksPeers) {
  const DeviationMap slow_gpu = BuildDeviationMap(OpenSimulated("gpu_throttle:rank=1", 7));
  EXPECT_GT(LargestZ(slow_gpu, Channel::kCollective, 1), 5.0);
  EXPECT_LT(LargestZ(slow_gpu, Channel::kCollectiveTransfer, 1), 5.0);
  const DeviationMap link = BuildDeviationMap(OpenSimulated("link_degradation", 7));
  EXPECT_GT(LargestZ(link, Channel::kCollectiveTransfer, -1), 20.0);
}

// --- Counterfactual replay -------------------------------------------------------

// Every group of a trace replayed with nothing shortened takes the time it measured.
void ExpectIdentityReplay(const model::Trace& trace, const std::string& what) {
  const StepReplay replay(trace, localize::ComputeStepFeatures(trace));
  std::set<int64_t> groups;
  for (uint32_t s = 0; s < trace.steps.size(); ++s) {
    groups.insert(trace.steps.global_step[s] >= 0 ? trace.steps.global_step[s]
                                                  : trace.steps.number[s]);
  }
  ASSERT_FALSE(groups.empty()) << what;
  for (int64_t group : groups) {
    const ReplayedGroup times = replay.Replay(group, [](uint32_t) { return 0.0; });
    EXPECT_GT(times.measured_ns, 0.0) << what << " group " << group;
    EXPECT_NEAR(times.replayed_ns, times.measured_ns, 1.0) << what << " group " << group;
  }
}

TEST(StepReplayTest, ReplayingNothingReproducesEveryStep) {
  ExpectIdentityReplay(OpenSimulated("gpu_throttle:rank=1", 7), "vllm v1 gpu throttle");
  ExpectIdentityReplay(OpenSimulated("sync_latency:rank=0", 7, sim::EngineKind::kSglang),
                       "sglang sync latency");
  const std::string traces = base::RealTracesDir();
  if (traces.empty()) GTEST_SKIP() << "../shared/real-traces is absent";
  for (const char* name :
       {"hta__a100-80gb_16rank_rank0.json.gz", "hta__v100_2rank_allreduce_rank1.json.gz",
        "tracelens__b200_vllm_tp8_rank0_eager.json.gz",
        "nvfuser__h200_cross_entropy_report1.sqlite",
        "tracelens__mi300x_sglang_qwen3-8b_decode_step.json.gz"}) {
    auto opened = store::OpenTrace({traces + "/" + name}, {});
    ASSERT_TRUE(opened.ok()) << opened.status().message();
    if (opened->steps.size() > 0) ExpectIdentityReplay(*opened, name);
  }
}

// A CUDA graph's launch holds collectives among its kernels; its time is the graph's
// launch, not a collective's. Each collective launch call counts once in its step.
TEST(DeviationMapTest, CollectiveLaunchesAreTheirOwnCallsCountedOnce) {
  const model::Trace trace = OpenSimulated("", 7, sim::EngineKind::kSglang);
  const localize::StepFeatures features = localize::ComputeStepFeatures(trace);
  const std::vector<NodeCell> cells = NodeCells(trace, features);
  std::map<uint32_t, double> launch_ns_by_step;
  int64_t graphs_with_collectives = 0;
  for (size_t n = 0; n < trace.nodes.size(); ++n) {
    const model::EventRow event = trace.nodes.event[n];
    const model::NodeIndex parent = trace.nodes.parent[n];
    if (trace.events.layer[event.value()] == model::Layer::kComm && parent.valid()) {
      const model::EventRow call = trace.nodes.event[parent.value()];
      graphs_with_collectives += (trace.events.flags[call.value()] & model::kFlagGraphLaunch) != 0;
    }
    if (cells[n].channel != Channel::kCollectiveLaunch) continue;
    EXPECT_EQ(trace.events.flags[event.value()] & model::kFlagGraphLaunch, 0);
    launch_ns_by_step[trace.nodes.step[n].value()] +=
        static_cast<double>(trace.events.dur_ns[event.value()]);
  }
  ASSERT_GT(graphs_with_collectives, 0) << "the run should replay collectives in CUDA graphs";
  const DeviationMap map = BuildDeviationMap(trace, features, {});
  int64_t checked = 0;
  for (const MapStep& step : map.steps) {
    for (uint32_t c = step.cells_begin; c < step.cells_end; ++c) {
      if (map.cells[c].channel != Channel::kCollectiveLaunch) continue;
      EXPECT_DOUBLE_EQ(map.cells[c].value, launch_ns_by_step[step.step.value()]);
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

// The run's twin (the same steps without the fault) says what the fault cost: the
// step time of the cause's window over the twin's.
struct ReplayedCause {
  Hypothesis summed;    // the cost summed over its culprit cells
  Hypothesis replayed;  // the cost replayed along the steps' critical paths
  double twin_ns = 0.0;
};

ReplayedCause ReplayTopCause(const std::string& fault, sim::EngineKind engine) {
  const model::Trace trace = OpenSimulated(fault, 7, engine);
  const localize::StepFeatures features = localize::ComputeStepFeatures(trace);
  const DeviationMap map = BuildDeviationMap(trace, features, {});
  CauseAnalysis analysis = AnalyzeCauses(map);
  ReplayedCause result;
  if (analysis.ranked.empty()) return result;
  result.summed = analysis.ranked[0];
  ReplayImpacts(trace, features, map, 1, &analysis);
  result.replayed = analysis.ranked[0];
  auto labels = wire::ParseLabels(trace.meta.labels_json, "labels.json");
  EXPECT_TRUE(labels.ok()) << labels.status().message();
  for (const wire::LabelsStep& step : labels->steps) {
    if (step.step >= result.replayed.first_group && step.step <= result.replayed.last_group) {
      result.twin_ns += static_cast<double>(std::max<int64_t>(0, step.delta_ns));
    }
  }
  return result;
}

TEST(StepReplayTest, ASlowGpuCostsWhatItsTwinLostAndArrivesLast) {
  const ReplayedCause c = ReplayTopCause("gpu_throttle:rank=1", sim::EngineKind::kVllmV1Online);
  ASSERT_EQ(c.replayed.kind, CauseKind::kGpuSlow) << CauseSentence(c.replayed);
  EXPECT_TRUE(c.replayed.impact_replayed);
  EXPECT_NEAR(c.replayed.impact_ns, c.twin_ns, 0.3 * c.twin_ns) << CauseSentence(c.replayed);
  // Rank 1 reached the collectives last at least twice as often as a rank would by chance.
  ASSERT_GT(c.replayed.collectives, 0);
  EXPECT_GE(c.replayed.collectives_late, 2.0 * c.replayed.collectives_late_by_chance)
      << CauseSentence(c.replayed);
}

// A synchronization that waits longer holds its host, and the ranks waiting for it.
TEST(StepReplayTest, ALongerSyncCostsWhatItsTwinLost) {
  const ReplayedCause c =
      ReplayTopCause("sync_latency:rank=1,onset=18,duration=18", sim::EngineKind::kTorchFsdp);
  ASSERT_EQ(c.replayed.kind, CauseKind::kSyncLatency) << CauseSentence(c.replayed);
  EXPECT_NEAR(c.replayed.impact_ns, c.twin_ns, 0.3 * c.twin_ns) << CauseSentence(c.replayed);
}

// Slower launches while the GPU is busy delay no kernel: the host runs ahead.
TEST(StepReplayTest, WorkOffTheCriticalPathCostsNothing) {
  const ReplayedCause c = ReplayTopCause("launch_latency:rank=1", sim::EngineKind::kTorchFsdp);
  ASSERT_EQ(c.replayed.kind, CauseKind::kLaunchLatency) << CauseSentence(c.replayed);
  EXPECT_LT(c.replayed.impact_ns, 0.2 * c.summed.impact_ns) << CauseSentence(c.replayed);
  EXPECT_LE(c.replayed.impact_ns, 2.0 * c.twin_ns + 1e5) << CauseSentence(c.replayed);
}

// Several hypotheses replayed together (each group prepared once for all) get the
// figures each gets replayed alone, whatever the thread count.
TEST(StepReplayTest, HypothesesReplayedTogetherGetWhatEachGetsAlone) {
  const model::Trace trace = OpenSimulated("gpu_throttle:rank=1,onset=10,duration=20", 7);
  const localize::StepFeatures features = localize::ComputeStepFeatures(trace);
  const DeviationMap map = BuildDeviationMap(trace, features, {});
  CauseAnalysis together = AnalyzeCauses(map);
  ASSERT_GE(together.ranked.size(), 2u);
  const size_t replayed = std::min<size_t>(3, together.ranked.size());
  CauseAnalysis alone = together;
  CauseOptions two_threads;
  two_threads.threads = 2;
  ReplayImpacts(trace, features, map, replayed, &together, two_threads);
  const StepReplay replay(trace, features);
  for (size_t i = 0; i < replayed; ++i) {
    ReplayImpact(replay, map, &alone.ranked[i]);
    const Hypothesis& a = alone.ranked[i];
    const Hypothesis& t = together.ranked[i];
    EXPECT_TRUE(a.impact_replayed || !t.impact_replayed) << CauseSentence(a);
    EXPECT_EQ(a.impact_ns, t.impact_ns) << CauseSentence(a);
    EXPECT_EQ(a.collectives, t.collectives) << CauseSentence(a);
    EXPECT_EQ(a.collectives_late, t.collectives_late) << CauseSentence(a);
  }
  EXPECT_GT(together.ranked[0].impact_ns, 0.0) << CauseSentence(together.ranked[0]);
}

// --- A CPU job: two tensor-parallel ranks on gloo, no device work ----------------------

using model::Layer;
using reconstruct::testing::TinyTrace;

// Two ranks of a tensor-parallel decode loop on CPU, as tests/data/drill runs it: each
// step a STEP range holding 4 layers, each a BE forward and a hooked all_reduce (COMM) that
// blocks until both ranks have arrived, then ends together on both plus its transfer.
// Durations jitter by 3% (seeded). Rank `stall_rank` sleeps `stall_ns` at the start of
// its steps [stall_first, stall_last] before any work.
struct CpuJob {
  int64_t steps = 40;
  int32_t stall_rank = -1;
  int64_t stall_first = 15, stall_last = 24;
  int64_t stall_ns = 0;
  uint32_t seed = 5;

  model::Trace Build() const {
    TinyTrace t;
    std::mt19937 rng(seed);
    std::normal_distribution<double> noise(0.0, 1.0);
    auto jitter = [&](double ns) { return static_cast<int64_t>(ns * (1.0 + 0.03 * noise(rng))); };
    const model::ThreadIndex threads[2] = {t.HostThread(t.Process(101, "vm", 0), 101),
                                           t.HostThread(t.Process(102, "vm", 1), 102)};
    int64_t step_start = 1'000'000;
    for (int64_t step = 0; step < steps; ++step) {
      int64_t at[2] = {step_start + jitter(50'000), step_start + jitter(50'000)};
      for (int32_t rank = 0; rank < 2; ++rank) {
        if (rank == stall_rank && step >= stall_first && step <= stall_last) at[rank] += stall_ns;
      }
      struct Span {
        int32_t rank;
        Layer layer;
        const char* name;
        int64_t start, dur;
      };
      std::vector<Span> spans;
      for (int layer = 0; layer < 4; ++layer) {
        for (int32_t rank = 0; rank < 2; ++rank) {
          const int64_t forward = jitter(2'000'000);
          spans.push_back({rank, Layer::kBe, "TensorParallelLayer.forward", at[rank], forward});
          at[rank] += forward;
        }
        const int64_t done = std::max(at[0], at[1]) + jitter(60'000);
        for (int32_t rank = 0; rank < 2; ++rank) {
          spans.push_back({rank, Layer::kComm, "all_reduce", at[rank], done - at[rank]});
          at[rank] = done + jitter(30'000);  // the unrecorded tanh
        }
      }
      const int64_t end = std::max(at[0], at[1]) + 20'000;
      const std::string requests = "r" + std::to_string(step);
      for (int32_t rank = 0; rank < 2; ++rank) {
        t.Step(threads[rank], step_start, end - step_start, step, "decode", requests);
      }
      for (const Span& span : spans) {
        t.X(threads[span.rank], span.layer, span.name, span.start, span.dur);
      }
      step_start = end + 100'000;
    }
    EXPECT_TRUE(reconstruct::BuildCallChains(&t.trace).ok());
    return std::move(t.trace);
  }
};

struct CpuCause {
  DeviationMap map;
  CauseAnalysis analysis;
};

CpuCause AnalyzeCpuJob(const model::Trace& trace) {
  const localize::StepFeatures features = localize::ComputeStepFeatures(trace);
  CpuCause result;
  result.map = BuildDeviationMap(trace, features, {});
  result.analysis = AnalyzeCauses(result.map);
  ReplayImpacts(trace, features, result.map, 1, &result.analysis);
  return result;
}

// A host all_reduce of a CPU job blocks until the last rank arrives: cutting the late
// rank's forward moves its peer's call end to the new last arrival plus the transfer, and
// with it the rest of the step on both ranks.
TEST(StepReplayTest, AHostCollectiveEndsAtItsLastArrivalPlusItsTransfer) {
  TinyTrace t;
  const model::ThreadIndex m0 = t.HostThread(t.Process(1, "vm", 0), 1);
  const model::ThreadIndex m1 = t.HostThread(t.Process(2, "vm", 1), 2);
  t.Step(m0, 0, 1'000'000, 3, "decode", "a");
  t.Step(m1, 0, 1'000'000, 3, "decode", "a");
  t.X(m0, Layer::kBe, "forward", 10'000, 100'000);
  t.X(m0, Layer::kComm, "all_reduce", 120'000, 500'000);       // waits for rank 1
  t.X(m0, Layer::kComm, "gloo:all_reduce", 125'000, 490'000);  // nested: waits as well
  t.X(m0, Layer::kBe, "forward", 630'000, 100'000);
  t.X(m0, Layer::kComm, "all_reduce", 740'000, 50'000);
  const model::EventRow slow = t.X(m1, Layer::kBe, "forward", 10'000, 600'000);
  t.X(m1, Layer::kComm, "all_reduce", 610'000, 10'000);  // arrives last: 10 us of transfer
  t.X(m1, Layer::kBe, "forward", 630'000, 100'000);
  t.X(m1, Layer::kComm, "all_reduce", 740'000, 50'000);
  ASSERT_TRUE(reconstruct::BuildCallChains(&t.trace).ok());
  const model::Trace& trace = t.trace;
  ASSERT_EQ(trace.collective_matches.size(), 4u);
  uint32_t slow_node = UINT32_MAX;
  for (uint32_t n = 0; n < trace.nodes.size(); ++n) {
    if (trace.nodes.event[n] == slow) slow_node = n;
  }
  ASSERT_NE(slow_node, UINT32_MAX);
  const StepReplay replay(trace, localize::ComputeStepFeatures(trace));
  const ReplayedGroup same = replay.Replay(3, [](uint32_t) { return 0.0; });
  EXPECT_EQ(same.measured_ns, 1'000'000.0);
  EXPECT_EQ(same.replayed_ns, 1'000'000.0);
  // Rank 1's forward 600 -> 120 us: it arrives at 130 us, and rank 0's call, which waited
  // for it until 620 us, returns at 140 us; both steps end 480 us earlier.
  const ReplayedGroup cut =
      replay.Replay(3, [&](uint32_t node) { return node == slow_node ? 0.8 : 0.0; });
  EXPECT_NEAR(cut.replayed_ns, 1'000'000.0 - 480'000.0, 1.0);
  // Rank 1 reached the first collective last.
  const std::vector<StepReplay::Arrival> arrivals = replay.LastArrivals(3);
  ASSERT_EQ(arrivals.size(), 2u);
  EXPECT_EQ(arrivals[0].ranks.size(), 2u);
  EXPECT_EQ(arrivals[0].last_rank, 1);
}

// Rank 1 sleeps 12 ms at the start of steps 15-24 (steps of about 8.5 ms): idle time
// inside its step, before any work. It reaches every all_reduce of those steps late and
// rank 0 waits in the first: rank 1 is the straggler, by its stall, and the cost is what
// rank 0 waited.
TEST(CpuJobCauseTest, AStallOnOneRankIsThatRanksStragglerWithItsPeersAsVictims) {
  CpuJob job;
  job.stall_rank = 1;
  job.stall_ns = 12'000'000;
  const CpuCause c = AnalyzeCpuJob(job.Build());
  ASSERT_TRUE(c.analysis.degraded);
  const Hypothesis& h = c.analysis.ranked[0];
  EXPECT_EQ(h.kind, CauseKind::kStraggler) << CauseSentence(h);
  EXPECT_TRUE(h.by_stall) << CauseSentence(h);
  EXPECT_TRUE(h.host_only_job);
  EXPECT_EQ(h.rank, 1);
  EXPECT_EQ(h.first_group, 15) << CauseSentence(h);
  EXPECT_EQ(h.last_group, 24) << CauseSentence(h);
  EXPECT_NEAR(h.effect, 12e6, 1e6) << CauseSentence(h);
  EXPECT_EQ(h.victims, std::vector<int32_t>{0}) << CauseSentence(h);
  EXPECT_NEAR(h.victim_wait_ns / static_cast<double>(h.steps), 12e6, 1.5e6) << CauseSentence(h);
  // Replayed: the stall put back to its baseline saves what rank 0 waited, on the steps'
  // critical path.
  EXPECT_TRUE(h.impact_replayed);
  EXPECT_FALSE(h.cost_negligible);
  EXPECT_NEAR(h.impact_ns / static_cast<double>(h.steps), 12e6, 0.5e6) << CauseSentence(h);
  // It reached the first collective of each of those steps last; after it the ranks are
  // in step again.
  EXPECT_GE(h.collectives_late, h.steps) << CauseSentence(h);
}

// The same job without a fault: nothing stands above noise.
TEST(CpuJobCauseTest, AFaultFreeTwoRankCpuJobIsHealthy) {
  for (uint32_t seed : {5u, 6u, 7u}) {
    CpuJob job;
    job.seed = seed;
    const CpuCause c = AnalyzeCpuJob(job.Build());
    EXPECT_FALSE(c.analysis.degraded)
        << "seed " << seed << ": " << CauseSentence(c.analysis.ranked[0]);
    EXPECT_FALSE(c.map.device_work);
    EXPECT_GT(c.map.steps.size(), 60u);
  }
}

}  // namespace
}  // namespace teller::cause
