// Where steps come from: sources (a)-(d), their priority, phases and numbering.
#include <gtest/gtest.h>

#include "reconstruct/call_chain_builder.h"
#include "reconstruct/test_trace.h"

namespace teller::reconstruct {
namespace {

using model::Layer;
using model::StepPhase;
using model::StepSource;
using testing::DumpStep;
using testing::TinyTrace;

bool HasNoteContaining(const model::Trace& trace, std::string_view part) {
  for (const std::string& note : trace.meta.notes) {
    if (note.find(part) != std::string::npos) return true;
  }
  return false;
}

TEST(StepDetectionTest, EngineStepsCarryNumberPhaseAndRequests) {
  TinyTrace t;
  auto p = t.Process(1, "h", 0);
  auto main = t.HostThread(p, 11);
  t.X(main, Layer::kFe, "ProfilerStep#9", 0, 10000);  // a weaker source, ignored
  t.Step(main, 100, 100, 41, "prefill", "a,b");
  t.Step(main, 300, 100, 42, "mixed", "b");
  ASSERT_TRUE(BuildCallChains(&t.trace).ok());
  const model::StepTable& steps = t.trace.steps;
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps.number[0], 41);
  EXPECT_EQ(steps.number[1], 42);
  EXPECT_EQ(steps.global_step[1], 42);
  EXPECT_EQ(steps.phase[0], StepPhase::kPrefill);
  EXPECT_EQ(steps.phase[1], StepPhase::kMixed);
  EXPECT_EQ(steps.source[0], StepSource::kEngineStep);
  EXPECT_EQ(steps.requests_count[0], 2u);
  EXPECT_EQ(steps.rank[0], 0);
  EXPECT_TRUE(t.trace.meta.notes.empty());
  EXPECT_EQ(t.trace.stats.Get("reconstruct_steps_engine_step"), 2);
}

TEST(StepDetectionTest, VllmAnnotationsGivePhaseFromContextAndGeneration) {
  TinyTrace t;
  auto p = t.Process(1);
  auto main = t.HostThread(p, 11);
  t.X(main, Layer::kFe, "vllm/v1/worker/gpu_model_runner.py(2907): execute_model", 0, 5000);
  t.X(main, Layer::kFe, "execute_context_1(888_788544)_generation_0(0)", 100, 900);
  t.X(main, Layer::kFe, "execute_32_context_0(sq0sk0sqsq0sqsk0)_generation_32(sq32sk55086)", 1100,
      900);
  t.X(main, Layer::kFe, "execute_context_2(10_20)_generation_5(5)", 2100, 900);
  t.X(main, Layer::kFe, "execute_model_not_a_step", 3100, 900);
  ASSERT_TRUE(BuildCallChains(&t.trace).ok());
  const model::StepTable& steps = t.trace.steps;
  ASSERT_EQ(steps.size(), 3u);  // the annotations win over the Python frame around them
  EXPECT_EQ(steps.phase[0], StepPhase::kPrefill);
  EXPECT_EQ(steps.phase[1], StepPhase::kDecode);
  EXPECT_EQ(steps.phase[2], StepPhase::kMixed);
  EXPECT_EQ(steps.number[2], 2);  // by order
  EXPECT_EQ(steps.source[0], StepSource::kEngineAnnotation);
  EXPECT_EQ(steps.requests_count[0], 0u);
  EXPECT_TRUE(HasNoteContaining(t.trace, "engine annotations"));
  EXPECT_TRUE(HasNoteContaining(t.trace, "no request ids"));
}

TEST(StepDetectionTest, SglangStepInsideExecuteAnnotationIsOneStep) {
  TinyTrace t;
  auto p = t.Process(1);
  auto main = t.HostThread(p, 11);
  t.X(main, Layer::kFe, "execute_32_context_0(sq0)_generation_32(sq32)", 0, 1000);
  t.X(main, Layer::kFe, "step[DECODE bs=32]", 10, 980);
  t.X(main, Layer::kBe, "aten::mm", 20, 10);
  t.X(main, Layer::kFe, "step[PREFILL bs=4]", 2000, 500);
  ASSERT_TRUE(BuildCallChains(&t.trace).ok());
  ASSERT_EQ(t.trace.steps.size(), 2u);
  EXPECT_EQ(DumpStep(t.trace, 0),
            "FE execute_32_context_0(sq0)_generation_32(sq32)\n"
            "  FE step[DECODE bs=32]\n"
            "    BE aten::mm\n");
  EXPECT_EQ(t.trace.steps.phase[0], StepPhase::kDecode);
  EXPECT_EQ(t.trace.steps.phase[1], StepPhase::kPrefill);
}

TEST(StepDetectionTest, PythonExecuteModelFramesWhenNoAnnotation) {
  TinyTrace t;
  auto p = t.Process(1);
  auto main = t.HostThread(p, 11);
  t.X(main, Layer::kFe, "vllm/v1/worker/gpu_model_runner.py(3380): execute_model", 0, 500);
  t.X(main, Layer::kFe, "vllm/v1/worker/gpu_model_runner.py(3380): execute_model", 1000, 500);
  ASSERT_TRUE(BuildCallChains(&t.trace).ok());
  ASSERT_EQ(t.trace.steps.size(), 2u);
  EXPECT_EQ(t.trace.steps.phase[0], StepPhase::kUnknown);
  EXPECT_TRUE(HasNoteContaining(t.trace, "execute_model Python frames"));
}

TEST(StepDetectionTest, ProfilerStepsKeepTheirNumbers) {
  TinyTrace t;
  auto p = t.Process(1);
  auto main = t.HostThread(p, 11);
  t.X(main, Layer::kFe, "ProfilerStep#7", 0, 500);
  t.X(main, Layer::kBe, "aten::conv2d", 10, 100);
  t.X(main, Layer::kFe, "ProfilerStep#8", 600, 500);
  t.X(main, Layer::kFe, "ProfilerStep#x", 1200, 500);  // not a step name
  ASSERT_TRUE(BuildCallChains(&t.trace).ok());
  ASSERT_EQ(t.trace.steps.size(), 2u);
  EXPECT_EQ(t.trace.steps.number[0], 7);
  EXPECT_EQ(t.trace.steps.number[1], 8);
  EXPECT_EQ(t.trace.steps.source[1], StepSource::kProfilerStep);
  EXPECT_EQ(DumpStep(t.trace, 0), "FE ProfilerStep#7\n  BE aten::conv2d\n");
  EXPECT_TRUE(HasNoteContaining(t.trace, "ProfilerStep#N"));
}

TEST(StepDetectionTest, TopLevelRangesOfTheBusiestThread) {
  TinyTrace t;
  auto p = t.Process(1);
  auto quiet = t.HostThread(p, 11);
  auto busy = t.HostThread(p, 12);
  t.X(quiet, Layer::kFe, "quiet_range", 0, 5000);
  t.X(busy, Layer::kFe, "forward", 100, 300);
  t.X(busy, Layer::kBe, "aten::mm", 110, 50);
  t.X(busy, Layer::kRt, "cudaDeviceSynchronize", 450, 10);  // calls never become steps
  t.X(busy, Layer::kFe, "forward", 500, 300);
  ASSERT_TRUE(BuildCallChains(&t.trace).ok());
  ASSERT_EQ(t.trace.steps.size(), 2u);
  EXPECT_EQ(t.trace.steps.source[0], StepSource::kTopLevelRange);
  EXPECT_EQ(t.trace.steps.thread[0], busy);
  EXPECT_EQ(DumpStep(t.trace, 0), "FE forward\n  BE aten::mm\n");
  EXPECT_TRUE(HasNoteContaining(t.trace, "busiest host thread"));
}

TEST(StepDetectionTest, GlobalStepMatchesAcrossRanksByNumberElseByOrder) {
  TinyTrace t;
  auto p0 = t.Process(1, "h", 0);
  auto p1 = t.Process(2, "h", 1);
  auto m0 = t.HostThread(p0, 11);
  auto m1 = t.HostThread(p1, 21);
  // Rank 1 starts one step later: numbers from args line the steps up.
  t.Step(m0, 0, 100, 5, "", "");
  t.Step(m0, 200, 100, 6, "", "");
  t.Step(m1, 210, 100, 6, "", "");
  // Rank 0 of a second job without numbers: by order.
  TinyTrace u;
  auto q0 = u.Process(1, "h", 0);
  auto q1 = u.Process(2, "h", 1);
  auto n0 = u.HostThread(q0, 11);
  auto n1 = u.HostThread(q1, 21);
  u.X(n0, Layer::kFe, "step[DECODE bs=1]", 0, 100);
  u.X(n0, Layer::kFe, "step[DECODE bs=1]", 200, 100);
  u.X(n1, Layer::kFe, "step[DECODE bs=1]", 5, 100);
  u.X(n1, Layer::kFe, "step[DECODE bs=1]", 205, 100);
  ASSERT_TRUE(BuildCallChains(&t.trace).ok());
  ASSERT_TRUE(BuildCallChains(&u.trace).ok());
  EXPECT_EQ(t.trace.steps.global_step, (std::vector<int64_t>{5, 6, 6}));
  EXPECT_EQ(u.trace.steps.global_step, (std::vector<int64_t>{0, 1, 0, 1}));
  EXPECT_EQ(u.trace.steps.rank, (std::vector<int32_t>{0, 0, 1, 1}));
}

}  // namespace
}  // namespace teller::reconstruct
