// Replay graphs (replay_graph.h, replay_graph_wire.h): a graph cut from a trace survives
// the round trip and replays as the trace does; every cut is an error naming the offset, a
// flipped byte never crashes the decoder, and a graph that names what it lacks is refused.
#include "cause/replay_graph_wire.h"

#include <gtest/gtest.h>

#include <limits>
#include <set>

#include "base/byte_io_testing.h"
#include "cause/step_replay.h"
#include "sim/simulated_trace_testing.h"

namespace teller::cause {
namespace {

struct Cut {
  model::Trace trace;
  localize::StepFeatures features;
  std::vector<int64_t> groups;
  ReplayGraph graph;
};

// Two groups of a throttled vLLM run: the second and the fourth.
const Cut& ThrottledRun() {
  static const Cut* cut = [] {
    auto* c = new Cut;
    c->trace = sim::SimulatedTrace("gpu_throttle:rank=1", "replay_graph_wire");
    c->features = localize::ComputeStepFeatures(c->trace);
    std::set<int64_t> groups;
    for (size_t s = 0; s < c->trace.steps.size(); ++s) groups.insert(GroupOf(c->trace, s));
    c->groups = {*std::next(groups.begin(), 1), *std::next(groups.begin(), 3)};
    c->graph = CutReplayGraph(c->trace, NodeCells(c->trace, c->features),
                              CollectiveMatchOfEvents(c->trace), c->groups);
    return c;
  }();
  return *cut;
}

// Every node's cut: a third of its time on rank 1.
double ThirdOnRank1(const model::Trace& trace, uint32_t node) {
  return trace.steps.rank[trace.nodes.step[node].value()] == 1 ? 1.0 / 3 : 0.0;
}

TEST(ReplayGraphWireTest, AGraphSurvivesTheRoundTripAndReplaysAsItsTrace) {
  const Cut& cut = ThrottledRun();
  ASSERT_GT(cut.graph.steps.size(), 2u);
  ASSERT_GT(cut.graph.nodes.size(), 100u);
  const ReplayGraph back = base::Decoded(DecodeReplayGraph(EncodeReplayGraph(cut.graph)));
  EXPECT_EQ(ReplayGraphDifference(back, cut.graph), "");
  EXPECT_EQ(back.nodes.step, cut.graph.nodes.step);
  const StepReplay from_trace(cut.trace, cut.features);
  const StepReplay from_graph(back);
  int64_t matched = 0;
  for (int64_t group : cut.groups) {
    SCOPED_TRACE(group);
    auto of_rank1 = [&](uint32_t node) { return ThirdOnRank1(cut.trace, node); };
    const ReplayedGroup a = from_trace.Replay(group, of_rank1);
    const ReplayedGroup b = from_graph.Replay(group, of_rank1);
    EXPECT_EQ(a.measured_ns, b.measured_ns);
    EXPECT_EQ(a.replayed_ns, b.replayed_ns);
    EXPECT_LT(a.replayed_ns, a.measured_ns);  // the cut moves something
    const std::vector<StepReplay::Arrival> arrivals = from_graph.LastArrivals(group);
    const std::vector<StepReplay::Arrival> own = from_trace.LastArrivals(group);
    ASSERT_EQ(arrivals.size(), own.size());
    for (size_t i = 0; i < own.size(); ++i) {
      EXPECT_EQ(arrivals[i].ranks, own[i].ranks);
      EXPECT_EQ(arrivals[i].last_rank, own[i].last_rank);
    }
    matched += static_cast<int64_t>(own.size());
  }
  EXPECT_GT(matched, 0);
  // A group not cut replays as empty.
  EXPECT_EQ(from_graph.Replay(cut.groups[0] + 1, [](uint32_t) { return 0.0; }).measured_ns, 0.0);
  EXPECT_FALSE(back.HoldsGroup(cut.groups[0] + 1));
  const std::vector<int64_t> asked = {3, 8, 21};
  EXPECT_EQ(base::Decoded(DecodeReplayGroups(EncodeReplayGroups(asked))), asked);
}

// The graph's first step alone (a few hundred bytes: every byte flipped in turn).
ReplayGraph FirstStep(const ReplayGraph& graph) {
  ReplayGraph one = CutGroup(graph, graph.steps.group[0]);
  const uint32_t nodes = std::min<uint32_t>(one.steps.nodes_begin[1], 12);
  for (auto* column : {&one.steps.step, &one.steps.first_node}) column->resize(1);
  for (auto* column : {&one.steps.group, &one.steps.start_ns, &one.steps.end_ns,
                       &one.steps.stall_begin_ns, &one.steps.stall_end_ns}) {
    column->resize(1);
  }
  one.steps.rank.resize(1);
  one.steps.nodes_begin = {0, nodes};
  for (auto* column : {&one.nodes.start_ns, &one.nodes.dur_ns}) column->resize(nodes);
  for (auto* column : {&one.nodes.thread, &one.nodes.launch, &one.nodes.step}) {
    column->resize(nodes);
  }
  for (uint32_t& launch : one.nodes.launch) {
    if (launch >= nodes) launch = ReplayNodes::kNone;
  }
  one.nodes.depth.resize(nodes);
  one.nodes.cell.resize(nodes);
  one.nodes.match.resize(nodes);
  EXPECT_TRUE(CheckReplayGraph(one).ok());
  return one;
}

TEST(ReplayGraphWireTest, EveryTruncationIsAnErrorAndFlippedBytesNeverCrash) {
  const ReplayGraph one = FirstStep(ThrottledRun().graph);
  const std::string graph = EncodeReplayGraph(one);
  const std::string groups = EncodeReplayGroups({1, 4});
  base::ExpectEveryTruncationFails(graph, [](std::string_view b) { return DecodeReplayGraph(b); });
  base::ExpectEveryTruncationFails(groups, [](std::string_view b) { return DecodeReplayGroups(b); });
  base::ExpectFlippedBytesDecodeOrFail({&graph, &groups}, [](std::string_view b) {
    return int{!DecodeReplayGraph(b).ok()} + int{!DecodeReplayGroups(b).ok()};
  });
  std::string unordered = EncodeReplayGroups({4, 1});
  base::ExpectError(DecodeReplayGroups(unordered).status(), "32", "not distinct and ascending");
}

// What the decoder refuses in a whole buffer: a node on a thread the graph lacks, a step of
// a group not asked for, a launch past the nodes; each named with the offset (the end).
TEST(ReplayGraphWireTest, AGraphThatNamesWhatItLacksIsRefused) {
  const ReplayGraph one = CutGroup(ThrottledRun().graph, ThrottledRun().groups[0]);
  auto expect_refused_at_end = [](const ReplayGraph& graph, const std::string& what) {
    const std::string bytes = EncodeReplayGraph(graph);
    base::ExpectError(DecodeReplayGraph(bytes).status(), std::to_string(bytes.size()), what);
  };
  ReplayGraph thread = one;
  thread.nodes.thread[5] = static_cast<uint32_t>(one.threads.size());
  expect_refused_at_end(thread, "node 5 on thread");
  ReplayGraph group = one;
  group.steps.group[1] += 1;
  expect_refused_at_end(group, "step 1 of group");
  ReplayGraph launch = one;
  launch.nodes.launch[7] = static_cast<uint32_t>(one.nodes.size());
  expect_refused_at_end(launch, "node 7 launched by");
  // Offsets that go back are a step of more nodes than the bytes hold, refused at its count.
  ReplayGraph offsets = one;
  offsets.steps.nodes_begin[1] = offsets.steps.nodes_begin[2] + 1;
  const base::Status back = DecodeReplayGraph(EncodeReplayGraph(offsets)).status();
  ASSERT_FALSE(back.ok());
  EXPECT_NE(back.message().find("a step's nodes is 4294967295, at most"), std::string::npos)
      << back.message();
}

// What the compact format writes as differences and sparse entries comes back exactly at
// the extremes: times and durations of any sign and size, a launch after its kernel and one
// in another step, matches of any value, the deepest node, threads and processes past a
// byte; and the format costs a fraction of the plain columns' 32 bytes a node.
TEST(ReplayGraphWireTest, ExtremeValuesSurviveTheRoundTrip) {
  ReplayGraph graph = CutGroup(ThrottledRun().graph, ThrottledRun().groups[0]);
  ASSERT_GT(graph.steps.size(), 1u);
  const std::string compact = EncodeReplayGraph(graph);
  EXPECT_LT(compact.size(), 12 * graph.nodes.size()) << graph.nodes.size() << " nodes";
  ReplayNodes& nodes = graph.nodes;
  nodes.start_ns[0] = std::numeric_limits<int64_t>::min();
  nodes.start_ns[1] = std::numeric_limits<int64_t>::max();
  nodes.dur_ns[1] = std::numeric_limits<int64_t>::min();
  nodes.dur_ns[2] = std::numeric_limits<int64_t>::max();
  nodes.depth[3] = UINT16_MAX;
  nodes.match[4] = std::numeric_limits<int32_t>::max();
  nodes.match[5] = std::numeric_limits<int32_t>::min();
  nodes.match[6] = -7;
  nodes.launch[0] = static_cast<uint32_t>(nodes.size() - 1);
  nodes.launch[nodes.size() - 1] = 0;
  graph.steps.step[1] = UINT32_MAX;
  graph.steps.rank[0] = std::numeric_limits<int32_t>::min();
  graph.steps.start_ns[0] = std::numeric_limits<int64_t>::max();
  graph.steps.stall_end_ns[1] = std::numeric_limits<int64_t>::min();
  graph.processes = 100000;
  graph.threads.process.back() = graph.processes - 1;
  graph.threads.process.resize(300, 0);
  graph.threads.is_device.resize(300, 1);
  nodes.thread[7] = 299;
  const ReplayGraph back = base::Decoded(DecodeReplayGraph(EncodeReplayGraph(graph)));
  EXPECT_EQ(ReplayGraphDifference(back, graph), "");
  EXPECT_EQ(back.nodes.step, graph.nodes.step);
}

// Appending checks each part's graph against the part's counts: one graph of the whole
// run appended alone is itself, and refused when the run is said to have fewer steps; and
// graphs cut for other groups are refused.
TEST(ReplayGraphWireTest, ConcatRefusesAPartThatNamesStepsItLacks) {
  const ReplayGraph& whole = ThrottledRun().graph;
  const base::StatusOr<ReplayGraph> same = ConcatReplayGraphs(
      {whole}, {0, static_cast<uint32_t>(ThrottledRun().trace.steps.size())},
      {0, static_cast<uint32_t>(ThrottledRun().trace.nodes.size())});
  ASSERT_TRUE(same.ok()) << same.status().message();
  EXPECT_EQ(ReplayGraphDifference(*same, whole), "");
  const base::StatusOr<ReplayGraph> short_part = ConcatReplayGraphs(
      {whole}, {0, 3}, {0, static_cast<uint32_t>(ThrottledRun().trace.nodes.size())});
  ASSERT_FALSE(short_part.ok());
  EXPECT_NE(short_part.status().message().find("the part has 3 steps"), std::string::npos)
      << short_part.status().message();
  ReplayGraph other = whole;
  other.groups.push_back(other.groups.back() + 1);
  EXPECT_FALSE(ConcatReplayGraphs({whole, other}, {0, 0, 0}, {0, 0, 0}).ok());
}

}  // namespace
}  // namespace teller::cause
