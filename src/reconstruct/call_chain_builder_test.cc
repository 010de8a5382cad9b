#include "reconstruct/call_chain_builder.h"

#include <gtest/gtest.h>

#include "reconstruct/test_trace.h"

namespace teller::reconstruct {
namespace {

using model::Layer;
using testing::DumpStep;
using testing::TinyTrace;

TEST(CallChainBuilderTest, KernelHangsUnderItsLaunchNotUnderTheOpenRange) {
  TinyTrace t;
  auto p = t.Process(1);
  auto main = t.HostThread(p, 11);
  auto stream = t.Stream(p, 7);
  t.Step(main, 0, 1000, 3, "decode", "a");
  t.X(main, Layer::kFe, "module", 10, 490);
  t.X(main, Layer::kBe, "aten::mm", 20, 180);
  t.X(main, Layer::kRt, "cudaLaunchKernel", 30, 10, /*correlation=*/5);
  t.X(main, Layer::kDrv, "cuLaunchKernel", 32, 5);
  t.X(main, Layer::kBe, "aten::add", 300, 150);  // open while the kernel runs
  // The kernel runs inside a device-side annotation and after the step's host end.
  t.X(stream, Layer::kFe, "gpu_annotation", 250, 1000);
  t.X(stream, Layer::kK, "gemm", 310, 1100, /*correlation=*/5);
  ASSERT_TRUE(BuildCallChains(&t.trace).ok());
  ASSERT_EQ(t.trace.steps.size(), 1u);
  EXPECT_EQ(DumpStep(t.trace, 0),
            "STEP step\n"
            "  FE module\n"
            "    BE aten::mm\n"
            "      RT cudaLaunchKernel\n"
            "        DRV cuLaunchKernel\n"
            "        K gemm\n"
            "    BE aten::add\n"
            "  FE gpu_annotation\n");
  // Parents by node index, exactly.
  const model::NodeTable& nodes = t.trace.nodes;
  std::vector<uint32_t> parents;
  for (size_t n = 0; n < nodes.size(); ++n) parents.push_back(nodes.parent[n].value());
  EXPECT_EQ(parents, (std::vector<uint32_t>{UINT32_MAX, 0, 1, 2, 3, 3, 1, 0}));
  EXPECT_EQ(t.trace.steps.start_ns[0], 0);
  EXPECT_EQ(t.trace.steps.end_ns[0], 1410);  // the kernel's end
  EXPECT_EQ(t.trace.steps.number[0], 3);
  EXPECT_EQ(t.trace.steps.phase[0], model::StepPhase::kDecode);
  EXPECT_EQ(t.trace.steps.source[0], model::StepSource::kEngineStep);
  EXPECT_EQ(t.trace.stats.Get("reconstruct_kernels_bound"), 1);
  EXPECT_EQ(t.trace.stats.Get("reconstruct_kernels_unbound"), 0);
  EXPECT_EQ(t.trace.stats.Get("reconstruct_nodes"), 8);
  EXPECT_TRUE(t.trace.reconstructed);
}

TEST(CallChainBuilderTest, GraphLaunchBindsAllItsKernels) {
  TinyTrace t;
  auto p = t.Process(1);
  auto main = t.HostThread(p, 11);
  auto s1 = t.Stream(p, 7);
  auto s2 = t.Stream(p, 8);
  t.Step(main, 0, 100, 0, "decode", "");
  t.X(main, Layer::kRt, "cudaGraphLaunch", 10, 20, 77, model::kFlagGraphLaunch);
  constexpr int kKernels = 300;
  for (int k = 0; k < kKernels; ++k) {  // alternating streams, appended out of time order
    int i = k % 2 == 0 ? k : kKernels - k;
    t.X(i % 2 == 0 ? s1 : s2, Layer::kK, "graph_node", 50 + 10 * i, 8, 77, model::kFlagGraphNode);
  }
  ASSERT_TRUE(BuildCallChains(&t.trace).ok());
  const model::NodeTable& nodes = t.trace.nodes;
  ASSERT_EQ(nodes.size(), 2u + kKernels);
  int64_t previous_start = -1;
  for (size_t n = 2; n < nodes.size(); ++n) {
    EXPECT_EQ(nodes.parent[n].value(), 1u);
    EXPECT_EQ(nodes.depth[n], 2);
    int64_t start = t.trace.events.start_ns[nodes.event[n].value()];
    EXPECT_GT(start, previous_start);  // children by start time
    previous_start = start;
  }
  EXPECT_EQ(t.trace.stats.Get("reconstruct_kernels_bound"), kKernels);
  EXPECT_EQ(t.trace.steps.end_ns[0], 50 + 10 * (kKernels - 1) + 8);
}

TEST(CallChainBuilderTest, PushPopMismatchesAreCountedNotFatal) {
  TinyTrace t;
  auto p = t.Process(1);
  auto a = t.HostThread(p, 11);
  auto b = t.HostThread(p, 12);
  auto outer = t.Begin(a, Layer::kFe, "outer", 100);
  auto inner = t.Begin(a, Layer::kFe, "inner", 200);
  auto inner_end = t.End(a, 300);
  auto outer_end = t.End(a, 400);
  auto extra_pop = t.End(a, 450);
  auto open = t.Begin(b, Layer::kFe, "never_closed", 500);
  t.X(b, Layer::kBe, "last_op", 600, 100);
  ASSERT_TRUE(BuildCallChains(&t.trace).ok());
  const model::EventTable& e = t.trace.events;
  EXPECT_EQ(e.phase[outer.value()], model::EventPhase::kComplete);
  EXPECT_EQ(e.dur_ns[outer.value()], 300);
  EXPECT_EQ(e.dur_ns[inner.value()], 100);  // the first pop closes the innermost push
  EXPECT_TRUE(e.flags[inner_end.value()] & model::kFlagConsumed);
  EXPECT_TRUE(e.flags[outer_end.value()] & model::kFlagConsumed);
  EXPECT_FALSE(e.flags[extra_pop.value()] & model::kFlagConsumed);
  EXPECT_EQ(e.phase[open.value()], model::EventPhase::kComplete);
  EXPECT_EQ(e.dur_ns[open.value()], 200);  // closed at the thread's last timestamp (700)
  EXPECT_TRUE(e.flags[open.value()] & model::kFlagTruncated);
  EXPECT_EQ(t.trace.stats.Get("reconstruct_unmatched_pop"), 1);
  EXPECT_EQ(t.trace.stats.Get("reconstruct_unclosed_range"), 1);
}

TEST(CallChainBuilderTest, StartEndRangesPairByIdAcrossThreads) {
  TinyTrace t;
  auto p = t.Process(1);
  auto a = t.HostThread(p, 11);
  auto b = t.HostThread(p, 12);
  auto range = t.Begin(a, Layer::kFe, "request_range", 100, /*id=*/42);
  auto push = t.Begin(b, Layer::kFe, "pushed", 150);
  auto range_end = t.End(b, 900, /*id=*/42);  // ends on another thread, inside b's push
  auto pop = t.End(b, 950);
  ASSERT_TRUE(BuildCallChains(&t.trace).ok());
  const model::EventTable& e = t.trace.events;
  EXPECT_EQ(e.dur_ns[range.value()], 800);
  EXPECT_EQ(e.dur_ns[push.value()], 800);  // the id-paired end did not pop b's stack
  EXPECT_TRUE(e.flags[range_end.value()] & model::kFlagConsumed);
  EXPECT_TRUE(e.flags[pop.value()] & model::kFlagConsumed);
  EXPECT_EQ(t.trace.stats.Get("reconstruct_unmatched_pop"), 0);
  EXPECT_EQ(t.trace.stats.Get("reconstruct_unclosed_range"), 0);
}

TEST(CallChainBuilderTest, DuplicateCorrelationPicksTheClosestLaunchBefore) {
  TinyTrace t;
  auto p = t.Process(1);
  auto main = t.HostThread(p, 11);
  auto stream = t.Stream(p, 7);
  t.Step(main, 0, 1000, 0, "", "");
  auto first = t.X(main, Layer::kRt, "cudaLaunchKernel", 100, 10, 9);
  auto second = t.X(main, Layer::kRt, "cudaLaunchKernel", 500, 10, 9);
  auto k1 = t.X(stream, Layer::kK, "k1", 300, 10, 9);
  auto k2 = t.X(stream, Layer::kK, "k2", 700, 10, 9);
  ASSERT_TRUE(BuildCallChains(&t.trace).ok());
  EXPECT_EQ(t.trace.stats.Get("reconstruct_duplicate_correlation"), 1);
  const model::NodeTable& nodes = t.trace.nodes;
  auto parent_event = [&](model::EventRow row) {
    for (size_t n = 0; n < nodes.size(); ++n) {
      if (nodes.event[n] == row) return nodes.event[nodes.parent[n].value()];
    }
    return model::EventRow::Invalid();
  };
  EXPECT_EQ(parent_event(k1), first);
  EXPECT_EQ(parent_event(k2), second);
}

TEST(CallChainBuilderTest, CorrelationIdsDoNotBindAcrossProcesses) {
  TinyTrace t;
  auto p0 = t.Process(1);
  auto p1 = t.Process(2);
  auto main0 = t.HostThread(p0, 11);
  auto stream1 = t.Stream(p1, 7);
  t.Step(main0, 0, 1000, 0, "", "");
  t.X(main0, Layer::kRt, "cudaLaunchKernel", 100, 10, 9);
  t.X(stream1, Layer::kK, "other_process_kernel", 300, 10, 9);
  ASSERT_TRUE(BuildCallChains(&t.trace).ok());
  EXPECT_EQ(t.trace.stats.Get("reconstruct_kernels_bound"), 0);
  EXPECT_EQ(t.trace.stats.Get("reconstruct_kernels_unbound"), 1);
  EXPECT_EQ(t.trace.stats.Get("reconstruct_events_outside_steps"), 1);
}

TEST(CallChainBuilderTest, PartialOverlapsAreSiblings) {
  TinyTrace t;
  auto p = t.Process(1);
  auto main = t.HostThread(p, 11);
  t.Step(main, 0, 1000, 0, "", "");
  t.X(main, Layer::kBe, "a", 100, 200);  // [100, 300)
  t.X(main, Layer::kBe, "b", 250, 200);  // [250, 450): overlaps a's end
  t.X(main, Layer::kRt, "inside_b", 320, 10);
  ASSERT_TRUE(BuildCallChains(&t.trace).ok());
  EXPECT_EQ(DumpStep(t.trace, 0),
            "STEP step\n"
            "  BE a\n"
            "  BE b\n"
            "    RT inside_b\n");
  EXPECT_EQ(t.trace.stats.Get("reconstruct_partial_overlap"), 1);
}

TEST(CallChainBuilderTest, EqualSpansNestOuterLayerFirst) {
  TinyTrace t;
  auto p = t.Process(1);
  auto main = t.HostThread(p, 11);
  t.X(main, Layer::kRt, "cudaMemcpyAsync", 100, 50);  // appended first, same span
  t.X(main, Layer::kBe, "aten::copy_", 100, 50);
  t.Step(main, 100, 50, 0, "", "");
  ASSERT_TRUE(BuildCallChains(&t.trace).ok());
  EXPECT_EQ(DumpStep(t.trace, 0),
            "STEP step\n"
            "  BE aten::copy_\n"
            "    RT cudaMemcpyAsync\n");
}

TEST(CallChainBuilderTest, OtherThreadsJoinTheStepWhenAsked) {
  for (bool attach : {true, false}) {
    TinyTrace t;
    auto p = t.Process(1);
    auto main = t.HostThread(p, 11);
    auto worker = t.HostThread(p, 12);
    t.Step(main, 0, 1000, 0, "", "");
    t.X(worker, Layer::kBe, "detokenize", 400, 100);
    t.X(worker, Layer::kRt, "cudaMemcpy", 420, 10);
    t.X(worker, Layer::kBe, "between_steps", 2000, 100);
    BuildOptions options;
    options.attach_other_threads = attach;
    ASSERT_TRUE(BuildCallChains(&t.trace, options).ok());
    if (attach) {
      EXPECT_EQ(DumpStep(t.trace, 0),
                "STEP step\n"
                "  BE detokenize\n"
                "    RT cudaMemcpy\n");
    } else {
      EXPECT_EQ(DumpStep(t.trace, 0), "STEP step\n");
    }
    EXPECT_EQ(t.trace.stats.Get("reconstruct_events_outside_steps"), attach ? 1 : 3);
  }
}

TEST(CallChainBuilderTest, StepAncestorsStayOutOfTheTree) {
  TinyTrace t;
  auto p = t.Process(1);
  auto main = t.HostThread(p, 11);
  t.X(main, Layer::kFe, "busy_loop", 0, 10000);
  t.X(main, Layer::kFe, "schedule", 50, 40);
  t.Step(main, 100, 100, 0, "", "");
  t.X(main, Layer::kBe, "op", 120, 10);
  t.Step(main, 300, 100, 1, "", "");
  ASSERT_TRUE(BuildCallChains(&t.trace).ok());
  ASSERT_EQ(t.trace.steps.size(), 2u);
  EXPECT_EQ(DumpStep(t.trace, 0), "STEP step\n  BE op\n");
  EXPECT_EQ(DumpStep(t.trace, 1), "STEP step\n");
  EXPECT_EQ(t.trace.stats.Get("reconstruct_events_outside_steps"), 2);
}

TEST(CallChainBuilderTest, RefusesASecondBuildAndRaggedTables) {
  TinyTrace t;
  auto p = t.Process(1);
  auto main = t.HostThread(p, 11);
  t.Step(main, 0, 10, 0, "", "");
  ASSERT_TRUE(BuildCallChains(&t.trace).ok());
  EXPECT_FALSE(BuildCallChains(&t.trace).ok());

  TinyTrace bad;
  auto q = bad.Process(1);
  auto thread = bad.HostThread(q, 11);
  bad.X(thread, Layer::kBe, "op", 0, 10);
  bad.trace.events.thread[0] = model::ThreadIndex(5);
  base::Status status = BuildCallChains(&bad.trace);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("event 0"), std::string::npos) << status.message();
}

}  // namespace
}  // namespace teller::reconstruct
