// `teller record --watch`: the triggers (record/watch.h) on progress files written
// here, and end to end on tests/data/watch_engine.py under the real collector.
#include "record/watch.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "base/file_util.h"
#include "base/testing.h"
#include "capture/capture_test_util.h"
#include "capture/process_status.h"
#include "record/recorder.h"

namespace teller::record {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kSecond = 1'000'000'000;

// A bundle folder with one process folder holding this progress.
std::string BundleWithProgress(const std::string& name, const capture::ProcessProgress& progress) {
  const std::string bundle = base::TempDir(name);
  fs::create_directories(bundle + "/proc-h-1");
  EXPECT_TRUE(base::WriteFileAtomic(bundle + "/proc-h-1/" + capture::kProgressFileName,
                                    capture::FormatProgress(progress))
                  .ok());
  return bundle;
}

capture::OpenWork OpenStep(int64_t since_ns, uint64_t completions, int64_t longest_ns) {
  return {true, since_ns, completions, longest_ns, 0, "Scheduler.run_batch"};
}

TEST(WatchTest, AStepOpenPastBothLimitsIsAHang) {
  WatchOptions options;  // 5 s and 10x the longest
  capture::ProcessProgress progress;
  progress.open.push_back(OpenStep(100 * kSecond, 40, 30'000'000));
  const std::string bundle = BundleWithProgress("watch_hang", progress);
  EXPECT_FALSE(FindHang(bundle, options, 104 * kSecond));  // 4 s: under hang_after
  auto hang = FindHang(bundle, options, 106 * kSecond);
  ASSERT_TRUE(hang);
  EXPECT_EQ(hang->kind, "hang");
  EXPECT_NE(hang->detail.find("the engine step 'Scheduler.run_batch' in proc-h-1 has been open "
                              "for 6.0 s (its 40 earlier runs took at most 30.0 ms)"),
            std::string::npos)
      << hang->detail;
}

TEST(WatchTest, WorkThatNeverCompletedOrUsuallyTakesLongIsNoHang) {
  WatchOptions options;
  capture::ProcessProgress progress;
  // The engine's serving loop: open since start, never completed.
  progress.open.push_back({false, 0, 0, 0, 11, "run_busy_loop"});
  // A step that has taken up to 2 s: 8 s is under ten times that.
  progress.open.push_back(OpenStep(100 * kSecond, 12, 2 * kSecond));
  const std::string bundle = BundleWithProgress("watch_no_hang", progress);
  EXPECT_FALSE(FindHang(bundle, options, 108 * kSecond));
  EXPECT_TRUE(FindHang(bundle, options, 121 * kSecond));  // 21 s > 10 x 2 s
}

TEST(WatchTest, SlowStepsInARowFireOnlyWhenAsked) {
  capture::ProcessProgress progress;
  progress.recent_step_ns = {10'000'000, 300'000'000, 310'000'000, 320'000'000};
  const std::string bundle = BundleWithProgress("watch_slow", progress);
  WatchOptions options;
  EXPECT_FALSE(FindHang(bundle, options, kSecond));
  options.slow_step_ms = 250;
  options.slow_steps = 3;
  auto slow = FindHang(bundle, options, kSecond);
  ASSERT_TRUE(slow);
  EXPECT_EQ(slow->kind, "slowdown");
  options.slow_steps = 4;  // the first step was fast
  EXPECT_FALSE(FindHang(bundle, options, kSecond));
}

TEST(WatchTest, FailureLinesAreTheOnesAServiceDoesNotSurvive) {
  // As vLLM, SGLang and PyTorch print them (public incident reports).
  EXPECT_TRUE(IsFailureLine("RuntimeError: CUDA error: an illegal memory access was encountered"));
  EXPECT_TRUE(IsFailureLine(
      "[rank1]:[E1204 10:01:02.123456 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught "
      "collective operation timeout: WorkNCCL(SeqNum=2431, OpType=ALLREDUCE, NumelIn=8192, "
      "NumelOut=8192, Timeout(ms)=600000) ran for 600030 milliseconds before timing out."));
  EXPECT_TRUE(IsFailureLine(
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
      "total capacity of 79.15 GiB of which 1.06 GiB is free."));
  EXPECT_TRUE(IsFailureLine("Fatal Python error: Segmentation fault"));
  EXPECT_FALSE(IsFailureLine("Traceback (most recent call last):"));
  EXPECT_FALSE(IsFailureLine(
      "INFO 12-04 10:00:00 metrics.py:455] Avg prompt throughput: 0.0 tokens/s, Running: 0 "
      "reqs, GPU KV cache usage: 0.0%."));
  EXPECT_FALSE(IsFailureLine("WARNING: cuda graph capture took 12.3 s"));
}

// ---- end to end: the collector in ring mode under the launcher (suite WatchRecordTest:
// the sanitizer build runs it with the capture tests, CMakePresets.json asan-capture) ----

std::string Python() { return fs::exists("/usr/bin/python3") ? "/usr/bin/python3" : ""; }

int DevNull() {
  static int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  return fd;
}

RecordOptions WatchEngine(const std::string& name, const std::string& fault, double seconds) {
  RecordOptions options;
  options.output_dir = base::TempDir(name) + "/run.teller";
  options.command = {Python(),    base::SourceDir() + "/tests/data/watch_engine.py",
                     "--fault",   fault,
                     "--seconds", std::to_string(seconds)};
  options.layout = FindInstallLayout(base::BinaryDir() + "/teller_record_tool");
  options.stdout_fd = DevNull();
  options.stderr_fd = DevNull();
  options.cupti = false;
  options.watch.enabled = true;
  options.watch.ring_ms = 10'000;
  options.watch.hang_after_ms = 1'000;
  return options;
}

// The engine steps the bundle holds, by their "step" number.
std::set<int> RecordedSteps(const std::string& bundle) {
  std::set<int> steps;
  for (const auto& process : capture::testing::DumpBundle(bundle).processes) {
    for (const auto& range : process.host_ranges) {
      auto step = range.args.find("step");
      if (step != range.args.end()) steps.insert(std::stoi(step->second));
    }
  }
  return steps;
}

#define SKIP_WITHOUT_PYTHON() \
  if (Python().empty()) GTEST_SKIP() << "no python3"

TEST(WatchRecordTest, AHungStepFiresWhileTheServiceRunsAndTheRingIsWritten) {
  SKIP_WITHOUT_PYTHON();
  RecordOptions options = WatchEngine("watch_e2e_hang", "hang", 1.0);
  int child_pid = 0;
  options.on_started = [&](int pid) { child_pid = pid; };
  std::vector<std::set<int>> steps_at_trigger;
  options.on_trigger = [&](const WatchTrigger& trigger) {
    // The service still runs (hung); the bundle already holds its steps.
    EXPECT_EQ(kill(child_pid, 0), 0);
    steps_at_trigger.push_back(RecordedSteps(options.output_dir));
    if (trigger.kind == "hang") kill(child_pid, SIGKILL);
  };
  auto result = RunRecord(options);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->exit_code, 128 + SIGKILL);
  ASSERT_GE(result->triggers.size(), 1u);
  EXPECT_EQ(result->triggers[0].kind, "hang");
  EXPECT_NE(result->triggers[0].detail.find("Scheduler.run_batch"), std::string::npos)
      << result->triggers[0].detail;
  ASSERT_GE(steps_at_trigger.size(), 1u);
  EXPECT_GT(steps_at_trigger[0].size(), 20u);  // ~1 s of 6 ms steps before the hang
}

TEST(WatchRecordTest, AnIdleServiceIsNoHangAndItsRingIsWrittenAtExit) {
  SKIP_WITHOUT_PYTHON();
  RecordOptions options = WatchEngine("watch_e2e_idle", "idle", 0.5);
  auto result = RunRecord(options);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->exit_code, 0);
  EXPECT_TRUE(result->triggers.empty()) << result->triggers[0].detail;
  EXPECT_GT(RecordedSteps(options.output_dir).size(), 10u);
}

TEST(WatchRecordTest, ACudaErrorLineFiresAndTheStepsBeforeItAreKept) {
  SKIP_WITHOUT_PYTHON();
  RecordOptions options = WatchEngine("watch_e2e_cuda", "cuda_error", 0.5);
  auto result = RunRecord(options);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->exit_code, 1);
  ASSERT_EQ(result->triggers.size(), 1u);
  EXPECT_EQ(result->triggers[0].kind, "crash");
  EXPECT_NE(result->triggers[0].detail.find("illegal memory access"), std::string::npos);
  EXPECT_GT(RecordedSteps(options.output_dir).size(), 10u);
}

TEST(WatchRecordTest, ASegfaultWritesTheRingFromTheSignalHandler) {
  SKIP_WITHOUT_PYTHON();
  RecordOptions options = WatchEngine("watch_e2e_segv", "segfault", 0.5);
  auto result = RunRecord(options);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->exit_code, 128 + SIGSEGV);
  ASSERT_EQ(result->triggers.size(), 1u);
  EXPECT_EQ(result->triggers[0].kind, "exit");
  EXPECT_GT(RecordedSteps(options.output_dir).size(), 10u);
}

TEST(WatchRecordTest, AServiceStoppedWithSigtermIsNoFailure) {
  SKIP_WITHOUT_PYTHON();
  RecordOptions options = WatchEngine("watch_e2e_term", "idle", 0.5);
  options.on_started = [](int pid) {
    std::thread([pid] {
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      kill(pid, SIGTERM);
    }).detach();
  };
  auto result = RunRecord(options);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->exit_code, 128 + SIGTERM);
  EXPECT_TRUE(result->triggers.empty()) << result->triggers[0].detail;
}

TEST(WatchRecordTest, TheRingHoldsOnlyTheLastSeconds) {
  SKIP_WITHOUT_PYTHON();
  RecordOptions options = WatchEngine("watch_e2e_ring", "none", 3.0);
  options.watch.ring_ms = 1'000;
  auto result = RunRecord(options);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  const std::set<int> steps = RecordedSteps(options.output_dir);
  ASSERT_FALSE(steps.empty());
  // ~3 s of steps ran; a 1 s ring (quarter-ring segments) keeps at most ~1.5 s of them:
  // the first steps are gone, the last second's are there. Counted against the run's own
  // steps, not a step rate (a sanitizer on a loaded machine runs them 3x slower).
  const size_t ran = static_cast<size_t>(*steps.rbegin()) + 1;
  EXPECT_GT(*steps.begin(), 0);
  EXPECT_GE(steps.size(), 10u);
  EXPECT_LT(steps.size(), ran * 3 / 4) << "kept " << steps.size() << " of " << ran << " steps";
}

#ifndef TELLER_NVTX_TEST_PROGRAM
#define TELLER_NVTX_TEST_PROGRAM ""
#endif

// A native program: its NVTX step range never pops. The progress file names it (the
// innermost open range of its thread) and the trigger fires while it runs.
TEST(WatchRecordTest, AnNvtxStepThatNeverEndsIsAHang) {
  if (std::string(TELLER_NVTX_TEST_PROGRAM).empty()) GTEST_SKIP() << "no NVTX test program";
  RecordOptions options = WatchEngine("watch_e2e_nvtx", "hang", 0.5);
  options.command = {TELLER_NVTX_TEST_PROGRAM, "hang", "0.5"};
  int child_pid = 0;
  options.on_started = [&](int pid) { child_pid = pid; };
  options.on_trigger = [&](const WatchTrigger& trigger) {
    if (trigger.kind == "hang") kill(child_pid, SIGKILL);
  };
  auto result = RunRecord(options);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_GE(result->triggers.size(), 1u);
  EXPECT_EQ(result->triggers[0].kind, "hang");
  EXPECT_NE(result->triggers[0].detail.find("the range 'step'"), std::string::npos)
      << result->triggers[0].detail;
  // The ring was written on the trigger: the steps before the hang are there.
  const auto dump = capture::testing::DumpBundle(options.output_dir);
  ASSERT_EQ(dump.processes.size(), 1u);
  const std::vector<std::string> events = dump.processes[0].ThreadEvents("engine");
  EXPECT_GT(std::count(events.begin(), events.end(), "push step"), 100);
}

}  // namespace
}  // namespace teller::record
