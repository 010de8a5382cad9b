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

}  // namespace
}  // namespace teller::cause
