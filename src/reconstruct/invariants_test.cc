// Property checks over random synthetic traces: the tree invariants that later
// stages rely on (see docs/reconstruct.md).
#include <gtest/gtest.h>

#include <random>
#include <unordered_map>

#include "reconstruct/call_chain_builder.h"
#include "reconstruct/request_projection.h"
#include "reconstruct/synthetic_trace.h"

namespace teller::reconstruct {
namespace {

void CheckInvariants(const model::Trace& trace) {
  const model::NodeTable& nodes = trace.nodes;
  const model::StepTable& steps = trace.steps;
  const model::EventTable& events = trace.events;
  std::vector<uint8_t> seen(events.size(), 0);
  std::vector<uint32_t> node_of(events.size(), UINT32_MAX);
  uint32_t expected_begin = 0;
  for (uint32_t s = 0; s < steps.size(); ++s) {
    uint32_t begin = steps.node_begin[s].value(), end = steps.node_end[s].value();
    ASSERT_EQ(begin, expected_begin) << "steps are contiguous and in order";
    ASSERT_LT(begin, end);
    expected_begin = end;
    ASSERT_FALSE(nodes.parent[begin].valid());
    ASSERT_EQ(nodes.depth[begin], 0);
    ASSERT_EQ(nodes.event[begin], steps.event[s]);
    for (uint32_t n = begin; n < end; ++n) {
      ASSERT_EQ(nodes.step[n].value(), s);
      uint32_t row = nodes.event[n].value();
      ASSERT_FALSE(seen[row]) << "event " << row << " appears twice";
      seen[row] = 1;
      node_of[row] = n;
      ASSERT_LE(events.start_ns[row] + events.dur_ns[row], steps.end_ns[s]);
      if (n == begin) continue;
      uint32_t parent = nodes.parent[n].value();
      ASSERT_LT(parent, n) << "parent precedes child";
      ASSERT_GE(parent, begin) << "parent in the same step";
      ASSERT_EQ(nodes.depth[n], nodes.depth[parent] + 1);
      // Pre-order: the parent is the nearest earlier node one level up.
      uint32_t up = n - 1;
      while (nodes.depth[up] >= nodes.depth[n]) --up;
      ASSERT_EQ(up, parent);
      // Siblings by start time.
      if (n > begin + 1 && nodes.parent[n - 1].value() == parent) {
        ASSERT_LE(events.start_ns[nodes.event[n - 1].value()], events.start_ns[row]);
      }
    }
  }
  ASSERT_EQ(expected_begin, nodes.size());

  // Every device event with a launch (same process and correlation) hangs right
  // under it, and is in a step whenever its launch is.
  std::unordered_map<int64_t, uint32_t> launch_of;  // (process, correlation) -> row
  for (uint32_t row = 0; row < events.size(); ++row) {
    if (trace.threads.is_device[events.thread[row].value()] || !events.correlation[row].valid()) {
      continue;
    }
    launch_of[(int64_t{events.process[row].value()} << 40) + events.correlation[row].value()] = row;
  }
  for (uint32_t row = 0; row < events.size(); ++row) {
    if (!trace.threads.is_device[events.thread[row].value()] || !events.correlation[row].valid()) {
      continue;
    }
    auto it = launch_of.find((int64_t{events.process[row].value()} << 40) +
                             events.correlation[row].value());
    if (it == launch_of.end()) continue;
    uint32_t launch_node = node_of[it->second];
    if (launch_node == UINT32_MAX) continue;
    ASSERT_NE(node_of[row], UINT32_MAX) << "kernel " << row << " left its launch's step";
    ASSERT_EQ(nodes.parent[node_of[row]].value(), launch_node);
  }
}

TEST(InvariantsTest, HoldOnRandomSyntheticTraces) {
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    SyntheticOptions options;
    options.seed = seed;
    options.processes = 1 + static_cast<int>(seed % 3);
    options.hosts = 1;
    options.steps_per_process = 3 + static_cast<int>(seed % 5);
    options.modules_per_step = 2 + static_cast<int>(seed % 4);
    options.ops_per_module = 1 + static_cast<int>(seed % 3);
    options.graph_every = static_cast<int>(seed % 3);
    options.graph_kernels = 5 + static_cast<int>(seed);
    options.shuffle_rows = seed % 2 == 0;
    model::Trace trace = MakeSyntheticTrace(options);
    size_t event_count = trace.events.size();
    ASSERT_TRUE(BuildCallChains(&trace).ok());
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    CheckInvariants(trace);
    if (::testing::Test::HasFatalFailure()) return;
    // Everything the generator makes lies inside a step.
    EXPECT_EQ(trace.nodes.size(), event_count);
    EXPECT_EQ(trace.stats.Get("reconstruct_events_outside_steps"), 0);
    EXPECT_EQ(trace.stats.Get("reconstruct_kernels_unbound"), 0);
    EXPECT_EQ(trace.steps.size(),
              static_cast<size_t>(options.processes * options.steps_per_process));
    EXPECT_EQ(trace.stats.Get("reconstruct_logs_unaligned"), 0);
    if (options.processes > 1) {
      EXPECT_EQ(trace.stats.Get("reconstruct_collective_matches"), options.steps_per_process);
    }
    // A request's projection of one of its steps is the whole step here.
    model::RequestIndex q = FindRequest(trace, "r0");
    ASSERT_TRUE(q.valid());
    model::StepIndex s = StepsOfRequest(trace, q).front();
    EXPECT_EQ(ProjectRequest(trace, q, s).size(),
              trace.steps.node_end[s.value()].value() - trace.steps.node_begin[s.value()].value());
  }
}

TEST(InvariantsTest, HoldWhenEventsAreDroppedAtRandom) {
  // Lost launches, lost ends of ranges: counters go up, invariants still hold.
  SyntheticOptions options;
  options.processes = 2;
  options.steps_per_process = 6;
  model::Trace trace = MakeSyntheticTrace(options);
  std::mt19937_64 rng(5);
  for (size_t row = 0; row < trace.events.size(); ++row) {
    if (trace.events.layer[row] == model::Layer::kRt && rng() % 4 == 0) {
      trace.events.correlation[row] = model::CorrelationId::Invalid();
    }
    if (trace.events.layer[row] == model::Layer::kBe && rng() % 5 == 0) {
      trace.events.dur_ns[row] *= 3;  // now overlaps its neighbours
    }
  }
  ASSERT_TRUE(BuildCallChains(&trace).ok());
  CheckInvariants(trace);
  EXPECT_GT(trace.stats.Get("reconstruct_kernels_unbound"), 0);
  EXPECT_GT(trace.stats.Get("reconstruct_partial_overlap"), 0);
}

}  // namespace
}  // namespace teller::reconstruct
