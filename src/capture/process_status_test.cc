#include "capture/process_status.h"

#include <csignal>

#include <gtest/gtest.h>

#include "base/testing.h"

namespace teller::capture {
namespace {

TEST(ProcessStatusTest, RoundTripsEveryKind) {
  std::string dir = base::TempDir("process_status");
  ASSERT_TRUE(WriteExitStatus(dir.c_str(), ExitKind::kSignal, SIGSEGV));
  ProcessExit exit = ReadExitStatus(dir);
  EXPECT_EQ(exit.kind, ExitKind::kSignal);
  EXPECT_EQ(exit.signal, SIGSEGV);
  EXPECT_TRUE(exit.abnormal());
  EXPECT_EQ(DescribeExit(exit), "killed by signal 11 (SIGSEGV)");

  ASSERT_TRUE(WriteExitStatus(dir.c_str(), ExitKind::kExit, 0));
  exit = ReadExitStatus(dir);
  EXPECT_EQ(exit.kind, ExitKind::kExit);
  EXPECT_EQ(exit.code, 0);
  EXPECT_FALSE(exit.abnormal());

  ASSERT_TRUE(WriteExitStatus(dir.c_str(), ExitKind::kExit, 137));
  EXPECT_EQ(DescribeExit(ReadExitStatus(dir)), "exited with status 137");

  ASSERT_TRUE(WriteExitStatus(dir.c_str(), ExitKind::kExit, -1));
  exit = ReadExitStatus(dir);
  EXPECT_EQ(exit.code, -1);
  EXPECT_FALSE(exit.abnormal());
  EXPECT_EQ(DescribeExit(exit), "exited");
}

TEST(ProcessStatusTest, MissingOrGarbledFileMeansUnknown) {
  EXPECT_EQ(ReadExitStatus("/nonexistent").kind, ExitKind::kUnknown);
  EXPECT_TRUE(ReadExitStatus("/nonexistent").abnormal());
  EXPECT_FALSE(ParseExitStatus("exit x").has_value());
  EXPECT_FALSE(ParseExitStatus("signal").has_value());
  EXPECT_FALSE(ParseExitStatus("").has_value());
}

TEST(ProcessStatusTest, ProgressRoundTripsWithNamesThatHoldSpaces) {
  ProcessProgress progress;
  progress.now_ns = 9'000'000'000;
  progress.open.push_back({true, 1'000'000'000, 42, 7'000'000, 0, "Scheduler.run_batch"});
  progress.open.push_back({false, 2'000'000'000, 3, 5'000, 1234, "nccl all reduce\nstep 4"});
  progress.recent_step_ns = {5'000'000, 6'000'000};
  progress.ring_bytes = 4096;
  const ProcessProgress back = ParseProgress(FormatProgress(progress));
  EXPECT_EQ(back.now_ns, progress.now_ns);
  ASSERT_EQ(back.open.size(), 2u);
  EXPECT_TRUE(back.open[0].step);
  EXPECT_EQ(back.open[0].completions, 42u);
  EXPECT_EQ(back.open[0].longest_ns, 7'000'000);
  EXPECT_EQ(back.open[0].name, "Scheduler.run_batch");
  EXPECT_FALSE(back.open[1].step);
  EXPECT_EQ(back.open[1].tid, 1234);
  EXPECT_EQ(back.open[1].since_ns, 2'000'000'000);
  EXPECT_EQ(back.open[1].name, "nccl all reduce step 4");  // one line per work
  EXPECT_EQ(back.recent_step_ns, progress.recent_step_ns);
  EXPECT_EQ(back.ring_bytes, 4096u);
}

TEST(ProcessStatusTest, ProgressLinesItDoesNotKnowOrCannotReadAreSkipped) {
  const ProcessProgress back =
      ParseProgress("now 5\nfuture_field 1 2\nstep x y\nrange 1 2 3 4 name\n");
  EXPECT_EQ(back.now_ns, 5);
  ASSERT_EQ(back.open.size(), 1u);
  EXPECT_EQ(back.open[0].name, "name");
}

}  // namespace
}  // namespace teller::capture
