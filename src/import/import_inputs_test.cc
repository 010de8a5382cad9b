#include "import/import_inputs.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "base/testing.h"
#include "import/input_format.h"

namespace teller::import {
namespace {

namespace fs = std::filesystem;

TEST(ImportInputsTest, RankComesFromTheFileName) {
  EXPECT_EQ(RankFromFileName("/x/trace_rank3.json.gz"), 3);
  EXPECT_EQ(RankFromFileName("worker-12.pt.trace.json"), 12);
  EXPECT_EQ(RankFromFileName("RANK_0.json"), 0);
  EXPECT_EQ(RankFromFileName("/rank9/trace.json"), -1);  // only the file name counts
  EXPECT_EQ(RankFromFileName("trace.json"), -1);
}

TEST(ImportInputsTest, TextThatOpensWithABracketOrBraceIsALogUnlessItIsATrace) {
  // Log prefixes: SGLang, TensorRT-LLM, dmesg, torch's per-rank prefix.
  for (std::string_view head :
       {"[2026-01-01 00:00:01 TP0] Prefill batch.\n", "[TensorRT-LLM][ERROR] CUDA runtime error\n",
        "[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79\n",
        "[rank0]:[E1206 18:44:12.715 ProcessGroupNCCL.cpp:607] x\n",
        "\n\n[2026-01-01 00:00:01] blank lines first\n",
        "{\"ts\": 1, \"msg\": \"json lines\"}\n{\"ts\": 2}\n",
        "{\"level\":\"ERROR\",\"schemaVersion\":1}\n{\"a\":1}\n", "plain text\n"}) {
    EXPECT_EQ(DetectFormatFromHead(head), InputFormat::kLog) << head;
  }
  for (std::string_view head :
       {"{\n  \"schemaVersion\": 1,\n  \"traceEvents\": [\n",
        "{\"traceEvents\": [{\"ph\": \"X\"}]}", "{\n  \"deviceProperties\": [\n",
        "[{\"name\": \"k\", \"ph\": \"X\"}]", "[\n  {\"name\": \"k\"},\n", "[]",
        // torch.autograd.profiler's export_chrome_trace without Kineto (Debian's 1.13)
        "[{\"name\": \"aten::zeros\", \"ph\": \"X\", \"ts\": 207, \"dur\": 45, \"tid\": 1, "
        "\"pid\": \"CPU functions\", \"args\": {}}, "}) {
    EXPECT_EQ(DetectFormatFromHead(head), InputFormat::kKineto) << head;
  }
}

TEST(ImportInputsTest, DirectoryOfFilesMergesInNameOrderWithOneSourceEach) {
  std::string dir = base::TempDir("import_inputs");
  std::string kineto = base::SourceDir() + "/tests/fixtures/kineto/legacy_2021.json";
  fs::copy_file(kineto, dir + "/b_rank1.json");
  fs::copy_file(kineto, dir + "/a_rank0.json");
  fs::copy_file(base::SourceDir() + "/tests/fixtures/logs/vllm_v1.log", dir + "/server.log");
  std::ofstream(dir + "/notes.md") << "ignored: not a trace or log name\n";
  model::Trace trace;
  auto imported = ImportInputs({dir}, {}, &trace);
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  ASSERT_EQ(imported->size(), 3u);
  EXPECT_EQ(fs::path((*imported)[0].path).filename(), "a_rank0.json");
  EXPECT_EQ((*imported)[2].format, InputFormat::kLog);
  EXPECT_GT((*imported)[2].logs_added, 0);
  EXPECT_EQ(trace.meta.sources.size(), 3u);
  ASSERT_EQ(trace.processes.size(), 2u);
  EXPECT_EQ(trace.processes.rank[0], 0);
  EXPECT_EQ(trace.processes.rank[1], 1);
  EXPECT_EQ(trace.meta.format, model::TraceFormat::kKineto);
}

TEST(ImportInputsTest, BadInputsAreClearErrors) {
  model::Trace trace;
  EXPECT_FALSE(ImportInputs({}, {}, &trace).ok());
  auto missing = ImportInputs({"/nonexistent/x.json"}, {}, &trace);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/x.json"), std::string::npos);
  std::string empty_dir = base::TempDir("import_inputs_empty");
  EXPECT_FALSE(ImportInputs({empty_dir}, {}, &trace).ok());
}

// An input whose every event was dropped is an error naming the file, the events read
// and the counters that dropped them, on both import paths (in order, and side by side).
TEST(ImportInputsTest, AnInputWithEveryEventDroppedIsAnError) {
  const std::string all_dropped = base::SourceDir() + "/tests/fixtures/kineto/all_dropped.json";
  for (int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    std::vector<std::string> paths = {all_dropped};
    if (threads > 1) paths.push_back(base::SourceDir() + "/tests/fixtures/kineto/legacy_2021.json");
    ImportOptions options;
    options.threads = threads;
    model::Trace trace;
    auto imported = ImportInputs(paths, options, &trace);
    ASSERT_FALSE(imported.ok());
    EXPECT_EQ(imported.status().message(),
              all_dropped +
                  ": 3 event(s) read and none kept: 2 dropped as kineto_event_bad_pid (host "
                  "events whose pid is missing, empty or neither a number nor a name), 1 as "
                  "kineto_event_missing_ts");
  }
}

// Nothing was dropped: no events at all, only metadata or counter events, a log, or
// some events kept beside dropped ones.
TEST(ImportInputsTest, InputsWithoutDroppedEventsAreNotErrors) {
  const std::string dir = base::TempDir("import_kept");
  const std::vector<std::pair<std::string, std::string>> files = {
      {"empty_array.json", "[]"},
      {"empty_events.json", R"({"traceEvents": []})"},
      {"metadata.json",
       R"([{"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "p"}},
           {"name": "mem", "ph": "C", "ts": 1, "pid": 1, "args": {"bytes": 1}}])"},
      {"some_kept.json",
       R"([{"name": "a", "ph": "X", "ts": 1, "dur": 1, "pid": "CPU functions", "tid": 1},
           {"name": "b", "ph": "X", "ts": 2, "dur": 1, "tid": 1}])"},
  };
  for (const auto& [name, text] : files) {
    SCOPED_TRACE(name);
    std::ofstream(dir + "/" + name) << text;
    model::Trace trace;
    auto imported = ImportInputs({dir + "/" + name}, {}, &trace);
    ASSERT_TRUE(imported.ok()) << imported.status().ToString();
    EXPECT_EQ(trace.events.size(), name == "some_kept.json" ? 1u : 0u);
  }
  model::Trace trace;
  auto logs = ImportInputs({base::SourceDir() + "/tests/fixtures/logs/vllm_v1.log"}, {}, &trace);
  ASSERT_TRUE(logs.ok()) << logs.status().ToString();
  EXPECT_EQ(trace.events.size(), 0u);
  EXPECT_GT(trace.logs.size(), 0u);
}

// The check compares counters from before the input with after, so counters of inputs
// merged earlier do not count; any other format has no dropping counters to report.
TEST(ImportInputsTest, CheckEventsKeptCountsOnlyThisInput) {
  model::Stats before;
  before.Increment(model::stat::kKinetoEventsRead, 5);
  before.Increment(model::stat::kKinetoEventBadTs, 5);
  model::Stats after = before;
  EXPECT_TRUE(CheckEventsKept("x.json", InputFormat::kKineto, before, after, 0).ok());
  after.Increment(model::stat::kKinetoEventsRead, 2);
  after.Increment(model::stat::kKinetoEventMissingName, 2);
  base::Status status = CheckEventsKept("x.json", InputFormat::kKineto, before, after, 0);
  EXPECT_EQ(status.message(),
            "x.json: 2 event(s) read and none kept: 2 dropped as kineto_event_missing_name "
            "(events without a name)");
  EXPECT_TRUE(CheckEventsKept("x.json", InputFormat::kKineto, before, after, 1).ok());
  EXPECT_TRUE(CheckEventsKept("x.log", InputFormat::kLog, model::Stats(), after, 0).ok());
  model::Stats nsys;
  nsys.Increment(model::stat::kNsysApiCallWithoutThread, 4);
  status = CheckEventsKept("x.sqlite", InputFormat::kNsys, model::Stats(), nsys, 0);
  EXPECT_EQ(status.message(),
            "x.sqlite: 4 event(s) read and none kept: 4 dropped as nsys_api_call_without_thread "
            "(API calls without a thread)");
}

// A Flight Recorder dump in JSON is told by its keys; its pickle form is refused with the
// line that converts it; a dump without a list of entries is an error naming the file.
TEST(ImportInputsTest, FlightRecorderDumpsAreToldAndTheirPickleIsExplained) {
  EXPECT_EQ(DetectFormatFromHead(R"({"version": "2.3", "pg_config": {}, "entries": []})"),
            InputFormat::kFlightRecorder);
  EXPECT_EQ(DetectFormatFromHead(R"({"entries": [], "pg_status": {}})"),
            InputFormat::kFlightRecorder);
  const std::string dir = base::TempDir("import_fr");
  const std::string pickle = dir + "/nccl_trace_rank_0";
  std::ofstream(pickle, std::ios::binary) << std::string("\x80\x04\x95\x10\x00", 5) << "entries";
  auto format = DetectFormat(pickle);
  ASSERT_FALSE(format.ok());
  EXPECT_NE(format.status().message().find("pickle"), std::string::npos);
  EXPECT_NE(format.status().message().find("json.dump(pickle.load("), std::string::npos);

  const std::string bad = dir + "/nccl_trace_rank_1.json";
  std::ofstream(bad) << R"({"version": "2.3", "pg_status": {}, "entries": 7})";
  model::Trace trace;
  auto imported = ImportInputs({bad}, {}, &trace);
  ASSERT_FALSE(imported.ok());
  EXPECT_NE(imported.status().message().find(bad), std::string::npos);
  EXPECT_NE(imported.status().message().find("\"entries\" is not a list"), std::string::npos);
}

}  // namespace
}  // namespace teller::import
