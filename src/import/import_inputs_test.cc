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
