#include <gtest/gtest.h>

#include "reconstruct/call_chain_builder.h"
#include "reconstruct/test_trace.h"

namespace teller::reconstruct {
namespace {

using model::LogAlignment;
using testing::TinyTrace;

constexpr int64_t kMs = 1'000'000;

TEST(LogAlignmentTest, RequestIdFirstThenTimeWindow) {
  TinyTrace t;
  auto p0 = t.Process(1, "h", 0);
  auto p1 = t.Process(2, "h", 1);
  auto m0 = t.HostThread(p0, 11);
  auto m1 = t.HostThread(p1, 21);
  t.Step(m0, 0, 10 * kMs, 0, "", "a");              // step 0
  t.Step(m0, 20 * kMs, 10 * kMs, 1, "", "b");       // step 1
  t.Step(m0, 100 * kMs, 10 * kMs, 2, "", "a");      // step 2
  t.Step(m1, 500 * kMs, 10 * kMs, 0, "", "c");      // step 3 (rank 1)
  size_t by_id = t.Log(25 * kMs, p0, 0, "a");       // inside step 1, but request a: step 0
  size_t by_id_late = t.Log(95 * kMs, p0, 0, "a");  // nearest step of a: step 2
  size_t inside = t.Log(22 * kMs, p0, 0, "");
  size_t widened = t.Log(40 * kMs, p0, 0, "");         // 10 ms after step 1, within 50 ms
  size_t unknown_id = t.Log(105 * kMs, p0, 0, "zzz");  // no such request: by time
  size_t other_rank = t.Log(505 * kMs, model::ProcessIndex::Invalid(), 1, "");
  size_t any_rank = t.Log(508 * kMs, p0, 0, "");  // nothing on p0 near: any rank
  size_t far = t.Log(900 * kMs, p0, 0, "");
  size_t no_time = t.Log(INT64_MIN, p0, 0, "a");
  ASSERT_TRUE(BuildCallChains(&t.trace).ok());
  const model::LogTable& logs = t.trace.logs;
  auto step = [&](size_t i) { return logs.step[i].valid() ? int(logs.step[i].value()) : -1; };
  EXPECT_EQ(step(by_id), 0);
  EXPECT_EQ(logs.alignment[by_id], LogAlignment::kRequestId);
  EXPECT_EQ(step(by_id_late), 2);
  EXPECT_EQ(step(inside), 1);
  EXPECT_EQ(logs.alignment[inside], LogAlignment::kTimeWindow);
  EXPECT_EQ(step(widened), 1);
  EXPECT_EQ(step(unknown_id), 2);
  EXPECT_EQ(logs.alignment[unknown_id], LogAlignment::kTimeWindow);
  EXPECT_EQ(step(other_rank), 3);
  EXPECT_EQ(step(any_rank), 3);
  EXPECT_EQ(step(far), -1);
  EXPECT_EQ(logs.alignment[far], LogAlignment::kNone);
  EXPECT_EQ(step(no_time), -1);
  EXPECT_EQ(t.trace.stats.Get("reconstruct_logs_aligned_request_id"), 2);
  EXPECT_EQ(t.trace.stats.Get("reconstruct_logs_aligned_time_window"), 5);
  EXPECT_EQ(t.trace.stats.Get("reconstruct_logs_unaligned"), 2);
}

TEST(LogAlignmentTest, WindowOptionBoundsTheTimeMatch) {
  TinyTrace t;
  auto p = t.Process(1, "h", 0);
  auto m = t.HostThread(p, 11);
  t.Step(m, 0, 10 * kMs, 0, "", "");
  size_t near = t.Log(12 * kMs, p, 0, "");
  size_t beyond = t.Log(16 * kMs, p, 0, "");
  BuildOptions options;
  options.log_window_ns = 5 * kMs;
  ASSERT_TRUE(BuildCallChains(&t.trace, options).ok());
  EXPECT_TRUE(t.trace.logs.step[near].valid());
  EXPECT_FALSE(t.trace.logs.step[beyond].valid());
}

}  // namespace
}  // namespace teller::reconstruct
