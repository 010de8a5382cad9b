#include "record/recorder.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "base/file_util.h"
#include "base/testing.h"
#include "capture/capture_test_util.h"

namespace teller::record {
namespace {

namespace fs = std::filesystem;
using capture::testing::DumpBundle;
using capture::testing::DumpedBundle;

// A sink for the pass-through so test output stays clean.
int DevNull() {
  static int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  return fd;
}

RecordOptions Options(const std::string& name, std::vector<std::string> command) {
  RecordOptions options;
  options.output_dir = base::TempDir(name) + "/run.teller";
  options.command = std::move(command);
  options.layout = FindInstallLayout(base::BinaryDir() + "/teller_record_tool");
  options.stdout_fd = DevNull();
  options.stderr_fd = DevNull();
  return options;
}

bool HasNote(const wire::BundleMeta& meta, std::string_view text) {
  return std::any_of(meta.notes.begin(), meta.notes.end(),
                     [&](const std::string& note) { return note.find(text) != std::string::npos; });
}

// Built without NVTX headers there is no NVTX test program: those tests skip.
#ifndef TELLER_NVTX_TEST_PROGRAM
#define TELLER_NVTX_TEST_PROGRAM ""
#endif
#ifdef TELLER_HAVE_NVTX_INJECTION
constexpr bool kHaveNvtxInjection = true;
#else
constexpr bool kHaveNvtxInjection = false;
#endif
#define SKIP_WITHOUT_NVTX_PROGRAM()                                     \
  if (std::string(TELLER_NVTX_TEST_PROGRAM).empty()) {                  \
    GTEST_SKIP() << "built without NVTX headers: no NVTX test program"; \
  }

TEST(RecorderTest, FindsTheBuiltLibrariesAndHooks) {
  InstallLayout layout = FindInstallLayout(base::BinaryDir() + "/teller_record_tool");
  EXPECT_EQ(layout.capture_lib, base::BinaryDir() + "/lib/libteller_capture.so");
  EXPECT_EQ(layout.nvtx_injection, kHaveNvtxInjection
                                       ? base::BinaryDir() + "/lib/libteller_nvtx_injection.so"
                                       : std::string());
  EXPECT_TRUE(fs::exists(layout.python_dir + "/sitecustomize.py")) << layout.python_dir;
}

TEST(RecorderTest, UnwritableOutputFailsBeforeTheCommandRuns) {
  std::string marker = base::TempDir("record_unwritable") + "/ran";
  RecordOptions options = Options("record_unwritable2", {"/bin/sh", "-c", "touch " + marker});
  options.output_dir = "/proc/teller-cannot-write-here";
  auto result = RunRecord(options);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("/proc/teller-cannot-write-here"), std::string::npos)
      << result.status().ToString();
  EXPECT_FALSE(fs::exists(marker));
}

TEST(RecorderTest, ExistingBundleIsNotOverwritten) {
  RecordOptions options = Options("record_twice", {"/bin/true"});
  ASSERT_TRUE(RunRecord(options).ok());
  auto again = RunRecord(options);
  EXPECT_FALSE(again.ok());
}

TEST(RecorderTest, CapturesLinesWithStreamsAndPassesExitStatus) {
  RecordOptions options =
      Options("record_lines",
              {"/bin/sh", "-c", "echo first; echo 'to stderr' >&2; printf 'no newline'; exit 3"});
  auto result = RunRecord(options);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->exit_code, 3);
  DumpedBundle dump = DumpBundle(options.output_dir);
  EXPECT_TRUE(dump.issues.empty());
  std::vector<std::string> stdout_lines, stderr_lines;
  for (const auto& line : dump.logs) {
    EXPECT_EQ(line.pid, result->child_pid);
    EXPECT_GE(line.ts_ns, dump.meta.start_time_ns);
    (line.stream == "stdout" ? stdout_lines : stderr_lines).emplace_back(line.text);
  }
  EXPECT_EQ(stdout_lines, (std::vector<std::string>{"first", "no newline"}));
  EXPECT_EQ(stderr_lines, (std::vector<std::string>{"to stderr"}));
  EXPECT_EQ(dump.meta.command, options.command);
  EXPECT_GE(dump.meta.clock_pairs.size(), 2u);  // start and end
  EXPECT_TRUE(HasNote(dump.meta, "command exit status 3"));
  EXPECT_FALSE(fs::exists(options.output_dir + "/capture_control"));
}

TEST(RecorderTest, PassesThroughTheOutputUnchanged) {
  std::string out_path = base::TempDir("record_passthrough") + "/out";
  int fd = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  RecordOptions options = Options("record_passthrough2", {"/bin/printf", "a\\nb\\r\\nc"});
  options.stdout_fd = fd;
  ASSERT_TRUE(RunRecord(options).ok());
  close(fd);
  EXPECT_EQ(*base::ReadFile(out_path), "a\nb\r\nc");
}

TEST(RecorderTest, KilledCommandExitsWith128PlusSignal) {
  RecordOptions options = Options("record_segv", {"/bin/sh", "-c", "kill -SEGV $$"});
  auto result = RunRecord(options);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->exit_code, 128 + SIGSEGV);
  DumpedBundle dump = DumpBundle(options.output_dir);
  EXPECT_TRUE(HasNote(dump.meta, "command exit status 139"));
}

TEST(RecorderTest, MissingCommandIs127) {
  RecordOptions options = Options("record_missing", {"teller-no-such-command-xyz"});
  auto result = RunRecord(options);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->exit_code, 127);
  EXPECT_TRUE(
      HasNote(DumpBundle(options.output_dir).meta, "cannot run 'teller-no-such-command-xyz'"));
}

TEST(RecorderTest, ForwardsSigtermToTheCommand) {
  RecordOptions options = Options("record_sigterm", {"/bin/sleep", "30"});
  options.on_started = [](int) { kill(getpid(), SIGTERM); };
  auto result = RunRecord(options);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->exit_code, 128 + SIGTERM);
}

TEST(RecorderTest, SetsTheInjectionEnvironmentAndRedactsSecrets) {
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("VLLM_API_KEY", "hunter2", 1);
  setenv("MY_PRIVATE_THING", "nope", 1);
  RecordOptions options = Options("record_env", {"/bin/sh", "-c", "env"});
  auto result = RunRecord(options);
  unsetenv("VLLM_API_KEY");
  unsetenv("MY_PRIVATE_THING");
  ASSERT_TRUE(result.ok());
  DumpedBundle dump = DumpBundle(options.output_dir);
  std::map<std::string, std::string> child_env;
  for (const auto& line : dump.logs) {
    std::string text(line.text);
    size_t eq = text.find('=');
    if (eq != std::string::npos) child_env[text.substr(0, eq)] = text.substr(eq + 1);
  }
  std::string bundle = fs::absolute(options.output_dir).lexically_normal().string();
  EXPECT_EQ(child_env["TELLER_OUTPUT_DIR"], bundle);
  EXPECT_EQ(child_env["NVTX_INJECTION64_PATH"], options.layout.nvtx_injection);
  EXPECT_EQ(child_env["PYTHONPATH"].substr(0, options.layout.python_dir.size()),
            options.layout.python_dir);
  EXPECT_EQ(child_env["TELLER_CAPTURE_LIB"], options.layout.capture_lib);
  EXPECT_TRUE(HasNote(dump.meta, "env NCCL_DEBUG=INFO"));
  EXPECT_TRUE(HasNote(dump.meta, "env VLLM_API_KEY=<redacted>"));
  EXPECT_FALSE(HasNote(dump.meta, "hunter2"));
  EXPECT_FALSE(HasNote(dump.meta, "MY_PRIVATE_THING"));
  bool saw_nvtx = false;
  for (const auto& layer : dump.meta.capture) {
    if (layer.layer == "nvtx") saw_nvtx = layer.enabled;
  }
  EXPECT_EQ(saw_nvtx, kHaveNvtxInjection);
}

TEST(RecorderTest, NoPythonHooksAndNoCuptiAreRecordedWithReasons) {
  RecordOptions options = Options("record_layers", {"/bin/sh", "-c", "echo $TELLER_PYTHON_HOOKS"});
  options.python_hooks = false;
  options.cupti = false;
  ASSERT_TRUE(RunRecord(options).ok());
  DumpedBundle dump = DumpBundle(options.output_dir);
  ASSERT_EQ(dump.logs.size(), 1u);
  EXPECT_EQ(dump.logs[0].text, "0");
  std::map<std::string, std::string> reasons;
  for (const auto& layer : dump.meta.capture) {
    if (!layer.enabled) reasons[layer.layer] = layer.reason;
  }
  EXPECT_EQ(reasons["python_hooks"], "--no-python-hooks");
  EXPECT_EQ(reasons["cupti_activity"], "--no-cupti");
}

TEST(RecorderTest, NvtxProgramUnderRecordLeavesOneProcess) {
  SKIP_WITHOUT_NVTX_PROGRAM();
  RecordOptions options = Options("record_nvtx", {TELLER_NVTX_TEST_PROGRAM, "fork"});
  auto result = RunRecord(options);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->exit_code, 0);
  DumpedBundle dump = DumpBundle(options.output_dir);
  ASSERT_EQ(dump.processes.size(), 2u);  // the program and its forked child
  for (const auto& process : dump.processes) {
    EXPECT_EQ(process.exit.kind, capture::ExitKind::kExit);
  }
  EXPECT_FALSE(HasNote(dump.meta, "ended abnormally"));
}

TEST(RecorderTest, AbnormalEndsAreNotedInMeta) {
  SKIP_WITHOUT_NVTX_PROGRAM();
  RecordOptions options = Options("record_nvtx_segv", {TELLER_NVTX_TEST_PROGRAM, "segv"});
  auto result = RunRecord(options);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->exit_code, 128 + SIGSEGV);
  DumpedBundle dump = DumpBundle(options.output_dir);
  ASSERT_EQ(dump.processes.size(), 1u);
  EXPECT_TRUE(HasNote(dump.meta, "ended abnormally: killed by signal 11 (SIGSEGV)"));
  EXPECT_EQ(dump.processes[0].ThreadEvents("main-loop").back(), "push last");
}

TEST(RecorderTest, CaptureRangeBySignalStartsOffAndTurnsOn) {
  SKIP_WITHOUT_NVTX_PROGRAM();
  RecordOptions off = Options("record_range_off", {TELLER_NVTX_TEST_PROGRAM, "basic"});
  off.capture_range = "signal";
  ASSERT_TRUE(RunRecord(off).ok());
  DumpedBundle dump = DumpBundle(off.output_dir);
  // Nothing traced while off; thread names are kept for when it turns on.
  ASSERT_EQ(dump.processes.size(), 1u);
  EXPECT_TRUE(dump.processes[0].events.empty());
  EXPECT_EQ(dump.processes[0].thread_names.size(), 2u);
  EXPECT_EQ(*base::ReadFile(off.output_dir + "/capture_control"), "off\n");

  RecordOptions on = Options("record_range_on", {"/bin/sleep", "0.3"});
  on.capture_range = "signal";
  on.on_started = [](int) { kill(getpid(), SIGUSR1); };
  ASSERT_TRUE(RunRecord(on).ok());
  EXPECT_EQ(*base::ReadFile(on.output_dir + "/capture_control"), "on\n");
  EXPECT_TRUE(HasNote(DumpBundle(on.output_dir).meta, "capture started at"));
}

TEST(RecorderTest, FoldsProcessSideFilesIntoMeta) {
  RecordOptions options = Options(
      "record_side_files",
      {"/bin/sh", "-c",
       "d=$TELLER_OUTPUT_DIR/proc-h-1; mkdir $d; echo 'cupti_activity: disabled: held' > $d/notes;"
       " echo '1000 2000 3000' > $d/clock_pairs"});
  ASSERT_TRUE(RunRecord(options).ok());
  DumpedBundle dump = DumpBundle(options.output_dir);
  EXPECT_TRUE(HasNote(dump.meta, "process proc-h-1: cupti_activity: disabled: held"));
  EXPECT_TRUE(
      HasNote(dump.meta, "process proc-h-1 ended abnormally: ended without an exit record"));
  // The folder keeps what the recorder concluded (pid 1 was never OOM-killed).
  EXPECT_EQ(capture::ReadExitStatus(options.output_dir + "/proc-h-1").kind,
            capture::ExitKind::kVanished);
  ASSERT_EQ(dump.meta.clock_pairs.size(), 3u);  // start, the GPU pair, end
  EXPECT_EQ(dump.meta.clock_pairs[1], (wire::ClockPair{1000, 2000, 3000}));
}

TEST(RecorderTest, BadCaptureRangeIsAUsageError) {
  RecordOptions options = Options("record_range_bad", {"/bin/true"});
  options.capture_range = "http:notaport";
  EXPECT_FALSE(RunRecord(options).ok());
  options.capture_range = "sometimes";
  EXPECT_FALSE(RunRecord(options).ok());
}

TEST(RecorderTest, EnvironmentAllowList) {
  EXPECT_TRUE(IsRecordedEnvironmentVariable("CUDA_VISIBLE_DEVICES"));
  EXPECT_TRUE(IsRecordedEnvironmentVariable("NCCL_SOCKET_IFNAME"));
  EXPECT_FALSE(IsRecordedEnvironmentVariable("HOME"));
  EXPECT_FALSE(IsRecordedEnvironmentVariable("AWS_SECRET_ACCESS_KEY"));
  EXPECT_TRUE(IsSecretEnvironmentVariable("HF_TOKEN"));
  EXPECT_TRUE(IsSecretEnvironmentVariable("vllm_api_key"));
  EXPECT_TRUE(IsSecretEnvironmentVariable("DB_PASSWORD"));
  EXPECT_FALSE(IsSecretEnvironmentVariable("NCCL_DEBUG"));
}

TEST(RecorderTest, ListsGpusFromTheDriverFolder) {
  std::string root = base::TempDir("record_gpus");
  fs::create_directories(root + "/0000:17:00.0");
  std::ofstream(root + "/0000:17:00.0/information")
      << "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 16\nGPU UUID: \t GPU-1234\n"
         "Device Minor: \t 3\n";
  auto gpus = ListGpus("node0", root);
  ASSERT_EQ(gpus.size(), 1u);
  EXPECT_EQ(gpus[0].name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(gpus[0].uuid, "GPU-1234");
  EXPECT_EQ(gpus[0].index, 3);
  EXPECT_EQ(gpus[0].host, "node0");
  EXPECT_TRUE(ListGpus("node0", root + "/none").empty());
}

}  // namespace
}  // namespace teller::record
