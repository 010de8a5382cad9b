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

}  // namespace
}  // namespace teller::capture
