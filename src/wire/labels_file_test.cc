#include "wire/labels_file.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>

#include "base/testing.h"

namespace teller::wire {
namespace {

Labels FullLabels() {
  Labels labels;
  labels.run_id = "vllm_v0-003";
  labels.engine = "vllm_v0";
  labels.seed = 18446744073709551615ull;
  labels.model = {"Qwen/Qwen3-8B", 8, 4};
  labels.cluster = {2, 3, 3, 2, "NVIDIA A40"};
  LabelsFault fault;
  fault.index = 0;
  fault.mechanism = "gpu_throttle";
  fault.category = "cuda_kernel";
  fault.magnitude = 0.35000000000000003;
  fault.magnitude_unit = "slowdown";
  fault.onset_step = 12;
  fault.duration_steps = 6;
  fault.target.rank = 4;
  fault.target.gpu = 1;
  fault.target.family = "gemm";
  fault.leaves_logs = false;
  fault.log_lines = 0;
  fault.manifested = true;
  fault.affected_steps = {12, 13};
  fault.affected_requests = {"req-1"};
  fault.affected_families = {"gemm", "attention"};
  fault.window_realtime_ns =
      std::make_pair(int64_t{1700000000000000000}, int64_t{1700000000500000000});
  fault.explanations = {"GPU throttling on rank 4 \"quoted\" caf\u00e9", "second"};
  fault.effect = {2, 1, 0.25, 40, 12};
  labels.faults = {fault, LabelsFault{}};
  LabelsRequest request;
  request.id = "req-1";
  request.is_fault = true;
  request.fault_type = "cuda_kernel";
  request.fault = 0;
  request.steps = {11, 12, 13};
  request.prompt_tokens = 100;
  request.output_tokens = 20;
  request.generated_tokens = 20;
  request.preemptions = 1;
  request.state = "finished";
  request.arrival_realtime_ns = 1700000000000000001;
  request.finish_realtime_ns = 1700000000900000000;
  request.dp_rank = 0;
  request.latency_delta_ns = 4500000;
  request.queue_delta_ns = -3;
  labels.requests = {request, LabelsRequest{}};
  LabelsStep step;
  step.step = 12;
  step.phase = "decode";
  step.is_anomaly = true;
  step.fault = 0;
  step.benign = "gc";
  step.requests = {"req-1"};
  step.events = 420;
  step.delta_ns = 1200000;
  step.duration_moved = true;
  step.paired = false;
  step.ranks = {{4, true, 1200000, true}, {5, false, -20, false}};
  labels.steps = {step, LabelsStep{}};
  labels.affected_operators = {
      {12, 4, "K", "ampere_sgemm", "gemm", {0, 3}, "culprit", "timing", {300, 410}, {1.3, 1.41}},
      {12,
       5,
       "K",
       "ncclDevKernel_AllReduce",
       "communication",
       {1},
       "victim",
       "timing",
       {290},
       {2.5}}};
  labels.twin = {30, 2, 0.011};
  return labels;
}

TEST(LabelsFileTest, WriteThenParseRoundTrips) {
  const std::string text = WriteLabelsJson(FullLabels());
  auto parsed = ParseLabels(text, "run");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(*parsed, FullLabels());
  EXPECT_EQ(WriteLabelsJson(*parsed), text);
}

TEST(LabelsFileTest, WritesTheSimulatorsLayout) {
  Labels labels;
  labels.schema = kLabelsSchemaV1;
  labels.run_id = "r";
  labels.engine = "sglang";
  labels.seed = 7;
  labels.model = {"m", 2, 0};
  labels.cluster = {1, 2, 2, 1, "g"};
  labels.affected_operators = {{1, 0, "K", "k", "gemm", {2}, "culprit", "timing", {}, {}}};
  EXPECT_EQ(WriteLabelsJson(labels),
            "{\n"
            " \"schema\": \"teller-labels/1\",\n"
            " \"run_id\": \"r\",\n"
            " \"engine\": \"sglang\",\n"
            " \"seed\": 7,\n"
            " \"model\": {\n  \"name\": \"m\",\n  \"layers\": 2,\n  \"mamba_period\": 0\n },\n"
            " \"cluster\": {\n  \"nodes\": 1,\n  \"gpus_per_node\": 2,\n  \"tp\": 2,\n"
            "  \"pp\": 1,\n  \"gpu\": \"g\"\n },\n"
            " \"faults\": [],\n"
            " \"requests\": [],\n"
            " \"steps\": [],\n"
            " \"affected_operators\": [\n  {\n   \"step\": 1,\n   \"rank\": 0,\n"
            "   \"layer\": \"K\",\n   \"name\": \"k\",\n   \"family\": \"gemm\",\n"
            "   \"ordinals\": [\n    2\n   ]\n  }\n ]\n"
            "}\n");
}

// A /1 file reads with the /2 fields at their defaults and writes back as it was.
TEST(LabelsFileTest, VersionOneFilesStillReadAndRewriteUnchanged) {
  Labels v1 = FullLabels();
  v1.schema = kLabelsSchemaV1;
  const std::string text = WriteLabelsJson(v1);
  EXPECT_EQ(text.find("\"role\""), std::string::npos);
  EXPECT_EQ(text.find("\"twin\""), std::string::npos);
  auto parsed = ParseLabels(text, "run");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->schema, kLabelsSchemaV1);
  EXPECT_EQ(parsed->affected_operators[1].role, "culprit");
  EXPECT_TRUE(parsed->affected_operators[0].delta_ns.empty());
  EXPECT_FALSE(parsed->steps[0].duration_moved);
  EXPECT_EQ(WriteLabelsJson(*parsed), text);
}

// /2 keys in a /1 file (labels_fuzzer found one) are ignored: the file means the /1
// defaults, so what it reads writes back and reads again to the same labels.
TEST(LabelsFileTest, VersionOneFilesIgnoreVersionTwoKeys) {
  const std::string path =
      base::SourceDir() + "/tests/fixtures/fuzz/labels_fuzzer/v1-file-with-v2-keys.json";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto parsed = ParseLabels(text, "run");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->faults[0].effect, LabelsEffect{});
  EXPECT_FALSE(parsed->requests[0].latency_delta_ns.has_value());
  EXPECT_EQ(parsed->steps[0].delta_ns, 0);
  EXPECT_TRUE(parsed->steps[0].paired);
  EXPECT_TRUE(parsed->steps[0].ranks.empty());
  EXPECT_EQ(parsed->affected_operators[0].kind, "timing");
  EXPECT_EQ(parsed->twin, LabelsTwin{});
  auto again = ParseLabels(WriteLabelsJson(*parsed), "again");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, *parsed);
}

TEST(LabelsFileTest, AbsentFieldsKeepTheirDefaults) {
  auto parsed = ParseLabels(
      R"({"schema": "teller-labels/1", "faults": [{}], "requests": [{"id": "a"}],
          "steps": [{"is_anomaly": true}], "affected_operators": [{"layer": "K"}]})",
      "run");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->faults[0].mechanism, "unknown");
  EXPECT_FALSE(parsed->faults[0].manifested);
  EXPECT_FALSE(parsed->requests[0].fault.has_value());
  EXPECT_EQ(parsed->steps[0].step, -1);
  EXPECT_EQ(parsed->affected_operators[0].rank, -1);
  EXPECT_TRUE(parsed->affected_operators[0].ordinals.empty());
}

// Every refusal names the source, the field and what was expected; nothing throws.
TEST(LabelsFileTest, BadInputsAreRefusedWithTheFieldAndWhatWasExpected) {
  struct Case {
    const char* text;
    const char* message;
  };
  const Case cases[] = {
      {"", "run: labels.json is not a JSON object"},
      {"[1, 2]", "run: labels.json is not a JSON object"},
      {"{\"schema\": \"teller-labels/1\"", "run: labels.json is not a JSON object"},
      {"{}", "run: labels.json schema is \"\", expected teller-labels/2 or teller-labels/1"},
      {"{\"fault\": null}",
       "run: labels.json schema is \"\", expected teller-labels/2 or teller-labels/1"},
      {"{\"schema\": 2}",
       "run: labels.json schema is \"2\", expected teller-labels/2 or teller-labels/1"},
      {R"({"schema": "teller-labels/1", "seed": -1})",
       "run: labels.json: seed: expected a non-negative integer, got number"},
      {R"({"schema": "teller-labels/1", "model": []})",
       "run: labels.json: model: expected an object, got array"},
      {R"({"schema": "teller-labels/1", "faults": {}})",
       "run: labels.json: faults: expected an array, got object"},
      {R"({"schema": "teller-labels/1", "faults": [3]})",
       "run: labels.json: faults[0]: expected an object, got number"},
      {R"({"schema": "teller-labels/1", "faults": [{"mechanism": 5}]})",
       "run: labels.json: faults[0].mechanism: expected a string, got number"},
      {R"({"schema": "teller-labels/1", "faults": [{"target": {"rank": "4"}}]})",
       "run: labels.json: faults[0].target.rank: expected an integer, got string"},
      {R"({"schema": "teller-labels/1", "faults": [{"magnitude": "big"}]})",
       "run: labels.json: faults[0].magnitude: expected a finite number, got string"},
      {R"({"schema": "teller-labels/1", "faults": [{"window_realtime_ns": [1]}]})",
       "run: labels.json: faults[0].window_realtime_ns: expected [first_ns, last_ns] or null, "
       "got array"},
      {R"({"schema": "teller-labels/1", "requests": [{"fault": 1.5}]})",
       "run: labels.json: requests[0].fault: expected an integer, got number"},
      {R"({"schema": "teller-labels/1", "requests": [{"fault": 3000000000}]})",
       "run: labels.json: requests[0].fault: expected an integer, got number"},
      {R"({"schema": "teller-labels/1", "steps": [{"requests": ["a", 1]}]})",
       "run: labels.json: steps[0].requests[1]: expected a string, got number"},
      {R"({"schema": "teller-labels/1", "affected_operators": [{"ordinals": [0, null]}]})",
       "run: labels.json: affected_operators[0].ordinals[1]: expected an integer, got null"},
      {R"({"schema": "teller-labels/2", "affected_operators": [{"ordinals": [0], "ratio": [1, 2]}]})",
       "run: labels.json: affected_operators[0].ratio: expected 1 values, one per ordinal, got "
       "array"},
      {R"({"schema": "teller-labels/2", "steps": [{"ranks": [{"delta_ns": "x"}]}]})",
       "run: labels.json: steps[0].ranks[0].delta_ns: expected an integer, got string"},
      {R"({"schema": "teller-labels/2", "twin": []})",
       "run: labels.json: twin: expected an object, got array"},
  };
  for (const Case& c : cases) {
    auto parsed = ParseLabels(c.text, "run");
    ASSERT_FALSE(parsed.ok()) << c.text;
    EXPECT_EQ(parsed.status().message(), c.message) << c.text;
  }
}

// Every prefix of a valid document is refused or read, never a crash.
TEST(LabelsFileTest, TruncatedDocumentsAreRefused) {
  const std::string text = WriteLabelsJson(FullLabels());
  for (size_t n = 0; n + 1 < text.size(); n += 7) {
    auto parsed = ParseLabels(text.substr(0, n), "run");
    EXPECT_FALSE(parsed.ok()) << n;
  }
}

}  // namespace
}  // namespace teller::wire
