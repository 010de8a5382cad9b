// Runs nvtx_test_program under the injection and checks its ranges exactly.
#include <time.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/testing.h"
#include "capture/capture_test_util.h"
#include "wire/bundle_writer.h"

namespace teller::capture {
namespace {

using testing::DumpBundle;
using testing::DumpedBundle;
using testing::RunProgram;
using testing::RunResult;

int64_t NowNs() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}

std::string MakeBundle(const std::string& name) {
  std::string dir = base::TempDir(name) + "/run.teller";
  wire::BundleMeta meta;
  meta.host = "testhost";
  auto writer = wire::BundleWriter::Create(dir, meta);
  EXPECT_TRUE(writer.ok()) << writer.status().ToString();
  EXPECT_TRUE((*writer)->Close().ok());
  return dir;
}

RunResult RunUnderInjection(const std::string& bundle, const std::string& mode) {
  return RunProgram({TELLER_NVTX_TEST_PROGRAM, mode},
                    {"NVTX_INJECTION64_PATH=" TELLER_NVTX_INJECTION, "TELLER_OUTPUT_DIR=" + bundle,
                     "TELLER_HOST=testhost", "TELLER_FLUSH_MS=50"});
}

const std::vector<std::string> kMainEvents = {
    "start async", "push outer", "push inner",
    "pop",         "push inner", "pop",
    "pop",         "push outer", "push inner",
    "pop",         "push inner", "pop",
    "pop",         "push outer", "push inner",
    "pop",         "push inner", "pop",
    "pop",         "mark tick",  "push engine:engine.step",
    "pop"};
const std::vector<std::string> kWorkerEvents = {"push work", "pop", "push work", "pop",
                                                "push work", "pop", "push work", "pop",
                                                "push work", "pop", "end"};

TEST(NvtxInjectionTest, RangesComeOutExact) {
  std::string bundle = MakeBundle("nvtx_basic");
  RunResult run = RunUnderInjection(bundle, "basic");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output, "");  // the injection prints nothing when it works
  DumpedBundle dump = DumpBundle(bundle);
  EXPECT_TRUE(dump.issues.empty());
  ASSERT_EQ(dump.processes.size(), 1u);
  const testing::DumpedProcess& process = dump.processes[0];
  EXPECT_EQ(process.name, "nvtx_test_progr");  // comm is cut at 15 bytes
  EXPECT_NE(process.command.find("nvtx_test_program basic"), std::string::npos);
  EXPECT_EQ(process.ThreadEvents("main-loop"), kMainEvents);
  EXPECT_EQ(process.ThreadEvents("worker"), kWorkerEvents);
  EXPECT_EQ(process.events.size(), 2u);  // no events on other threads
  EXPECT_EQ(process.exit.kind, ExitKind::kExit);
  EXPECT_FALSE(process.exit.abnormal());
  // Every event has a monotonic timestamp from this run.
  for (int64_t ts : process.timestamps) EXPECT_GT(ts, 0);
}

// A 16 KiB ring (1024 events) under 5000 pairs: wraps, waits for the writer, and a
// reused name buffer whose text changes; every event comes out, in order, named right.
TEST(NvtxInjectionTest, SmallRingKeepsEveryEventExact) {
  std::string bundle = MakeBundle("nvtx_ring");
  const int64_t before_ns = NowNs();
  RunResult run = RunProgram({TELLER_NVTX_TEST_PROGRAM, "ring"},
                             {"NVTX_INJECTION64_PATH=" TELLER_NVTX_INJECTION,
                              "TELLER_OUTPUT_DIR=" + bundle, "TELLER_THREAD_BUFFER_KB=16"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  DumpedBundle dump = DumpBundle(bundle);
  EXPECT_TRUE(dump.issues.empty());
  ASSERT_EQ(dump.processes.size(), 1u);
  std::vector<std::string> expected;
  for (int i = 0; i < 5000; ++i) {
    const std::string long_tail = "-0123456789012345678901234567890123456789012345678901234567";
    expected.push_back(i % 7 == 0 ? "push long-" + std::to_string(i) + long_tail
                                  : "push r" + std::to_string(i % 50));
    if (i % 5 == 0) expected.push_back("mark m");
    expected.push_back("pop");
  }
  std::vector<std::string> events = dump.processes[0].ThreadEvents("ring");
  ASSERT_EQ(events.size(), expected.size());
  for (size_t i = 0; i < events.size(); ++i) ASSERT_EQ(events[i], expected[i]) << "event " << i;
  EXPECT_EQ(dump.processes[0].ThreadEvents("main-loop"), kMainEvents);
  // TSC stamps converted back to this machine's CLOCK_MONOTONIC.
  const int64_t after_ns = NowNs();
  for (int64_t ts : dump.processes[0].timestamps) {
    ASSERT_GE(ts, before_ns);
    ASSERT_LE(ts, after_ns);
  }
}

TEST(NvtxInjectionTest, ForkedChildGetsItsOwnProcessFolder) {
  std::string bundle = MakeBundle("nvtx_fork");
  RunResult run = RunUnderInjection(bundle, "fork");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  DumpedBundle dump = DumpBundle(bundle);
  ASSERT_EQ(dump.processes.size(), 2u);
  const testing::DumpedProcess* parent = nullptr;
  const testing::DumpedProcess* child = nullptr;
  for (const auto& process : dump.processes) {
    (process.events.size() == 1 ? child : parent) = &process;
  }
  ASSERT_TRUE(parent && child);
  EXPECT_NE(parent->pid, child->pid);
  EXPECT_EQ(parent->ThreadEvents("main-loop"), kMainEvents);
  // The child holds only what it emitted itself, none of the parent's events.
  EXPECT_EQ(child->events.begin()->second, (std::vector<std::string>{"push child", "pop"}));
  EXPECT_EQ(child->exit.kind, ExitKind::kExit);
}

TEST(NvtxInjectionTest, WithoutOutputDirItSaysWhyOnceAndTheProgramRuns) {
  RunResult run =
      RunProgram({TELLER_NVTX_TEST_PROGRAM, "basic"},
                 {"NVTX_INJECTION64_PATH=" TELLER_NVTX_INJECTION, "TELLER_OUTPUT_DIR="});
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_EQ(run.output,
            "teller: tracing disabled: TELLER_OUTPUT_DIR is not set (run under "
            "`teller record`)\n");
}

TEST(NvtxInjectionTest, UnwritableOutputDisablesTracingNotTheProgram) {
  RunResult run = RunProgram({TELLER_NVTX_TEST_PROGRAM, "basic"},
                             {"NVTX_INJECTION64_PATH=" TELLER_NVTX_INJECTION,
                              "TELLER_OUTPUT_DIR=/nonexistent/teller/run"});
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_EQ(run.output.rfind("teller: tracing disabled: /nonexistent/teller/run/proc-", 0), 0u)
      << run.output;
  EXPECT_EQ(std::count(run.output.begin(), run.output.end(), '\n'), 1);
}

TEST(NvtxInjectionTest, ControlFileOffRecordsNoRangesOnRecordsThem) {
  for (const char* state : {"off\n", "on\n"}) {
    std::string bundle = MakeBundle(std::string("nvtx_control_") + state[1]);
    std::string control = bundle + "/capture_control";
    std::ofstream(control) << state;
    RunResult run =
        RunProgram({TELLER_NVTX_TEST_PROGRAM, "basic"},
                   {"NVTX_INJECTION64_PATH=" TELLER_NVTX_INJECTION, "TELLER_OUTPUT_DIR=" + bundle,
                    "TELLER_CAPTURE_CONTROL=" + control});
    ASSERT_EQ(run.exit_code, 0) << run.output;
    DumpedBundle dump = DumpBundle(bundle);
    ASSERT_EQ(dump.processes.size(), 1u);  // thread names are kept either way
    EXPECT_EQ(dump.processes[0].ThreadEvents("main-loop"),
              state[1] == 'n' ? kMainEvents : std::vector<std::string>{});
  }
}

// Crash safety: what was flushed before the crash (and, when the handler could, what
// was buffered) stays readable, and the exit record says how the process ended.
struct CrashCase {
  const char* mode;
  int signal;
  int exit_code;
  ExitKind kind;
};

class NvtxCrashTest : public ::testing::TestWithParam<CrashCase> {};

TEST_P(NvtxCrashTest, FlushedEventsSurvive) {
  const CrashCase& c = GetParam();
  std::string bundle = MakeBundle(std::string("nvtx_crash_") + c.mode);
  RunResult run = RunUnderInjection(bundle, c.mode);
  EXPECT_EQ(run.signal, c.signal) << run.output;
  EXPECT_EQ(run.exit_code, c.exit_code) << run.output;
  DumpedBundle dump = DumpBundle(bundle);
  ASSERT_EQ(dump.processes.size(), 1u);
  const testing::DumpedProcess& process = dump.processes[0];
  std::vector<std::string> main_events = process.ThreadEvents("main-loop");
  ASSERT_GE(main_events.size(), kMainEvents.size());
  EXPECT_EQ(std::vector<std::string>(main_events.begin(), main_events.begin() + kMainEvents.size()),
            kMainEvents);
  // The handler flushed the buffered "last" push too.
  EXPECT_EQ(main_events.back(), "push last");
  EXPECT_EQ(process.exit.kind, c.kind);
  EXPECT_EQ(process.exit.signal, c.signal);
  // exit() records a clean exit whose code only the parent knows.
  EXPECT_EQ(process.exit.abnormal(), c.signal != 0);
}

INSTANTIATE_TEST_SUITE_P(Modes, NvtxCrashTest,
                         ::testing::Values(CrashCase{"segv", SIGSEGV, -1, ExitKind::kSignal},
                                           CrashCase{"abort", SIGABRT, -1, ExitKind::kSignal},
                                           CrashCase{"exit3", 0, 3, ExitKind::kExit}),
                         [](const auto& info) { return std::string(info.param.mode); });

TEST(NvtxCrashTest, SigkillKeepsChunksUpToTheLastFlush) {
  std::string bundle = MakeBundle("nvtx_sigkill");
  RunResult run =
      RunProgram({TELLER_NVTX_TEST_PROGRAM, "sleep"},
                 {"NVTX_INJECTION64_PATH=" TELLER_NVTX_INJECTION, "TELLER_OUTPUT_DIR=" + bundle,
                  "TELLER_FLUSH_MS=50"},
                 [](pid_t pid, int output_fd) {
                   char buffer[16];
                   (void)!read(output_fd, buffer, 6);  // "ready\n": flushed, then "last" pushed
                   usleep(200 * 1000);                 // a timer flush picks up "last"
                   kill(pid, SIGKILL);
                 });
  EXPECT_EQ(run.signal, SIGKILL);
  DumpedBundle dump = DumpBundle(bundle);
  ASSERT_EQ(dump.processes.size(), 1u);
  std::vector<std::string> main_events = dump.processes[0].ThreadEvents("main-loop");
  ASSERT_EQ(main_events.size(), kMainEvents.size() + 1);
  EXPECT_EQ(main_events.back(), "push last");
  EXPECT_EQ(dump.processes[0].exit.kind, ExitKind::kUnknown);
  EXPECT_TRUE(dump.processes[0].exit.abnormal());
}

}  // namespace
}  // namespace teller::capture
