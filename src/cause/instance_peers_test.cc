#include "cause/instance_peers.h"

#include <gtest/gtest.h>

#include "base/testing.h"
#include "cause/cause_text.h"
#include "cause/instance_peers_testing.h"
#include "localize/step_features.h"
#include "sim/simulated_trace_testing.h"

namespace teller::cause {
namespace {

using localize::OperatorFamily;

InstancePeerResult Compare(const model::Trace& trace) {
  return CompareInstancePeers(trace, localize::ComputeStepFeatures(trace));
}

TEST(InstancePeersTest, AFaultFreeSimulatedRunHasNoSlowCalls) {
  const model::Trace trace = sim::SimulatedTrace(
      sim::SmallConfig(sim::EngineKind::kVllmV1Online, 16, 6), "", "peers_fault_free");
  const InstancePeerResult result = Compare(trace);
  EXPECT_TRUE(result.check.ran());
  EXPECT_TRUE(result.check.can_tell());
  EXPECT_FALSE(result.cause.has_value()) << CauseSentence(*result.cause);
  EXPECT_LT(result.check.worst_excess_share, kMaterialExcessShare);
}

TEST(InstancePeersTest, ARealDecodeStepIsTold) {
  if (base::RealTracesDir().empty()) GTEST_SKIP() << "../shared/real-traces is absent";
  const model::Trace trace = OpenRealTrace(kDecodeStep);
  const InstancePeerResult result = Compare(trace);
  EXPECT_TRUE(result.check.can_tell()) << result.check.worst_covered_share;
  EXPECT_FALSE(result.cause.has_value()) << CauseSentence(*result.cause);
  EXPECT_LT(result.check.worst_excess_share, 0.02);
}

// The step's largest family 1.6x slower over its last 40%: the calls before are the
// baseline, and the family on rank 0 is named with about the effect put in.
TEST(InstancePeersTest, AFamilySlowFromMidStepIsNamed) {
  if (base::RealTracesDir().empty()) GTEST_SKIP() << "../shared/real-traces is absent";
  model::Trace trace = OpenRealTrace(kDecodeStep);
  const OperatorFamily family = LargestFamily(trace);
  SlowKernels(&trace, family, 0.4, 1.6);
  const InstancePeerResult result = Compare(trace);
  ASSERT_TRUE(result.cause.has_value());
  const Hypothesis& h = *result.cause;
  EXPECT_EQ(h.kind, CauseKind::kFamilySlow) << CauseSentence(h);
  EXPECT_EQ(h.family, family) << CauseSentence(h);
  EXPECT_EQ(h.rank, 0);
  EXPECT_TRUE(h.by_instance_peers);
  EXPECT_NEAR(h.effect, 0.6, 0.1) << CauseSentence(h);
  EXPECT_GT(h.peer_calls_slow, 0);
  EXPECT_LT(h.peer_calls_slow, h.peer_calls);
}

// Every compute kernel 1.4x slower over the step's last 40%: the GPU, not one family.
TEST(InstancePeersTest, AGpuSlowFromMidStepIsNamed) {
  if (base::RealTracesDir().empty()) GTEST_SKIP() << "../shared/real-traces is absent";
  model::Trace trace = OpenRealTrace(kDecodeStep);
  SlowKernels(&trace, OperatorFamily::kUnnamed, 0.4, 1.4);
  const InstancePeerResult result = Compare(trace);
  ASSERT_TRUE(result.cause.has_value())
      << result.check.worst_excess_share << " " << result.check.calls_slow << " "
      << result.check.calls_compared << " " << result.check.excess_ns << " "
      << result.check.compute_ns;
  EXPECT_EQ(result.cause->kind, CauseKind::kGpuSlow) << CauseSentence(*result.cause);
  EXPECT_NEAR(result.cause->effect, 0.4, 0.1);
}

// The limit, stated: every call slowed alike leaves no call slower than its peers.
TEST(InstancePeersTest, EveryCallSlowedAlikeCannotBeSeen) {
  if (base::RealTracesDir().empty()) GTEST_SKIP() << "../shared/real-traces is absent";
  model::Trace trace = OpenRealTrace(kDecodeStep);
  SlowKernels(&trace, OperatorFamily::kUnnamed, 1.0, 1.5);
  const InstancePeerResult result = Compare(trace);
  EXPECT_TRUE(result.check.can_tell());
  EXPECT_FALSE(result.cause.has_value()) << CauseSentence(*result.cause);
}

// A slowdown too small to matter (the largest family's calls in the step's last 3%) is
// not a cause, though its calls are slow.
TEST(InstancePeersTest, ASmallExcessIsNotACause) {
  if (base::RealTracesDir().empty()) GTEST_SKIP() << "../shared/real-traces is absent";
  model::Trace trace = OpenRealTrace(kDecodeStep);
  SlowKernels(&trace, LargestFamily(trace), 0.03, 1.6);
  const InstancePeerResult result = Compare(trace);
  EXPECT_FALSE(result.cause.has_value()) << CauseSentence(*result.cause);
  EXPECT_GT(result.check.calls_slow, 0);
}

// A real 3-step training capture (ResNet-like: one kernel at several layer sizes) without
// its launch shapes, as a format that does not record grid and block gives it: the calls of
// one kernel at one place are no longer told apart by shape, and the larger layers' calls
// read 2.95x their step's peers (the capture was named a slow GPU). Each is as slow in
// the other steps, so it is its layer, not a slowdown; calls slower than their places in
// the other steps are still seen.
TEST(InstancePeersTest, WithoutLaunchShapesACallAsSlowInEveryStepIsItsLayer) {
  if (base::RealTracesDir().empty()) GTEST_SKIP() << "../shared/real-traces is absent";
  model::Trace trace = OpenRealTrace("hta__a100_2rank_nccl_rank0.json.gz");
  int64_t stripped = 0;
  for (size_t a = 0; a < trace.args.size(); ++a) {
    if (!trace.str(trace.args.key[a]).starts_with("grid")) continue;
    trace.args.key[a] = base::StringPool::kEmpty;
    ++stripped;
  }
  ASSERT_GT(stripped, 0);
  const InstancePeerResult healthy = Compare(trace);
  EXPECT_TRUE(healthy.check.can_tell()) << healthy.check.worst_covered_share;
  EXPECT_FALSE(healthy.cause.has_value()) << CauseSentence(*healthy.cause);

  // The last step's kernels 3x slower from its last third on: its calls against the same
  // places' in the steps before.
  SlowKernels(&trace, OperatorFamily::kUnnamed, 0.1, 3.0);
  const InstancePeerResult slowed = Compare(trace);
  ASSERT_TRUE(slowed.cause.has_value());
  EXPECT_EQ(slowed.cause->rank, 0) << CauseSentence(*slowed.cause);
}

// The same capture with its shapes: most of its kernels (a convolution per layer size) are
// called a few times a step, too few to be peers within it, so 6% of its kernel time was
// compared and the capture was undetermined. Each call is compared with its place in the
// other steps: the capture is told healthy, and its last step on a GPU 1.3x slower is
// named.
TEST(InstancePeersTest, AKernelCalledAFewTimesAStepIsComparedWithItsPlaceInTheOtherSteps) {
  if (base::RealTracesDir().empty()) GTEST_SKIP() << "../shared/real-traces is absent";
  model::Trace trace = OpenRealTrace("hta__a100_2rank_nccl_rank0.json.gz");
  const InstancePeerResult healthy = Compare(trace);
  EXPECT_TRUE(healthy.check.can_tell()) << healthy.check.worst_covered_share;
  EXPECT_GT(healthy.check.covered_share(), 0.5);
  EXPECT_FALSE(healthy.cause.has_value()) << CauseSentence(*healthy.cause);

  SlowKernels(&trace, OperatorFamily::kUnnamed, 0.3, 1.3);
  const InstancePeerResult slowed = Compare(trace);
  ASSERT_TRUE(slowed.cause.has_value()) << slowed.check.worst_excess_share;
  EXPECT_EQ(slowed.cause->kind, CauseKind::kGpuSlow) << CauseSentence(*slowed.cause);
  EXPECT_EQ(slowed.cause->rank, 0);
}

// A 2-step capture of one rank of a 128-rank training job: its kernels run once or twice a
// step, so a place holds two or four calls, too few for a spread of its own; they take the
// spread of every such call of the rank. The capture is told healthy (it compared none of
// its calls), and its second step on a GPU 1.3x slower is named.
TEST(InstancePeersTest, APlaceOfFewCallsTakesItsRanksSpread) {
  if (base::RealTracesDir().empty()) GTEST_SKIP() << "../shared/real-traces is absent";
  model::Trace trace = OpenRealTrace("hta__sampled_128rank_rank0.json.gz");
  const InstancePeerResult healthy = Compare(trace);
  EXPECT_TRUE(healthy.check.can_tell()) << healthy.check.worst_covered_share;
  EXPECT_FALSE(healthy.cause.has_value()) << CauseSentence(*healthy.cause);

  SlowKernels(&trace, OperatorFamily::kUnnamed, 0.45, 1.3);
  const InstancePeerResult slowed = Compare(trace);
  ASSERT_TRUE(slowed.cause.has_value()) << slowed.check.worst_excess_share;
  EXPECT_EQ(slowed.cause->kind, CauseKind::kGpuSlow) << CauseSentence(*slowed.cause);
}

}  // namespace
}  // namespace teller::cause
