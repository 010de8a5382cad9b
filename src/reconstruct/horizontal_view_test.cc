// Collectives matched across ranks, and clock offsets per host from their end times.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "reconstruct/call_chain_builder.h"
#include "reconstruct/synthetic_trace.h"
#include "reconstruct/test_trace.h"

namespace teller::reconstruct {
namespace {

using model::Layer;
using testing::TinyTrace;

TEST(HorizontalViewTest, MatchesBySequenceAcrossRanks) {
  TinyTrace t;
  auto p0 = t.Process(1, "h", 0);
  auto p1 = t.Process(2, "h", 1);
  auto m0 = t.HostThread(p0, 11);
  t.HostThread(p1, 21);
  auto s0 = t.Stream(p0, 7), s1 = t.Stream(p1, 7);
  for (int seq = 0; seq < 3; ++seq) {
    auto host0 = t.X(m0, Layer::kComm, "record_param_comms", 1000 * seq, 10);
    t.Collective(host0, "tp", seq, "all_reduce");
    t.Collective(t.X(s0, Layer::kComm, "ncclAllReduce", 1000 * seq + 50, 100), "tp", seq,
                 "all_reduce");
    t.Collective(t.X(s1, Layer::kComm, "ncclAllReduce", 1000 * seq + 60, 90), "tp", seq,
                 "all_reduce");
  }
  t.Collective(t.X(s0, Layer::kComm, "ncclSend", 9000, 10), "pp", 0, "send");  // alone
  ASSERT_TRUE(BuildCallChains(&t.trace).ok());
  const model::CollectiveMatchTable& m = t.trace.collective_matches;
  ASSERT_EQ(m.size(), 9u);
  EXPECT_EQ(t.trace.stats.Get("reconstruct_collective_matches"), 3);
  EXPECT_EQ(t.trace.stats.Get("reconstruct_collectives_unmatched"), 1);
  for (size_t i = 0; i < m.size(); ++i) EXPECT_EQ(m.match[i].value(), i / 3);
  EXPECT_EQ(m.rank[0], 0);
  EXPECT_EQ(m.rank[2], 1);
  // One host: no offsets.
  EXPECT_EQ(t.trace.processes.clock_offset_ns, (std::vector<int64_t>{0, 0}));
}

TEST(HorizontalViewTest, MatchesByOrderWhenSequencesAreMissing) {
  TinyTrace t;
  auto p0 = t.Process(1, "h", 0);
  auto p1 = t.Process(2, "h", 1);
  auto s0 = t.Stream(p0, 7), s1 = t.Stream(p1, 7);
  const char* ops0[] = {"all_reduce", "all_gather", "all_reduce"};
  const char* ops1[] = {"all_reduce", "all_gather", "reduce_scatter"};
  for (int k = 0; k < 3; ++k) {
    t.Collective(t.X(s0, Layer::kComm, "nccl", 1000 * k, 10), "tp", -1, ops0[k]);
    t.Collective(t.X(s1, Layer::kComm, "nccl", 1000 * k + 5, 10), "tp", -1, ops1[k]);
  }
  ASSERT_TRUE(BuildCallChains(&t.trace).ok());
  EXPECT_EQ(t.trace.stats.Get("reconstruct_collective_matches"), 2);
  EXPECT_EQ(t.trace.stats.Get("reconstruct_collectives_matched_by_order"), 2);
  EXPECT_EQ(t.trace.stats.Get("reconstruct_collective_order_op_mismatch"), 1);
  EXPECT_EQ(t.trace.collective_matches.size(), 4u);
}

// Ranks 0, 1 on host "a" and 2, 3 on host "b"; host b's clock runs `skew_ns` ahead.
// Collectives end together (+/- noise); now and then one rank's record is off.
struct TwoHostJob {
  TinyTrace t;
  std::vector<model::EventRow> b_events;
  size_t b_log = 0;
};

void BuildTwoHostJob(uint64_t seed, int64_t skew_ns, TwoHostJob* job) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> noise(-2000, 2000), dur(20'000, 400'000);
  std::uniform_int_distribution<int> outlier(0, 19);
  TinyTrace& t = job->t;
  std::vector<model::ThreadIndex> streams;
  for (int r = 0; r < 4; ++r) {
    auto p = t.Process(100 + r, r < 2 ? "a" : "b", r);
    t.HostThread(p, 1);
    streams.push_back(t.Stream(p, 7));
  }
  const int64_t base = 1'700'000'000'000'000'000;
  for (int k = 0; k < 60; ++k) {
    int64_t true_end = base + k * 3'000'000;
    for (int r = 0; r < 4; ++r) {
      int64_t end = true_end + noise(rng) + (outlier(rng) == 0 ? 900'000 : 0);
      int64_t d = dur(rng);
      int64_t start = end - d + (r >= 2 ? skew_ns : 0);
      auto row = t.X(streams[r], Layer::kComm, "ncclKernel_AllReduce", start, d);
      t.Collective(row, "world", k, "all_reduce");
      if (r >= 2) job->b_events.push_back(row);
    }
  }
  job->b_log = t.Log(base + skew_ns, model::ProcessIndex(3), 3, "");
}

TEST(HorizontalViewTest, RecoversAnInjectedHostOffsetOverSeeds) {
  for (uint64_t seed = 1; seed <= 25; ++seed) {
    std::mt19937_64 rng(seed * 7919);
    int64_t skew = std::uniform_int_distribution<int64_t>(-80'000'000, 80'000'000)(rng);
    TwoHostJob job;
    BuildTwoHostJob(seed, skew, &job);
    std::vector<int64_t> before;
    for (auto row : job.b_events) before.push_back(job.t.trace.events.start_ns[row.value()]);
    int64_t log_before = job.t.trace.logs.ts_ns[job.b_log];
    ASSERT_TRUE(BuildCallChains(&job.t.trace).ok());
    const model::ProcessTable& p = job.t.trace.processes;
    SCOPED_TRACE(::testing::Message() << "seed " << seed << " skew " << skew);
    EXPECT_EQ(p.clock_offset_ns[0], 0);
    EXPECT_EQ(p.clock_offset_ns[1], 0);
    EXPECT_NEAR(p.clock_offset_ns[2], -skew, 1500);
    EXPECT_EQ(p.clock_offset_ns[2], p.clock_offset_ns[3]);
    EXPECT_GT(p.clock_uncertainty_ns[2], 0);
    EXPECT_LT(p.clock_uncertainty_ns[2], 4000);
    EXPECT_EQ(p.clock_uncertainty_ns[0], 0);
    for (size_t i = 0; i < before.size(); ++i) {
      ASSERT_EQ(job.t.trace.events.start_ns[job.b_events[i].value()],
                before[i] + p.clock_offset_ns[2]);
    }
    EXPECT_EQ(job.t.trace.logs.ts_ns[job.b_log], log_before + p.clock_offset_ns[2]);
    ASSERT_FALSE(job.t.trace.meta.notes.empty());
    EXPECT_NE(job.t.trace.meta.notes.back().find("aligned to a"), std::string::npos);
  }
}

TEST(HorizontalViewTest, HostsChainThroughSharedCommunicators) {
  // a-b share "x", b-c share "y": c's offset goes through b.
  TinyTrace t;
  std::vector<model::ThreadIndex> streams;
  const char* hosts[] = {"a", "b", "c"};
  const int64_t skews[] = {0, 5'000'000, -7'000'000};
  for (int r = 0; r < 3; ++r) streams.push_back(t.Stream(t.Process(r, hosts[r], r), 7));
  for (int k = 0; k < 9; ++k) {
    int64_t end = 1'000'000 * (k + 1);
    t.Collective(t.X(streams[0], Layer::kComm, "nccl", end - 300 + skews[0], 300), "x", k, "ar");
    t.Collective(t.X(streams[1], Layer::kComm, "nccl", end - 200 + skews[1], 200), "x", k, "ar");
    t.Collective(t.X(streams[1], Layer::kComm, "nccl", end + 10'000 - 100 + skews[1], 100), "y", k,
                 "ar");
    t.Collective(t.X(streams[2], Layer::kComm, "nccl", end + 10'000 - 50 + skews[2], 50), "y", k,
                 "ar");
  }
  ASSERT_TRUE(BuildCallChains(&t.trace).ok());
  EXPECT_EQ(t.trace.processes.clock_offset_ns, (std::vector<int64_t>{0, -5'000'000, 7'000'000}));
  EXPECT_EQ(t.trace.processes.clock_uncertainty_ns, (std::vector<int64_t>{0, 0, 0}));
}

TEST(HorizontalViewTest, HostWithoutSharedCollectivesIsReported) {
  TinyTrace t;
  auto s0 = t.Stream(t.Process(1, "a", 0), 7);
  auto s1 = t.Stream(t.Process(2, "b", 1), 7);
  t.Collective(t.X(s0, Layer::kComm, "nccl", 0, 10), "x", 0, "ar");
  t.Collective(t.X(s1, Layer::kComm, "nccl", 0, 10), "y", 0, "ar");
  ASSERT_TRUE(BuildCallChains(&t.trace).ok());
  EXPECT_EQ(t.trace.stats.Get("reconstruct_clock_unaligned_hosts"), 1);
  EXPECT_EQ(t.trace.processes.clock_offset_ns, (std::vector<int64_t>{0, 0}));
}

// Collective kernels without collective rows (vLLM's custom all-reduce): the k-th COMM
// kernel of each rank's step forms one match when the ranks ran the same names.
TEST(HorizontalViewTest, MatchesCollectiveKernelsWithoutRowsByStepOrder) {
  SyntheticOptions o;
  o.processes = 3;
  o.steps_per_process = 6;
  o.comm_kernels_per_step = 2;
  o.collective_rows = false;
  model::Trace trace = MakeSyntheticTrace(o);
  ASSERT_EQ(trace.collectives.size(), 0u);
  ASSERT_TRUE(BuildCallChains(&trace).ok());
  const model::CollectiveMatchTable& m = trace.collective_matches;
  const int64_t expected_matches = int64_t{o.steps_per_process} * o.comm_kernels_per_step;
  EXPECT_EQ(trace.stats.Get("reconstruct_collectives_matched_by_step_order"), expected_matches);
  EXPECT_EQ(trace.stats.Get("reconstruct_collective_matches"), expected_matches);
  EXPECT_EQ(trace.stats.Get("reconstruct_collectives_step_order_skipped"), 0);
  ASSERT_EQ(m.size(), static_cast<size_t>(expected_matches * o.processes));
  // The step of each event, from the call-chain nodes.
  std::map<uint32_t, int64_t> step_of;
  for (size_t n = 0; n < trace.nodes.size(); ++n) {
    step_of[trace.nodes.event[n].value()] = trace.steps.global_step[trace.nodes.step[n].value()];
  }
  for (size_t i = 0; i < m.size(); i += static_cast<size_t>(o.processes)) {
    std::set<int32_t> ranks;
    for (size_t j = i; j < i + static_cast<size_t>(o.processes); ++j) {
      ASSERT_EQ(m.match[j], m.match[i]);
      const uint32_t row = m.event[j].value();
      EXPECT_EQ(trace.events.layer[row], Layer::kComm);
      EXPECT_EQ(trace.events.name[row], trace.events.name[m.event[i].value()]);
      ASSERT_TRUE(step_of.count(row));
      EXPECT_EQ(step_of[row], step_of[m.event[i].value()]);
      ranks.insert(m.rank[j]);
    }
    EXPECT_EQ(ranks.size(), static_cast<size_t>(o.processes));
  }
}

TEST(HorizontalViewTest, StepWhoseCollectiveNamesDifferIsSkippedAndCounted) {
  SyntheticOptions o;
  o.processes = 3;
  o.steps_per_process = 6;
  o.comm_kernels_per_step = 2;
  o.collective_rows = false;
  o.odd_comm_step = 2;
  model::Trace trace = MakeSyntheticTrace(o);
  ASSERT_TRUE(BuildCallChains(&trace).ok());
  const int64_t matched_steps = o.steps_per_process - 1;
  EXPECT_EQ(trace.stats.Get("reconstruct_collectives_matched_by_step_order"),
            matched_steps * o.comm_kernels_per_step);
  EXPECT_EQ(trace.stats.Get("reconstruct_collectives_step_order_skipped"),
            int64_t{o.processes} * o.comm_kernels_per_step);
  EXPECT_EQ(trace.collective_matches.size(),
            static_cast<size_t>(matched_steps * o.comm_kernels_per_step * o.processes));
}

// Collective rows keep their own matching: no kernel is matched twice.
TEST(HorizontalViewTest, KernelsWithCollectiveRowsAreNotMatchedByStepOrder) {
  SyntheticOptions o;
  o.processes = 2;
  o.steps_per_process = 4;
  model::Trace trace = MakeSyntheticTrace(o);
  ASSERT_TRUE(BuildCallChains(&trace).ok());
  EXPECT_EQ(trace.stats.Get("reconstruct_collectives_matched_by_step_order"), 0);
  EXPECT_EQ(trace.stats.Get("reconstruct_collective_matches"), o.steps_per_process);
  EXPECT_EQ(trace.collective_matches.size(), static_cast<size_t>(o.steps_per_process * 2));
}

// A CPU job (gloo): no collective kernels, only the hooked all_reduce calls, blocking
// on the host. The outermost COMM range of each call matches across ranks by its place
// in the step; the gloo range nested in it does not count again.
TEST(HorizontalViewTest, MatchesHostCollectiveCallsOfStepsWithoutKernels) {
  testing::TinyTrace t;
  auto p0 = t.Process(1, "h", 0);
  auto p1 = t.Process(2, "h", 1);
  auto m0 = t.HostThread(p0, 11);
  auto m1 = t.HostThread(p1, 21);
  for (int64_t step = 0; step < 2; ++step) {
    const int64_t base = step * 1000;
    t.Step(m0, base, 900, step, "decode", "a");
    t.Step(m1, base + 5, 900, step, "decode", "a");
    for (int64_t k = 0; k < 2; ++k) {
      t.X(m0, Layer::kBe, "forward", base + 10 + 300 * k, 100);
      t.X(m1, Layer::kBe, "forward", base + 15 + 300 * k, 200);
      t.X(m0, Layer::kComm, "all_reduce", base + 120 + 300 * k, 110);
      t.X(m0, Layer::kComm, "gloo:all_reduce", base + 125 + 300 * k, 100);
      t.X(m1, Layer::kComm, "all_reduce", base + 220 + 300 * k, 10);
    }
  }
  ASSERT_TRUE(BuildCallChains(&t.trace).ok());
  const model::CollectiveMatchTable& m = t.trace.collective_matches;
  EXPECT_EQ(t.trace.stats.Get("reconstruct_collectives_matched_by_step_order"), 4);
  ASSERT_EQ(m.size(), 8u);
  for (size_t i = 0; i < m.size(); ++i) {
    EXPECT_EQ(t.trace.str(t.trace.events.name[m.event[i].value()]), "all_reduce");
  }
}

}  // namespace
}  // namespace teller::reconstruct
