// RecordFaults: `teller record` when things go wrong (issue 8, items 5 and 6): a full
// disk, an unwritable output folder, a command killed by a signal, 64 workers at once,
// a fork without exec, secrets in the environment and on the command line, and a
// command that a shell would have misread. docs/reliability.md lists these results
// (scripts/reliability.sh); docs/capture.md describes the behaviour.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "base/file_util.h"
#include "base/testing.h"
#include "capture/capture_test_util.h"
#include "capture/redaction.h"
#include "record/recorder.h"

namespace teller::record {
namespace {

namespace fs = std::filesystem;
using capture::testing::DumpBundle;
using capture::testing::DumpedBundle;
using capture::testing::DumpedProcess;

#ifndef TELLER_RECORD_FAULTS_PROGRAM
#define TELLER_RECORD_FAULTS_PROGRAM ""
#endif
#define SKIP_WITHOUT_NVTX()                                                \
  if (std::string(TELLER_RECORD_FAULTS_PROGRAM).empty()) {                 \
    GTEST_SKIP() << "built without NVTX headers: no NVTX fixture program"; \
  }

class RecordFaults : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { setenv("TELLER_FLUSH_MS", "50", 1); }

  static int DevNull() {
    static int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    return fd;
  }
  static RecordOptions Options(const std::string& name, std::vector<std::string> command) {
    RecordOptions options;
    options.output_dir = base::TempDir("record_faults_" + name) + "/run.teller";
    options.command = std::move(command);
    options.layout = FindInstallLayout(base::BinaryDir() + "/teller_record_tool");
    options.cupti = false;
    options.python_hooks = false;
    options.stdout_fd = DevNull();
    options.stderr_fd = DevNull();
    return options;
  }
  static std::vector<std::string> Notes(const wire::BundleMeta& meta, std::string_view text) {
    std::vector<std::string> found;
    for (const std::string& note : meta.notes) {
      if (note.find(text) != std::string::npos) found.push_back(note);
    }
    return found;
  }
  static std::vector<std::string> Lines(const DumpedBundle& dump, std::string_view stream) {
    std::vector<std::string> lines;
    for (size_t i = 0; i < dump.logs.size(); ++i) {
      if (dump.log_stream[i] == stream) lines.push_back(dump.log_text[i]);
    }
    return lines;
  }
  // Push/pop/mark events of a process, all threads.
  static size_t CountEvents(const DumpedProcess& process, std::string_view prefix) {
    size_t count = 0;
    for (const auto& [tid, events] : process.events) {
      for (const std::string& event : events) count += event.starts_with(prefix);
    }
    return count;
  }
};

// ---- the disk fills ----

// The traced process may write at most 32 KiB per file (RLIMIT_FSIZE set by the shell
// before exec, SIGXFSZ ignored, as with a full disk: write() fails, nothing is killed).
TEST_F(RecordFaults, DiskFullKeepsTheProgramRunningAndSaysWhatWasLost) {
  SKIP_WITHOUT_NVTX();
  constexpr long kPairs = 400000;
  RecordOptions options =
      Options("disk_full", {"/bin/sh", "-c", "trap '' XFSZ; ulimit -f 64; exec \"$0\" flood \"$1\"",
                            TELLER_RECORD_FAULTS_PROGRAM, std::to_string(kPairs)});
  auto result = RunRecord(options);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  // The program ran to its end and its status passed through.
  EXPECT_EQ(result->exit_code, 0);
  DumpedBundle dump = DumpBundle(options.output_dir);
  EXPECT_EQ(Lines(dump, "stdout"), std::vector<std::string>{"flood done 400000"});
  // It said so on its stderr once, and the launcher folded the notes into meta.json
  // and into what the CLI prints.
  std::vector<std::string> stderr_lines = Lines(dump, "stderr");
  ASSERT_EQ(stderr_lines.size(), 1u);
  EXPECT_NE(stderr_lines[0].find("teller: tracing disabled:"), std::string::npos);
  EXPECT_NE(stderr_lines[0].find("File too large"), std::string::npos) << stderr_lines[0];
  ASSERT_EQ(Notes(dump.meta, "capture: write failed, tracing stopped").size(), 1u);
  std::vector<std::string> lost = Notes(dump.meta, "capture: lost after a write error:");
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_TRUE(std::any_of(result->notes.begin(), result->notes.end(),
                          [&](const std::string& n) { return n == lost[0]; }));
  unsigned long long records = 0, events = 0, chunks = 0, bytes = 0;
  const std::string& note = lost[0];
  ASSERT_EQ(std::sscanf(note.c_str() + note.find("error: ") + 7,
                        "%llu records of the chunk that could not be written and %llu events "
                        "recorded after it; %llu chunks (%llu bytes)",
                        &records, &events, &chunks, &bytes),
            4)
      << note;
  EXPECT_GT(events, 0u);
  EXPECT_GT(chunks, 0u);
  EXPECT_LE(bytes, 64u * 512u);
  // What was written is readable and consistent with the count of what was lost.
  ASSERT_EQ(dump.processes.size(), 1u);
  // The early ranges were flushed before the flood filled the file.
  EXPECT_EQ(CountEvents(dump.processes[0], "push early"), 100u);
  const size_t read =
      CountEvents(dump.processes[0], "push") + CountEvents(dump.processes[0], "pop");
  EXPECT_LE(read + events, 2u * kPairs + 200u);
  EXPECT_EQ(dump.processes[0].exit.kind, capture::ExitKind::kExit);
}

// teller's own log writer hits the limit: the command still runs to its end, its
// output still passes through, and meta.json says how many lines the log lost.
TEST_F(RecordFaults, DiskFullWhileLoggingCountsTheLinesNotWritten) {
  constexpr int kLines = 3000;
  const std::string pass_path = base::TempDir("record_faults_log_full_out") + "/passthrough";
  RecordOptions options =
      Options("log_full",
              {"/bin/sh", "-c", "i=0; while [ $i -lt 3000 ]; do echo line $i; i=$((i+1)); done"});
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN);
    rlimit limit{64 << 10, 64 << 10};  // console.jsonl stops at 64 KiB
    setrlimit(RLIMIT_FSIZE, &limit);
    int pass_fd = open(pass_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    options.stdout_fd = pass_fd;
    auto result = RunRecord(options);
    _exit(!result.ok() ? 100 : result->exit_code);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // Every line passed through, although the log could not keep them all.
  std::string passed = *base::ReadFile(pass_path);
  EXPECT_EQ(std::count(passed.begin(), passed.end(), '\n'), kLines);
  DumpedBundle dump = DumpBundle(options.output_dir);
  std::vector<std::string> failed = Notes(dump.meta, "log capture failed: ");
  ASSERT_EQ(failed.size(), 1u);
  unsigned long long missing = 0, total = 0;
  ASSERT_EQ(std::sscanf(failed[0].c_str(), "log capture failed: %llu of %llu", &missing, &total), 2)
      << failed[0];
  EXPECT_EQ(total, static_cast<unsigned long long>(kLines));
  EXPECT_GT(missing, 0u);
  EXPECT_NE(failed[0].find("File too large"), std::string::npos) << failed[0];
  // The lines the log kept are the first ones, in order; at least those counted as kept.
  std::vector<std::string> kept = Lines(dump, "stdout");
  EXPECT_GE(kept.size(), kLines - missing);
  EXPECT_LT(kept.size(), static_cast<size_t>(kLines));
  for (size_t i = 0; i < kept.size(); ++i) EXPECT_EQ(kept[i], "line " + std::to_string(i));
  EXPECT_EQ(Notes(dump.meta, "command exit status 0").size(), 1u);
}

// ---- the output folder is unwritable ----

// Runs RunRecord in a child process as user nobody when this test runs as root (root
// writes into a mode-0555 folder); returns its error message, or "" when it succeeded.
std::string RecordAsUnprivileged(const RecordOptions& options) {
  int result_pipe[2];
  if (pipe(result_pipe) != 0) return "pipe failed";
  pid_t pid = fork();
  if (pid == 0) {
    close(result_pipe[0]);
    if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(3);
    auto result = RunRecord(options);
    std::string message = result.ok() ? "" : result.status().ToString();
    (void)!write(result_pipe[1], message.data(), message.size());
    _exit(0);
  }
  close(result_pipe[1]);
  std::string message;
  char buffer[1024];
  for (ssize_t n; (n = read(result_pipe[0], buffer, sizeof(buffer))) > 0;)
    message.append(buffer, n);
  close(result_pipe[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "child failed to run";
  return message;
}

TEST_F(RecordFaults, UnwritableOutputFolderFailsBeforeTheProgramStarts) {
  const std::string root = base::TempDir("record_faults_unwritable");
  const std::string marker_dir = root + "/markers";
  fs::create_directories(marker_dir);
  fs::permissions(marker_dir, fs::perms::all);
  const std::string read_only = root + "/read_only";
  fs::create_directories(read_only);
  fs::permissions(read_only, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                                 fs::perms::group_exec | fs::perms::others_read |
                                 fs::perms::others_exec);
  const std::string a_file = root + "/a_file";
  std::ofstream(a_file) << "x";
  fs::permissions(root, fs::perms::all);

  struct Case {
    std::string output;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {read_only, "output folder is not writable: Permission denied"},    // exists, 0555
      {read_only + "/run.teller", "cannot create the output folder"},     // below it
      {a_file + "/run.teller", "cannot create the output folder"},        // below a file
      {"/proc/teller-record-faults", "cannot create the output folder"},  // read-only fs
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string marker = marker_dir + "/ran-" + std::to_string(i);
    RecordOptions options = Options("unwritable_unused", {"/usr/bin/touch", marker});
    options.output_dir = cases[i].output;
    std::string message = RecordAsUnprivileged(options);
    EXPECT_NE(message.find(cases[i].output), std::string::npos) << i << ": " << message;
    EXPECT_NE(message.find(cases[i].expected), std::string::npos) << i << ": " << message;
    EXPECT_FALSE(fs::exists(marker)) << "the program ran for " << cases[i].output;
  }
  // The same command with a writable folder creates the marker: the check is real.
  const std::string marker = marker_dir + "/ran-ok";
  RecordOptions options = Options("unwritable_control", {"/usr/bin/touch", marker});
  fs::permissions(fs::path(options.output_dir).parent_path(), fs::perms::all);
  EXPECT_EQ(RecordAsUnprivileged(options), "");
  EXPECT_TRUE(fs::exists(marker));
}

// ---- the program exits by a signal ----

TEST_F(RecordFaults, ExitBySignalPassesThroughAndKeepsWhatWasFlushed) {
  SKIP_WITHOUT_NVTX();
  for (int signal : {SIGKILL, SIGSEGV, SIGTERM}) {
    SCOPED_TRACE(sigabbrev_np(signal));
    RecordOptions options =
        Options("signal_" + std::to_string(signal),
                {TELLER_RECORD_FAULTS_PROGRAM, "signal", std::to_string(signal)});
    auto result = RunRecord(options);
    ASSERT_TRUE(result.ok()) << result.status().ToString();
    EXPECT_EQ(result->exit_code, 128 + signal);  // the shell convention
    DumpedBundle dump = DumpBundle(options.output_dir);
    EXPECT_EQ(Notes(dump.meta, "command exit status " + std::to_string(128 + signal)).size(), 1u);
    EXPECT_EQ(Notes(dump.meta, fmt::format("ended abnormally: killed by signal {} (SIG{})", signal,
                                           sigabbrev_np(signal)))
                  .size(),
              1u);
    EXPECT_EQ(Lines(dump, "stdout"), std::vector<std::string>{"ready"});
    ASSERT_EQ(dump.processes.size(), 1u);
    // The 100 ranges before the flush are there whatever killed it.
    EXPECT_EQ(CountEvents(dump.processes[0], "push before"), 100u);
    EXPECT_EQ(CountEvents(dump.processes[0], "pop"), 100u);
    // Only the fatal-signal handler (SIGSEGV) flushes the last, unflushed range.
    EXPECT_EQ(CountEvents(dump.processes[0], "push unflushed"), signal == SIGSEGV ? 1u : 0u);
  }
}

// ---- 64 workers at once ----

TEST_F(RecordFaults, SixtyFourWorkersEachGetAFolderAndEveryLine) {
  SKIP_WITHOUT_NVTX();
  constexpr int kWorkers = 64, kLines = 50, kRanges = 200;
  RecordOptions options =
      Options("workers", {TELLER_RECORD_FAULTS_PROGRAM, "workers", std::to_string(kWorkers),
                          std::to_string(kLines), std::to_string(kRanges)});
  auto result = RunRecord(options);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->exit_code, 0);
  DumpedBundle dump = DumpBundle(options.output_dir);
  EXPECT_TRUE(dump.issues.empty());
  // One folder per worker (the parent emits nothing), each with its own ranges only.
  ASSERT_EQ(dump.processes.size(), static_cast<size_t>(kWorkers));
  std::set<std::string> workers_seen;
  std::set<int64_t> pids;
  for (const DumpedProcess& process : dump.processes) {
    pids.insert(process.pid);
    EXPECT_TRUE(process.dir.ends_with("-" + std::to_string(process.pid))) << process.dir;
    EXPECT_EQ(process.exit.kind, capture::ExitKind::kExit);
    ASSERT_EQ(process.events.size(), 1u) << process.dir;
    const std::vector<std::string>& events = process.events.begin()->second;
    ASSERT_EQ(events.size(), 2u + 2u * kRanges);
    workers_seen.insert(events.front());
    EXPECT_EQ(CountEvents(process, "push step"), static_cast<size_t>(kRanges));
    EXPECT_EQ(events.back(), "pop");
  }
  EXPECT_EQ(pids.size(), static_cast<size_t>(kWorkers));
  EXPECT_EQ(workers_seen.size(), static_cast<size_t>(kWorkers));
  // Every line of every worker, once, intact.
  std::vector<std::string> lines = Lines(dump, "stdout");
  EXPECT_EQ(lines.size(), static_cast<size_t>(kWorkers * kLines));
  std::map<std::string, int> counts;
  for (const std::string& line : lines) ++counts[line];
  for (int worker = 0; worker < kWorkers; ++worker) {
    for (int line = 0; line < kLines; ++line) {
      EXPECT_EQ(counts[fmt::format("worker {} line {}", worker, line)], 1)
          << "worker " << worker << " line " << line;
    }
  }
  EXPECT_TRUE(Notes(dump.meta, "ended abnormally").empty());
}

// ---- a worker that forks without exec ----

TEST_F(RecordFaults, ForkWithoutExecGivesTheChildItsOwnFolder) {
  SKIP_WITHOUT_NVTX();
  constexpr int kChildRanges = 50000;  // several drains of a 16384-event ring
  RecordOptions options =
      Options("fork", {TELLER_RECORD_FAULTS_PROGRAM, "fork", std::to_string(kChildRanges)});
  auto result = RunRecord(options);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->exit_code, 0);
  DumpedBundle dump = DumpBundle(options.output_dir);
  EXPECT_TRUE(dump.issues.empty());
  ASSERT_EQ(dump.processes.size(), 2u);
  const DumpedProcess* parent = nullptr;
  const DumpedProcess* child = nullptr;
  for (const DumpedProcess& process : dump.processes) {
    (process.pid == result->child_pid ? parent : child) = &process;
    EXPECT_TRUE(process.dir.ends_with("-" + std::to_string(process.pid))) << process.dir;
    EXPECT_EQ(process.exit.kind, capture::ExitKind::kExit) << process.dir;
  }
  ASSERT_NE(parent, nullptr);
  ASSERT_NE(child, nullptr);
  // The parent's file holds exactly the parent's events, the open range included.
  ASSERT_EQ(parent->events.size(), 1u);
  std::vector<std::string> expected_parent;
  for (int i = 0; i < 3; ++i)
    expected_parent.insert(expected_parent.end(), {"push parent-before", "pop"});
  expected_parent.push_back("push parent-open");
  for (int i = 0; i < 3; ++i)
    expected_parent.insert(expected_parent.end(), {"push parent-after", "pop"});
  expected_parent.push_back("pop");
  EXPECT_EQ(parent->events.begin()->second, expected_parent);
  // The child's folder holds its own ranges and nothing the parent had buffered.
  ASSERT_EQ(child->events.size(), 1u);
  const std::vector<std::string>& child_events = child->events.begin()->second;
  EXPECT_EQ(child_events.size(), 2u * kChildRanges);
  EXPECT_EQ(CountEvents(*child, "push child"), static_cast<size_t>(kChildRanges));
  EXPECT_EQ(CountEvents(*child, "push parent"), 0u);
  EXPECT_EQ(Lines(dump, "stdout"), std::vector<std::string>{"child done"});
}

// ---- secrets ----

TEST_F(RecordFaults, EnvironmentKeepsOnlyTheAllowListAndRedactsSecrets) {
  const std::map<std::string, std::string> env = {
      {"HOME", "/home/alice"},
      {"AWS_SECRET_ACCESS_KEY", "aws-secret-value"},
      {"HF_TOKEN", "hf_abcdefghijklmnopqrstuvwxyz0123"},
      {"OPENAI_API_KEY", "sk-live-value-1234567890abcdef"},
      {"DATABASE_URL", "postgres://app:pw-value@db:5432/x"},
      {"CUDA_VISIBLE_DEVICES", "0,1"},
      {"NCCL_DEBUG", "INFO"},
      {"NCCL_IB_PASSWORD", "nccl-pass-value"},
      {"VLLM_API_KEY", "vllm-key-value"},
      {"vllm_lower_token", "lower-token-value"},
      {"SGLANG_TOKEN_FILE", "/run/secrets/t"},
      {"TORCH_CREDENTIALS", "torch-cred-value"},
      {"TORCH_HOME", "/models/torch"},
      {"TRITON_CACHE_DIR", "/cache/triton"},
      {"RANK", "3"},
      {"MASTER_ADDR", "10.0.0.1"},
      {"VLLM_PROXY", "http://user:proxy-pass-value@proxy:3128"},
      {"PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"},
  };
  const std::vector<std::string> expected = {
      "env CUDA_VISIBLE_DEVICES=0,1",
      "env MASTER_ADDR=10.0.0.1",
      "env NCCL_DEBUG=INFO",
      "env NCCL_IB_PASSWORD=<redacted>",
      "env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
      "env RANK=3",
      "env SGLANG_TOKEN_FILE=<redacted>",
      "env TORCH_CREDENTIALS=<redacted>",
      "env TORCH_HOME=/models/torch",
      "env TRITON_CACHE_DIR=/cache/triton",
      "env VLLM_API_KEY=<redacted>",
      "env VLLM_PROXY=http://user:<redacted>@proxy:3128",
  };
  EXPECT_EQ(EnvironmentNotes(env), expected);

  // End to end: nothing of a secret reaches any file of the bundle.
  for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
  RecordOptions options = Options("env", {"/bin/true"});
  auto result = RunRecord(options);
  for (const auto& [name, value] : env) unsetenv(name.c_str());
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  std::string meta = *base::ReadFile(options.output_dir + "/meta.json");
  for (std::string_view secret :
       {"aws-secret-value", "hf_abcdefghijklmnopqrstuvwxyz0123", "sk-live-value", "pw-value",
        "nccl-pass-value", "vllm-key-value", "lower-token-value", "torch-cred-value",
        "proxy-pass-value", "/home/alice", "/run/secrets/t"}) {
    EXPECT_EQ(meta.find(secret), std::string::npos) << secret;
  }
  EXPECT_NE(meta.find("env VLLM_API_KEY=<redacted>"), std::string::npos);
  EXPECT_NE(meta.find("env TORCH_HOME=/models/torch"), std::string::npos);
}

TEST_F(RecordFaults, CommandLineCredentialsAreRedacted) {
  using capture::RedactCommandLine;
  const std::vector<std::string> argv = {
      "vllm",
      "serve",
      "meta-llama/Llama-3.1-8B",
      "--api-key",
      "key-value-1",
      "--token=token-value-2",
      "--hf_token",
      "token-value-3",
      "-password=pw-4",
      "--max-num-batched-tokens",
      "8192",
      "--tokenizer",
      "meta-llama/Llama-3.1-8B",
      "--ssl-keyfile",
      "/etc/tls/key.pem",
      "--disable-auth",
      "--port",
      "8000",
      "HF_TOKEN=env-value-5",
      "--header=Authorization: Bearer bearer-value-6",
      "--model-url=https://user:url-pass-7@hub.example/m",
      "--note=hf_abcdefghijklmnopqrstuvwx and ghp_abcdefghijklmnopqrstuvwxyz",
      "AKIAABCDEFGHIJKLMNOP"};
  const std::vector<std::string> expected = {"vllm",
                                             "serve",
                                             "meta-llama/Llama-3.1-8B",
                                             "--api-key",
                                             "<redacted>",
                                             "--token=<redacted>",
                                             "--hf_token",
                                             "<redacted>",
                                             "-password=<redacted>",
                                             "--max-num-batched-tokens",
                                             "8192",
                                             "--tokenizer",
                                             "meta-llama/Llama-3.1-8B",
                                             "--ssl-keyfile",
                                             "/etc/tls/key.pem",
                                             "--disable-auth",
                                             "--port",
                                             "8000",
                                             "HF_TOKEN=<redacted>",
                                             "--header=Authorization: Bearer <redacted>",
                                             "--model-url=https://user:<redacted>@hub.example/m",
                                             "--note=<redacted> and <redacted>",
                                             "<redacted>"};
  EXPECT_EQ(RedactCommandLine(argv), expected);
  EXPECT_TRUE(capture::IsSecretOptionName("apikey"));
  EXPECT_TRUE(capture::IsSecretOptionName("db-passwords"));
  EXPECT_FALSE(capture::IsSecretOptionName("max-tokens"));
  EXPECT_FALSE(capture::IsSecretOptionName("keyboard"));

  // meta.json and the process's own record (from /proc/self/cmdline) keep the
  // redacted form; the command itself got the real arguments.
  std::vector<std::string> command = {"/bin/sh", "-c",        "echo \"$2\"",
                                      "sh",      "--api-key", "key-value-1"};
  RecordOptions options = Options("argv", command);
  auto result = RunRecord(options);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  DumpedBundle dump = DumpBundle(options.output_dir);
  EXPECT_EQ(Lines(dump, "stdout"), std::vector<std::string>{"key-value-1"});
  command.back() = "<redacted>";
  EXPECT_EQ(dump.meta.command, command);
  EXPECT_EQ(base::ReadFile(options.output_dir + "/meta.json")->find("key-value-1"),
            std::string::npos);
}

TEST_F(RecordFaults, ProcessRecordsRedactTheirCommandLine) {
  SKIP_WITHOUT_NVTX();
  if (!fs::exists("/bin/bash")) GTEST_SKIP() << "no /bin/bash (for exec -a)";
  // The program runs with a token as its argv[0]: its ProcessInfo record (read from
  // /proc/self/cmdline by the injected library) must not carry it.
  RecordOptions options =
      Options("proc_argv", {"/bin/bash", "-c", "exec -a \"$0\" \"$1\" flood 10",
                            "hf_abcdefghijklmnopqrstuvwxyz", TELLER_RECORD_FAULTS_PROGRAM});
  auto result = RunRecord(options);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->exit_code, 0);
  DumpedBundle dump = DumpBundle(options.output_dir);
  ASSERT_EQ(dump.processes.size(), 1u);
  EXPECT_EQ(dump.processes[0].command, "<redacted> flood 10");
  EXPECT_EQ(dump.meta.command[3], "<redacted>");
}

// ---- no shell ----

TEST_F(RecordFaults, CommandRunsWithoutAShell) {
  const std::string dir = base::TempDir("record_faults_no_shell_markers");
  const std::string marker = dir + "/x";
  const std::vector<std::string> tricky = {
      "a; touch " + marker,       "$(touch " + marker + ")",
      "`touch " + marker + "`",   "b && touch " + marker + " | cat > " + marker,
      "'quoted' \"double\" \\ *", ""};
  std::vector<std::string> command = {"/usr/bin/printf", "%s\\n"};
  command.insert(command.end(), tricky.begin(), tricky.end());
  RecordOptions options = Options("no_shell", command);
  auto result = RunRecord(options);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->exit_code, 0);
  EXPECT_EQ(Lines(DumpBundle(options.output_dir), "stdout"), tricky);  // verbatim
  EXPECT_FALSE(fs::exists(marker));
  EXPECT_EQ(fs::directory_iterator(dir), fs::directory_iterator());  // nothing created
}

}  // namespace
}  // namespace teller::record
