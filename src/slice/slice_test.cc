#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <string>

#include "base/testing.h"
#include "model/classify.h"
#include "reconstruct/call_chain_builder.h"
#include "reconstruct/test_trace.h"
#include "sim/fault_spec.h"
#include "sim/simulator.h"
#include "slice/causal_slice.h"
#include "store/open_trace.h"

namespace teller::slice {
namespace {

using model::Layer;
using model::NodeIndex;
using model::StepIndex;
using reconstruct::testing::TinyTrace;

// Two ranks on one host, one step each, times in ns:
//   rank 0, main thread                      rank 0, stream 7
//   step [0, 1'000'000)
//     FE model [1'000, 900'000)
//       BE op_a [2'000, 20'000)
//         RT launch a [3'000, 8'000)  ------> K gemm_a [10'000, 50'000)
//       BE op_b [21'000, 40'000)
//         RT launch b [22'000, 26'000) -----> K gemm_b [50'500, 90'000)
//       COMM c10d::allreduce_ [41'000, 60'000)   (host record, collective tp/0)
//         RT launch c [42'000, 46'000) -----> COMM ncclDevKernel_AllReduce [90'200, 120'000)
//       BE op_post [61'000, 70'000)
//         RT launch d [62'000, 66'000) -----> K post [400'000, 420'000)
//       BE op_far [700'000, 720'000)
//         RT launch e [701'000, 705'000) ---> K far [800'000, 850'000)
// Rank 1: a step with its own launch and all-reduce kernel (collective tp/0).
struct HandTrace {
  TinyTrace t;
  // Node of each named event of rank 0, and of rank 1's all-reduce kernel.
  std::map<std::string, NodeIndex> node;
  StepIndex step0, step1;
};

void BuildHandTrace(HandTrace* h) {
  TinyTrace& t = h->t;
  auto p0 = t.Process(1, "h", 0);
  auto p1 = t.Process(2, "h", 1);
  auto m0 = t.HostThread(p0, 11), m1 = t.HostThread(p1, 21);
  auto s0 = t.Stream(p0, 7), s1 = t.Stream(p1, 7);
  t.Step(m0, 0, 1'000'000, 1, "decode", "r1");
  t.X(m0, Layer::kFe, "model", 1'000, 899'000);
  t.X(m0, Layer::kBe, "op_a", 2'000, 18'000);
  t.X(m0, Layer::kRt, "launch_a", 3'000, 5'000, 1);
  t.X(s0, Layer::kK, "gemm_a", 10'000, 40'000, 1);
  t.X(m0, Layer::kBe, "op_b", 21'000, 19'000);
  t.X(m0, Layer::kRt, "launch_b", 22'000, 4'000, 2);
  t.X(s0, Layer::kK, "gemm_b", 50'500, 39'500, 2);
  auto host_comm = t.X(m0, Layer::kComm, "c10d::allreduce_", 41'000, 19'000);
  t.Collective(host_comm, "tp", 0, "all_reduce");
  t.X(m0, Layer::kRt, "launch_c", 42'000, 4'000, 3);
  auto k0 = t.X(s0, Layer::kComm, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 90'200, 29'800, 3);
  t.Collective(k0, "tp", 0, "all_reduce");
  t.X(m0, Layer::kBe, "op_post", 61'000, 9'000);
  t.X(m0, Layer::kRt, "launch_d", 62'000, 4'000, 4);
  t.X(s0, Layer::kK, "post", 400'000, 20'000, 4);
  t.X(m0, Layer::kBe, "op_far", 700'000, 20'000);
  t.X(m0, Layer::kRt, "launch_e", 701'000, 4'000, 5);
  t.X(s0, Layer::kK, "far", 800'000, 50'000, 5);
  // Rank 1.
  t.Step(m1, 0, 1'000'000, 1, "decode", "r1");
  t.X(m1, Layer::kRt, "launch_c1", 42'000, 4'000, 3);
  auto k1 = t.X(s1, Layer::kComm, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 90'300, 29'700, 3);
  t.Collective(k1, "tp", 0, "all_reduce");
  ASSERT_TRUE(reconstruct::BuildCallChains(&t.trace).ok());
  ASSERT_EQ(t.trace.steps.size(), 2u);
  ASSERT_EQ(t.trace.collective_matches.size(), 3u);
  const model::Trace& tr = t.trace;
  for (uint32_t s = 0; s < 2; ++s) {
    for (uint32_t n = tr.steps.node_begin[s].value(); n < tr.steps.node_end[s].value(); ++n) {
      std::string name(tr.str(tr.events.name[tr.nodes.event[n].value()]));
      if (s == 1) name += "@1";
      h->node[name] = NodeIndex(n);
    }
  }
  h->step0 = tr.nodes.step[h->node.at("step").value()];
  h->step1 = tr.nodes.step[h->node.at("step@1").value()];
  ASSERT_EQ(h->node.size(), 20u) << reconstruct::testing::DumpStep(tr, h->step0.value());
}

bool Has(const StepSlice& s, NodeIndex n) {
  return std::binary_search(s.nodes.begin(), s.nodes.end(), n);
}

uint8_t ReasonsOf(const StepSlice& s, NodeIndex n) {
  auto it = std::lower_bound(s.nodes.begin(), s.nodes.end(), n);
  return it != s.nodes.end() && *it == n ? s.reasons[it - s.nodes.begin()] : 0;
}

int32_t IndexOf(const StepSlice& s, NodeIndex n) {
  auto it = std::lower_bound(s.nodes.begin(), s.nodes.end(), n);
  return it != s.nodes.end() && *it == n ? static_cast<int32_t>(it - s.nodes.begin()) : -1;
}

StepSlice Slice(const model::Trace& trace, StepIndex step, std::vector<NodeIndex> suspects,
                const SliceOptions& options = {}, std::vector<NodeIndex> scope = {}) {
  auto result = SliceStep(trace, step, suspects, scope, options);
  EXPECT_TRUE(result.ok()) << result.status().message();
  return result.ok() ? std::move(result).value() : StepSlice{};
}

TEST(SliceStepTest, KeepsSuspectParentChildAndNearNeighboursAndDropsFarNodes) {
  HandTrace h;
  BuildHandTrace(&h);
  const auto& n = h.node;
  const StepSlice s = Slice(h.t.trace, h.step0, {n.at("gemm_b")});
  EXPECT_EQ(s.step_nodes, 17);
  EXPECT_EQ(s.step_dur_ns, 1'000'000);
  // Suspect, its launch (parent), the kernels next to it on the stream (gaps 500 and
  // 200 ns), the all-reduce it feeds (E_c) and the host record of that all-reduce.
  EXPECT_EQ(ReasonsOf(s, n.at("gemm_b")) & kReasonSuspect, kReasonSuspect);
  EXPECT_EQ(ReasonsOf(s, n.at("launch_b")), kReasonStructural | kReasonAncestor);
  EXPECT_EQ(ReasonsOf(s, n.at("gemm_a")), kReasonTemporal);
  EXPECT_EQ(ReasonsOf(s, n.at("ncclDevKernel_AllReduce_Sum_bf16_RING_LL")),
            kReasonTemporal | kReasonComm);
  EXPECT_EQ(ReasonsOf(s, n.at("c10d::allreduce_")), kReasonComm);
  // Ancestors up to h = 3: launch_b, op_b, model; not the step root.
  EXPECT_TRUE(Has(s, n.at("op_b")));
  EXPECT_TRUE(Has(s, n.at("model")));
  EXPECT_FALSE(Has(s, n.at("step")));
  // Far in time, other lanes, or not coupled: dropped.
  for (const char* name :
       {"post", "far", "launch_a", "op_a", "launch_c", "op_post", "op_far", "launch_e"}) {
    EXPECT_FALSE(Has(s, n.at(name))) << name;
  }
  EXPECT_EQ(s.nodes.size(), 7u);
  // Relevance: alpha for the suspect (+ gamma for the near kernels on both sides).
  EXPECT_NEAR(s.relevance[IndexOf(s, n.at("launch_b"))], 0.6, 1e-6);
  EXPECT_NEAR(s.relevance[IndexOf(s, n.at("gemm_a"))], std::exp(-500.0 / 50'000), 1e-6);
  EXPECT_NEAR(s.relevance[IndexOf(s, n.at("ncclDevKernel_AllReduce_Sum_bf16_RING_LL"))],
              std::exp(-200.0 / 50'000) + 0.6, 1e-6);
  EXPECT_TRUE(s.peer_nodes.empty());  // horizontal is off
}

TEST(SliceStepTest, EdgesConnectKeptNodesOnly) {
  HandTrace h;
  BuildHandTrace(&h);
  const auto& n = h.node;
  const StepSlice s = Slice(h.t.trace, h.step0, {n.at("gemm_b")});
  using Edge = std::pair<int32_t, int32_t>;
  auto has = [](const std::vector<Edge>& edges, int32_t a, int32_t b) {
    return std::find(edges.begin(), edges.end(), Edge{a, b}) != edges.end();
  };
  const int32_t model = IndexOf(s, n.at("model")), op_b = IndexOf(s, n.at("op_b")),
                launch_b = IndexOf(s, n.at("launch_b")), gemm_a = IndexOf(s, n.at("gemm_a")),
                gemm_b = IndexOf(s, n.at("gemm_b")),
                ar = IndexOf(s, n.at("ncclDevKernel_AllReduce_Sum_bf16_RING_LL")),
                host_ar = IndexOf(s, n.at("c10d::allreduce_"));
  EXPECT_TRUE(has(s.edges.parent_child, model, op_b));
  EXPECT_TRUE(has(s.edges.parent_child, op_b, launch_b));
  EXPECT_TRUE(has(s.edges.parent_child, launch_b, gemm_b));
  EXPECT_TRUE(has(s.edges.parent_child, model, host_ar));
  EXPECT_EQ(s.edges.parent_child.size(), 4u);
  // Succession on the stream, and on the host thread op_b -> c10d::allreduce_.
  EXPECT_TRUE(has(s.edges.temporal, gemm_a, gemm_b));
  EXPECT_TRUE(has(s.edges.temporal, gemm_b, ar));
  EXPECT_TRUE(has(s.edges.temporal, op_b, host_ar));
  EXPECT_TRUE(has(s.edges.temporal, launch_b, host_ar));  // nothing else in between
  EXPECT_EQ(s.edges.temporal.size(), 4u);
  // Region of the all-reduce: gemm_a and gemm_b feed it (device kernel and host record).
  ASSERT_LT(host_ar, ar);  // pre-order: the host record is the kernel's ancestor
  EXPECT_EQ(s.edges.comm,
            (std::vector<Edge>{{gemm_a, host_ar}, {gemm_a, ar}, {gemm_b, host_ar}, {gemm_b, ar}}));
  for (const auto& [a, b] : s.edges.parent_child) {
    EXPECT_EQ(h.t.trace.nodes.parent[s.nodes[b].value()], s.nodes[a]);
  }
}

TEST(SliceStepTest, AncestorsUpToDepthAndNotBeyond) {
  HandTrace h;
  BuildHandTrace(&h);
  const auto& n = h.node;
  // far: launch_e (1), op_far (2), model (3), step (4); none has relevance of its own
  // except the launch (parent).
  const std::vector<const char*> chain = {"launch_e", "op_far", "model", "step"};
  for (int depth = 0; depth <= 5; ++depth) {
    SliceOptions options;
    options.ancestor_depth = depth;
    const StepSlice s = Slice(h.t.trace, h.step0, {n.at("far")}, options);
    for (int level = 1; level <= 4; ++level) {
      const NodeIndex a = n.at(chain[level - 1]);
      const bool expect = level <= depth || level == 1;  // the parent passes by beta
      EXPECT_EQ(Has(s, a), expect) << "depth " << depth << " level " << level;
      EXPECT_EQ((ReasonsOf(s, a) & kReasonAncestor) != 0, level <= depth)
          << "depth " << depth << " level " << level;
    }
    EXPECT_EQ(s.nodes.size(), 2u + std::max(0, std::min(depth, 4) - 1));
  }
}

TEST(SliceStepTest, CommunicationSuspectCouplesItsRegionAndFindsPeers) {
  HandTrace h;
  BuildHandTrace(&h);
  const auto& n = h.node;
  SliceOptions options;
  options.horizontal = true;
  const NodeIndex ar = n.at("ncclDevKernel_AllReduce_Sum_bf16_RING_LL");
  const StepSlice s = Slice(h.t.trace, h.step0, {ar}, options);
  // gemm_a is 40 us away (temporal alone 0.45 < kappa) but feeds the all-reduce.
  EXPECT_EQ(ReasonsOf(s, n.at("gemm_a")), kReasonComm);
  EXPECT_TRUE(ReasonsOf(s, n.at("gemm_b")) & kReasonComm);
  EXPECT_FALSE(Has(s, n.at("post")));  // after the collective: another region
  // The host record is the all-reduce's ancestor, not its E_c partner.
  EXPECT_EQ(ReasonsOf(s, n.at("c10d::allreduce_")), kReasonAncestor);
  // Peers: rank 1's kernel; not rank 0's own host record.
  EXPECT_EQ(s.peer_nodes,
            (std::vector<NodeIndex>{n.at("ncclDevKernel_AllReduce_Sum_bf16_RING_LL@1")}));
  // A compute suspect reaches the same peers through E_c.
  const StepSlice c = Slice(h.t.trace, h.step0, {n.at("gemm_a")}, options);
  EXPECT_EQ(c.peer_nodes, s.peer_nodes);
  // Without the horizontal view: none.
  options.horizontal = false;
  EXPECT_TRUE(Slice(h.t.trace, h.step0, {ar}, options).peer_nodes.empty());
  // A suspect with no collective in reach: none.
  options.horizontal = true;
  EXPECT_TRUE(Slice(h.t.trace, h.step0, {n.at("far")}, options).peer_nodes.empty());
}

TEST(SliceStepTest, RegionCapLimitsCoupling) {
  HandTrace h;
  BuildHandTrace(&h);
  const auto& n = h.node;
  SliceOptions options;
  options.comm_region_nodes = 1;  // only gemm_b, right before the all-reduce
  const StepSlice s =
      Slice(h.t.trace, h.step0, {n.at("ncclDevKernel_AllReduce_Sum_bf16_RING_LL")}, options);
  EXPECT_FALSE(Has(s, n.at("gemm_a")));
  EXPECT_TRUE(ReasonsOf(s, n.at("gemm_b")) & kReasonComm);
}

TEST(SliceStepTest, KappaZeroKeepsEverythingAndScopeLimitsIt) {
  HandTrace h;
  BuildHandTrace(&h);
  const auto& n = h.node;
  SliceOptions options;
  options.kappa = 0;
  const StepSlice all = Slice(h.t.trace, h.step0, {n.at("gemm_b")}, options);
  EXPECT_EQ(all.nodes.size(), 17u);
  EXPECT_DOUBLE_EQ(all.KeptShare(), 1.0);
  // Scope without gemm_a and the far branch: those stay out even at kappa 0.
  std::vector<NodeIndex> scope;
  for (const auto& [name, node] : n) {
    if (name.find('@') != std::string::npos || name == "gemm_a" || name == "far") continue;
    scope.push_back(node);
  }
  const StepSlice scoped = Slice(h.t.trace, h.step0, {n.at("gemm_b")}, options, scope);
  EXPECT_EQ(scoped.step_nodes, 15);
  EXPECT_EQ(scoped.nodes.size(), 15u);
  EXPECT_FALSE(Has(scoped, n.at("gemm_a")));
  // With the default kappa, the out-of-scope neighbour is not kept.
  EXPECT_FALSE(Has(Slice(h.t.trace, h.step0, {n.at("gemm_b")}, {}, scope), n.at("gemm_a")));
}

TEST(SliceStepTest, SuspectOutsideTheScopeIsStillKept) {
  HandTrace h;
  BuildHandTrace(&h);
  const auto& n = h.node;
  std::vector<NodeIndex> scope;
  for (const char* name : {"step", "model", "op_b", "launch_b"}) scope.push_back(n.at(name));
  const StepSlice s = Slice(h.t.trace, h.step0, {n.at("gemm_b")}, {}, scope);
  EXPECT_EQ(s.step_nodes, 5);  // the scope plus the suspect
  EXPECT_EQ(s.nodes, (std::vector<NodeIndex>{n.at("model"), n.at("op_b"), n.at("launch_b"),
                                             n.at("gemm_b")}));
}

TEST(SliceStepTest, TemporalWindowBoundsTheTemporalTerm) {
  HandTrace h;
  BuildHandTrace(&h);
  const auto& n = h.node;
  SliceOptions options;
  options.tau0_ns = int64_t{1} << 50;  // no decay: only the window decides
  const StepSlice wide = Slice(h.t.trace, h.step0, {n.at("gemm_b")}, options);
  EXPECT_TRUE(ReasonsOf(wide, n.at("post")) & kReasonTemporal);  // 310 us after gemm_b
  EXPECT_TRUE(ReasonsOf(wide, n.at("far")) & kReasonTemporal);   // 710 us after
  // Nothing on another lane (launch_a ends 42 us before gemm_b starts, on the host).
  EXPECT_FALSE(Has(wide, n.at("launch_a")));
  options.temporal_window_ns = 400'000;
  const StepSlice narrow = Slice(h.t.trace, h.step0, {n.at("gemm_b")}, options);
  EXPECT_TRUE(Has(narrow, n.at("post")));
  EXPECT_FALSE(Has(narrow, n.at("far")));
}

TEST(SliceStepTest, BadSuspectsAndScopesAreErrors) {
  HandTrace h;
  BuildHandTrace(&h);
  const auto& n = h.node;
  auto bad = SliceStep(h.t.trace, h.step0, {n.at("gemm_b"), n.at("launch_c1@1")}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), base::StatusCode::kInvalidArgument);
  const std::string node_text = std::to_string(n.at("launch_c1@1").value());
  EXPECT_NE(bad.status().message().find("suspect node " + node_text), std::string::npos)
      << bad.status().message();
  EXPECT_NE(bad.status().message().find("step " + std::to_string(h.step0.value())),
            std::string::npos);
  EXPECT_FALSE(SliceStep(h.t.trace, h.step0, {NodeIndex::Invalid()}, {}).ok());
  EXPECT_FALSE(SliceStep(h.t.trace, h.step0, {n.at("gemm_b")}, {n.at("step@1")}).ok());
  EXPECT_FALSE(SliceStep(h.t.trace, StepIndex(7), {}, {}).ok());
}

TEST(SliceStepTest, ParentClosureAddsMissingAncestors) {
  HandTrace h;
  BuildHandTrace(&h);
  const auto& n = h.node;
  SliceOptions options;
  options.ancestor_depth = 1;
  const StepSlice s = Slice(h.t.trace, h.step0, {n.at("far")}, options);
  EXPECT_EQ(s.nodes, (std::vector<NodeIndex>{n.at("launch_e"), n.at("far")}));
  EXPECT_EQ(ParentClosure(h.t.trace, s),
            (std::vector<NodeIndex>{n.at("step"), n.at("model"), n.at("op_far"), n.at("launch_e"),
                                    n.at("far")}));
}

// --- Simulated bundle -------------------------------------------------------

const model::Trace& Simulated() {
  static const model::Trace trace = [] {
    sim::SimConfig config = sim::DefaultConfig(sim::EngineKind::kVllmV1Online);
    config.model.layers = 4;
    config.workload.num_requests = 6;
    config.seed = 7;
    auto faults = sim::ParseFaults("gpu_throttle:rank=1");
    EXPECT_TRUE(faults.ok());
    config.faults = faults.value();
    const std::string dir = base::TempDir("slice_sim") + "/run.teller";
    auto summary = sim::RunSimulation(config, dir);
    EXPECT_TRUE(summary.ok()) << summary.status().message();
    auto opened = store::OpenTrace({dir}, {});
    EXPECT_TRUE(opened.ok()) << opened.status().message();
    return std::move(opened).value();
  }();
  return trace;
}

std::string_view NameOf(const model::Trace& t, NodeIndex n) {
  return t.str(t.events.name[t.nodes.event[n.value()].value()]);
}

// Nodes of a step whose name contains `part`.
std::vector<NodeIndex> NodesNamed(const model::Trace& t, StepIndex s, std::string_view part) {
  std::vector<NodeIndex> out;
  for (uint32_t n = t.steps.node_begin[s.value()].value(); n < t.steps.node_end[s.value()].value();
       ++n) {
    if (NameOf(t, NodeIndex(n)).find(part) != std::string_view::npos) out.push_back(NodeIndex(n));
  }
  return out;
}

// The largest step of rank 1 (the throttled rank).
StepIndex BigStep(const model::Trace& t, int32_t rank) {
  StepIndex best;
  int64_t best_nodes = -1;
  for (uint32_t s = 0; s < t.steps.size(); ++s) {
    if (t.steps.rank[s] != rank) continue;
    const int64_t nodes = t.steps.node_end[s].value() - t.steps.node_begin[s].value();
    if (nodes > best_nodes) best_nodes = nodes, best = StepIndex(s);
  }
  return best;
}

TEST(SimulatedSliceTest, TypicalSuspectsGiveASliceMuchSmallerThanTheStep) {
  const model::Trace& t = Simulated();
  ASSERT_GT(t.steps.size(), 0u);
  const StepIndex s = BigStep(t, 1);
  ASSERT_TRUE(s.valid());
  // The attention kernels of the step (one per layer of the rank's pipeline stage), as
  // localization would flag them.
  const std::vector<NodeIndex> suspects = NodesNamed(t, s, "flash_fwd");
  ASSERT_GE(suspects.size(), 2u);
  const StepSlice slice = Slice(t, s, suspects);
  const SliceSize size = MeasureSlice(t, slice);
  std::printf("simulated step %u (rank 1): %s\n", s.value(), FormatSliceSize(size).c_str());
  EXPECT_EQ(size.suspects, static_cast<int64_t>(suspects.size()));
  EXPECT_LT(slice.nodes.size(), size_t(slice.step_nodes) / 4);
  EXPECT_GT(slice.nodes.size(), suspects.size());
  for (NodeIndex u : suspects) EXPECT_TRUE(Has(slice, u));
  // Parents (the launches) are in.
  for (NodeIndex u : suspects) EXPECT_TRUE(Has(slice, t.nodes.parent[u.value()]));
}

TEST(SimulatedSliceTest, CollectiveSuspectFindsPeersOnOtherRanks) {
  const model::Trace& t = Simulated();
  const StepIndex s = BigStep(t, 1);
  const std::vector<NodeIndex> collectives = NodesNamed(t, s, "AllReduce");
  ASSERT_FALSE(collectives.empty());
  SliceOptions options;
  options.horizontal = true;
  const StepSlice slice = Slice(t, s, {collectives[collectives.size() / 2]}, options);
  ASSERT_FALSE(slice.peer_nodes.empty());
  std::set<int32_t> ranks;
  for (NodeIndex p : slice.peer_nodes) {
    const StepIndex ps = t.nodes.step[p.value()];
    EXPECT_NE(t.steps.rank[ps.value()], 1);
    ranks.insert(t.steps.rank[ps.value()]);
    EXPECT_EQ(t.events.layer[t.nodes.event[p.value()].value()], Layer::kComm);
    EXPECT_NE(NameOf(t, p).find("AllReduce"), std::string_view::npos);
  }
  std::printf("collective suspect: %zu peers on %zu other ranks\n", slice.peer_nodes.size(),
              ranks.size());
  // The compute that fed it is coupled.
  size_t coupled = 0;
  for (uint8_t r : slice.reasons) coupled += (r & kReasonComm) != 0;
  EXPECT_GT(coupled, 0u);
}

// Random suspect sets over several steps: invariants, and kappa only ever shrinks.
TEST(SimulatedSliceTest, InvariantsAndMonotoneInKappa) {
  const model::Trace& t = Simulated();
  std::mt19937_64 rng(3);
  Slicer slicer(t);
  for (uint32_t s = 0; s < t.steps.size(); s += std::max<uint32_t>(1, t.steps.size() / 12)) {
    const uint32_t begin = t.steps.node_begin[s].value(), end = t.steps.node_end[s].value();
    std::uniform_int_distribution<uint32_t> pick(begin, end - 1);
    std::vector<NodeIndex> suspects;
    for (int k = 0; k < 5; ++k) suspects.push_back(NodeIndex(pick(rng)));
    std::vector<NodeIndex> previous;
    for (double kappa : {0.0, 0.2, 0.5, 0.7, 1.0, 1.5}) {
      SliceOptions options;
      options.kappa = kappa;
      options.horizontal = true;
      auto result = slicer.SliceStep(StepIndex(s), suspects, {}, options);
      ASSERT_TRUE(result.ok()) << result.status().message();
      const StepSlice& slice = *result;
      if (kappa == 0.0) {
        EXPECT_EQ(int64_t(slice.nodes.size()), int64_t(end - begin));
      }
      if (!previous.empty()) {
        EXPECT_TRUE(
            std::includes(previous.begin(), previous.end(), slice.nodes.begin(), slice.nodes.end()))
            << "kappa " << kappa << " step " << s;
      }
      previous = slice.nodes;
      // Invariants.
      ASSERT_EQ(slice.relevance.size(), slice.nodes.size());
      ASSERT_EQ(slice.reasons.size(), slice.nodes.size());
      EXPECT_TRUE(std::is_sorted(slice.nodes.begin(), slice.nodes.end()));
      EXPECT_EQ(std::adjacent_find(slice.nodes.begin(), slice.nodes.end()), slice.nodes.end());
      for (NodeIndex u : suspects) EXPECT_TRUE(Has(slice, u));
      for (size_t k = 0; k < slice.nodes.size(); ++k) {
        EXPECT_GE(slice.nodes[k].value(), begin);
        EXPECT_LT(slice.nodes[k].value(), end);
        if (!(slice.reasons[k] & (kReasonSuspect | kReasonAncestor))) {
          EXPECT_GE(slice.relevance[k] + 1e-6, kappa);
        }
      }
      const int32_t size = static_cast<int32_t>(slice.nodes.size());
      for (const auto& [a, b] : slice.edges.temporal) {
        ASSERT_TRUE(a >= 0 && a < size && b >= 0 && b < size);
        const auto ea = t.nodes.event[slice.nodes[a].value()].value();
        const auto eb = t.nodes.event[slice.nodes[b].value()].value();
        EXPECT_EQ(t.events.thread[ea], t.events.thread[eb]);
        EXPECT_LE(t.events.start_ns[ea] + t.events.dur_ns[ea], t.events.start_ns[eb]);
      }
      for (const auto& [a, b] : slice.edges.comm) {
        ASSERT_TRUE(a >= 0 && a < size && b >= 0 && b < size);
        // Compute is device work; communication is COMM or carries a collective name.
        const auto ea = t.nodes.event[slice.nodes[a].value()].value();
        const auto eb = t.nodes.event[slice.nodes[b].value()].value();
        EXPECT_TRUE(t.threads.is_device[t.events.thread[ea].value()]);
        EXPECT_NE(t.events.layer[ea], Layer::kComm);
        EXPECT_TRUE(t.events.layer[eb] == Layer::kComm ||
                    model::IsCollectiveKernelName(NameOf(t, slice.nodes[b])));
      }
      for (const auto& [a, b] : slice.edges.parent_child) {
        EXPECT_EQ(t.nodes.parent[slice.nodes[b].value()], slice.nodes[a]);
      }
      for (NodeIndex p : slice.peer_nodes) {
        EXPECT_NE(t.steps.process[t.nodes.step[p.value()].value()], t.steps.process[s]);
      }
      // The parent closure is closed and contains the slice.
      const std::vector<NodeIndex> closed = ParentClosure(t, slice);
      EXPECT_TRUE(
          std::includes(closed.begin(), closed.end(), slice.nodes.begin(), slice.nodes.end()));
      for (NodeIndex c : closed) {
        const NodeIndex p = t.nodes.parent[c.value()];
        if (p.valid()) {
          EXPECT_TRUE(std::binary_search(closed.begin(), closed.end(), p));
        }
      }
    }
  }
}

TEST(SimulatedSliceTest, MaxNodesKeepsSuspectsAndTheMostRelevant) {
  const model::Trace& t = Simulated();
  const StepIndex s = BigStep(t, 1);
  const std::vector<NodeIndex> suspects = NodesNamed(t, s, "flash_fwd");
  const StepSlice full = Slice(t, s, suspects);
  ASSERT_GT(full.nodes.size(), 12u);
  for (size_t cap : {size_t{1}, size_t{12}, full.nodes.size() - 1}) {
    SliceOptions options;
    options.max_nodes = cap;
    const StepSlice capped = Slice(t, s, suspects, options);
    EXPECT_EQ(capped.nodes.size(), std::max(cap, suspects.size()));
    for (NodeIndex u : suspects) EXPECT_TRUE(Has(capped, u));
    // Every dropped non-suspect is no more relevant than every kept non-suspect.
    float min_kept = 1e9f, max_dropped = -1e9f;
    for (size_t k = 0; k < full.nodes.size(); ++k) {
      if (full.reasons[k] & kReasonSuspect) continue;
      if (Has(capped, full.nodes[k])) {
        min_kept = std::min(min_kept, full.relevance[k]);
      } else {
        max_dropped = std::max(max_dropped, full.relevance[k]);
      }
    }
    EXPECT_GE(min_kept, max_dropped) << "cap " << cap;
    EXPECT_TRUE(std::includes(full.nodes.begin(), full.nodes.end(), capped.nodes.begin(),
                              capped.nodes.end()));
  }
}

}  // namespace
}  // namespace teller::slice
