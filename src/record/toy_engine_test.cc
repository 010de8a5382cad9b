// End to end: `teller record -- python3 tests/data/toy_engine.py` (the standalone
// teller_record_tool), then import + reconstruct with store::OpenTrace: engine steps
// with request ids on the engine process and both workers, and aligned logs.
#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "base/testing.h"
#include "capture/capture_test_util.h"
#include "store/open_trace.h"

namespace teller::record {
namespace {

using capture::testing::RunProgram;
using capture::testing::RunResult;

const char* kA = "cmpl-a1b2c3d4e5f60718293a4b5c6d7e8f90-0";
const char* kB = "cmpl-0f1e2d3c4b5a69788796a5b4c3d2e1f0-0";
const char* kC = "cmpl-77777777777777777777777777777777-0";

std::string Python() {
  return std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3" : "";
}

RunResult Record(const std::string& bundle, const std::vector<std::string>& command) {
  std::vector<std::string> argv = {base::BinaryDir() + "/teller_record_tool", "record", "-o",
                                   bundle, "--"};
  argv.insert(argv.end(), command.begin(), command.end());
  return RunProgram(argv, {"PYTHONDONTWRITEBYTECODE=1"});
}

bool HasNote(const std::vector<std::string>& notes, std::string_view text) {
  return std::any_of(notes.begin(), notes.end(),
                     [&](const std::string& n) { return n.find(text) != std::string::npos; });
}

TEST(ToyEngineTest, RecordImportReconstruct) {
  if (Python().empty()) GTEST_SKIP() << "no python3";
  std::string bundle = base::TempDir("toy_engine") + "/run.teller";
  RunResult run = Record(bundle, {Python(), base::SourceDir() + "/tests/data/toy_engine.py"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("Finished request " + std::string(kC)), std::string::npos);

  store::OpenOptions options;
  auto trace = store::OpenTrace({bundle}, options);
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  const model::Trace& t = *trace;
  EXPECT_EQ(t.processes.size(), 3u);  // engine core + 2 workers

  // Steps: 5 per process, numbered 0..4, with the batch's request ids and phase.
  const std::vector<std::vector<std::string>> kBatches = {
      {kA, kB}, {kA, kB}, {kC, kA, kB}, {kA, kB, kC}, {kB, kC}};
  const std::vector<model::StepPhase> kPhases = {
      model::StepPhase::kPrefill, model::StepPhase::kDecode, model::StepPhase::kMixed,
      model::StepPhase::kDecode, model::StepPhase::kDecode};
  ASSERT_EQ(t.steps.size(), 15u);
  std::map<uint32_t, int> steps_per_process;
  for (size_t s = 0; s < t.steps.size(); ++s) {
    EXPECT_EQ(t.steps.source[s], model::StepSource::kEngineStep);
    int64_t number = t.steps.number[s];
    ASSERT_GE(number, 0);
    ASSERT_LT(number, 5);
    ++steps_per_process[t.steps.process[s].value()];
    std::vector<std::string> ids;
    for (uint32_t r = 0; r < t.steps.requests_count[s]; ++r) {
      model::RequestIndex request = t.step_requests[t.steps.requests_begin[s] + r];
      ids.emplace_back(t.str(t.requests.id[request.value()]));
    }
    std::vector<std::string> expected = kBatches[number];
    std::sort(ids.begin(), ids.end());
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(ids, expected) << "step " << number;
    EXPECT_EQ(t.steps.phase[s], kPhases[number]) << "step " << number;
  }
  EXPECT_EQ(steps_per_process.size(), 3u);
  for (const auto& [process, count] : steps_per_process) EXPECT_EQ(count, 5);

  // Requests: each in its steps on all three processes.
  std::map<std::string, uint32_t> step_counts;
  for (size_t r = 0; r < t.requests.size(); ++r) {
    step_counts[std::string(t.str(t.requests.id[r]))] = t.requests.step_count[r];
  }
  EXPECT_EQ(step_counts, (std::map<std::string, uint32_t>{{kA, 12}, {kB, 15}, {kC, 9}}));

  // Logs: all 13 lines, the ones naming a request aligned by its id.
  EXPECT_EQ(t.logs.size(), 13u);
  size_t with_request = 0;
  for (size_t i = 0; i < t.logs.size(); ++i) {
    if (t.logs.request[i] == base::StringPool::kEmpty) continue;
    ++with_request;
    EXPECT_EQ(t.logs.alignment[i], model::LogAlignment::kRequestId) << t.str(t.logs.text[i]);
  }
  EXPECT_EQ(with_request, 9u);  // received, added, finished x 3
}

TEST(ToyEngineTest, CrashingWorkerLeavesItsStepsAndIsNamedInMeta) {
  if (Python().empty()) GTEST_SKIP() << "no python3";
  std::string bundle = base::TempDir("toy_engine_crash") + "/run.teller";
  RunResult run =
      Record(bundle, {Python(), base::SourceDir() + "/tests/data/toy_engine.py", "--crash-worker"});
  EXPECT_EQ(run.exit_code, 3) << run.output;
  capture::testing::DumpedBundle dump = capture::testing::DumpBundle(bundle);
  ASSERT_EQ(dump.processes.size(), 3u);
  int crashed = 0;
  for (const auto& process : dump.processes) {
    if (process.exit.kind != capture::ExitKind::kSignal) continue;
    ++crashed;
    EXPECT_EQ(process.exit.signal, SIGSEGV);
    // Steps 0..2 ran before the crash at step 3; the fatal-signal flush kept them.
    std::set<std::string> steps;
    for (const auto& range : process.host_ranges) steps.insert(range.args.at("step"));
    EXPECT_EQ(steps, (std::set<std::string>{"0", "1", "2"}));
  }
  EXPECT_EQ(crashed, 1);
  EXPECT_TRUE(HasNote(dump.meta.notes, "ended abnormally: killed by signal 11 (SIGSEGV)"));
  EXPECT_TRUE(HasNote(dump.meta.notes, "ended abnormally: exited with status 3"));
}

TEST(ToyEngineTest, PythonThatRaisesOrIsKilledIsNamedInMeta) {
  if (Python().empty()) GTEST_SKIP() << "no python3";
  const std::string fakes = base::SourceDir() + "/tests/data/fake_engines";
  const std::string prologue =
      "import os, sys; sys.path.insert(0, '" + fakes +
      "')\n"
      "from sglang.srt.managers.scheduler import Scheduler, ScheduleBatch, ForwardMode\n"
      "Scheduler().run_batch(ScheduleBatch(['x1'], ForwardMode.DECODE))\n";
  std::string raised = base::TempDir("toy_raise") + "/run.teller";
  RunResult run = Record(raised, {Python(), "-c", prologue + "raise ValueError('boom')"});
  EXPECT_EQ(run.exit_code, 1);
  capture::testing::DumpedBundle dump = capture::testing::DumpBundle(raised);
  ASSERT_EQ(dump.processes.size(), 1u);
  EXPECT_EQ(dump.processes[0].host_ranges.size(), 1u);  // flushed at exit
  EXPECT_TRUE(HasNote(dump.meta.notes, "ended abnormally: exited with status 1"));

  std::string killed = base::TempDir("toy_sigkill") + "/run.teller";
  run = Record(
      killed, {Python(), "-c", prologue + "import time; time.sleep(0.5); os.kill(os.getpid(), 9)"});
  EXPECT_EQ(run.exit_code, 128 + 9);
  dump = capture::testing::DumpBundle(killed);
  ASSERT_EQ(dump.processes.size(), 1u);
  EXPECT_EQ(dump.processes[0].host_ranges.size(), 1u);  // the timer flush kept it
  EXPECT_TRUE(HasNote(dump.meta.notes, "ended abnormally: killed by signal 9 (SIGKILL)"));
}

}  // namespace
}  // namespace teller::record
