#include "reconstruct/request_projection.h"

#include <gtest/gtest.h>

#include "reconstruct/call_chain_builder.h"
#include "reconstruct/test_trace.h"

namespace teller::reconstruct {
namespace {

using model::Layer;
using testing::TinyTrace;

std::vector<std::string> Names(const model::Trace& trace,
                               const std::vector<model::NodeIndex>& nodes) {
  std::vector<std::string> out;
  for (model::NodeIndex n : nodes) {
    out.emplace_back(trace.str(trace.events.name[trace.nodes.event[n.value()].value()]));
  }
  return out;
}

TEST(RequestProjectionTest, BatchedKernelBelongsToEveryRequestOfItsStep) {
  TinyTrace t;
  auto p = t.Process(1, "h", 0);
  auto main = t.HostThread(p, 11);
  auto stream = t.Stream(p, 7);
  t.Step(main, 0, 1000, 0, "prefill", "req-a, req-b");
  t.X(main, Layer::kRt, "cudaLaunchKernel", 100, 10, 1);
  t.X(stream, Layer::kK, "batched_gemm", 200, 300, 1);
  // A per-request range inside the batch: only req-a's.
  auto only_a = t.X(main, Layer::kFe, "sample_tokens", 600, 100);
  t.trace.AddStringArg(only_a, t.trace.strings.Intern("request"), t.trace.strings.Intern("req-a"));
  t.X(main, Layer::kBe, "aten::argmax", 610, 10);
  t.Step(main, 2000, 1000, 1, "decode", "req-b");
  t.X(main, Layer::kRt, "cudaLaunchKernel", 2100, 10, 2);
  t.X(stream, Layer::kK, "decode_gemm", 2200, 300, 2);
  ASSERT_TRUE(BuildCallChains(&t.trace).ok());

  const model::RequestTable& requests = t.trace.requests;
  ASSERT_EQ(requests.size(), 2u);
  model::RequestIndex a = FindRequest(t.trace, "req-a");
  model::RequestIndex b = FindRequest(t.trace, "req-b");
  ASSERT_TRUE(a.valid());
  ASSERT_TRUE(b.valid());
  EXPECT_FALSE(FindRequest(t.trace, "req-c").valid());
  EXPECT_EQ(requests.step_count[a.value()], 1u);
  EXPECT_EQ(requests.step_count[b.value()], 2u);
  EXPECT_EQ(requests.first_ns[b.value()], 0);
  EXPECT_EQ(requests.last_ns[b.value()], 3000);
  EXPECT_EQ(requests.last_ns[a.value()], 1000);
  EXPECT_EQ(t.trace.step_requests.size(), 3u);
  EXPECT_EQ(StepsOfRequest(t.trace, b),
            (std::vector<model::StepIndex>{model::StepIndex(0), model::StepIndex(1)}));

  model::StepIndex first(0), second(1);
  EXPECT_EQ(Names(t.trace, ProjectRequest(t.trace, a, first)),
            (std::vector<std::string>{"step", "cudaLaunchKernel", "batched_gemm", "sample_tokens",
                                      "aten::argmax"}));
  EXPECT_EQ(Names(t.trace, ProjectRequest(t.trace, b, first)),
            (std::vector<std::string>{"step", "cudaLaunchKernel", "batched_gemm"}));
  EXPECT_EQ(Names(t.trace, ProjectRequest(t.trace, b, second)),
            (std::vector<std::string>{"step", "cudaLaunchKernel", "decode_gemm"}));
  EXPECT_TRUE(ProjectRequest(t.trace, a, second).empty());
  EXPECT_EQ(t.trace.stats.Get("reconstruct_requests"), 2);
}

TEST(RequestProjectionTest, RepeatedAndEmptyIdsInTheListAreIgnored) {
  TinyTrace t;
  auto p = t.Process(1);
  auto main = t.HostThread(p, 11);
  t.Step(main, 0, 10, 0, "", "x,,x, y ,");
  ASSERT_TRUE(BuildCallChains(&t.trace).ok());
  EXPECT_EQ(t.trace.requests.size(), 2u);
  EXPECT_EQ(t.trace.steps.requests_count[0], 2u);
  EXPECT_TRUE(FindRequest(t.trace, "y").valid());
}

}  // namespace
}  // namespace teller::reconstruct
