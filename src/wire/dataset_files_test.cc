#include "wire/dataset_files.h"

#include <gtest/gtest.h>

#include "base/file_util.h"
#include "base/testing.h"

namespace teller::wire {
namespace {

DatasetManifest FullManifest() {
  DatasetManifest manifest;
  manifest.preset = "small";
  manifest.seed = 20260101;
  ManifestBundle faulty;
  faulty.bundle = "sglang-000";
  faulty.engine = "sglang";
  faulty.seed = 18446744073709551615ull;
  faulty.model = "Qwen/Qwen3-8B (hybrid: Mamba2 every 4th layer)";
  faulty.fault = "gpu_throttle";
  faulty.category = "cuda_kernel";
  faulty.requests = {"sglang-000/req-0", "sglang-000/req-1"};
  faulty.faulty_requests = 1;
  faulty.engine_steps = 64;
  faulty.events = 123456;
  faulty.crashed = true;
  ManifestBundle normal;
  normal.bundle = "sglang-001";
  normal.engine = "sglang";
  manifest.bundles = {faulty, normal};
  return manifest;
}

DatasetSplits FullSplits() {
  DatasetSplits splits;
  splits.seed = 20260101;
  DatasetSplit requests{
      "request_disjoint", {}, {}, {{"train", {"a/1", "a/2"}}, {"val", {}}, {"test", {"b/1"}}}};
  DatasetSplit injection{"injection_disjoint",
                         std::vector<std::string>{"vllm_v1_offline"},
                         std::vector<std::string>{"sync_latency", "engine_pause"},
                         {{"train", {"a/1"}}, {"val", {"a/2"}}, {"test", {"b/1"}}}};
  splits.splits = {requests, injection};
  return splits;
}

TEST(DatasetFilesTest, ManifestWriteThenParseRoundTrips) {
  const std::string text = WriteManifestJson(FullManifest());
  auto parsed = ParseManifest(text, "ds/manifest.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(*parsed, FullManifest());
  EXPECT_EQ(WriteManifestJson(*parsed), text);
}

TEST(DatasetFilesTest, SplitsWriteThenParseRoundTrips) {
  const std::string text = WriteSplitsJson(FullSplits());
  auto parsed = ParseSplits(text, "ds/splits.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(*parsed, FullSplits());
  EXPECT_EQ(WriteSplitsJson(*parsed), text);
  ASSERT_NE(parsed->Find("injection_disjoint"), nullptr);
  EXPECT_EQ(parsed->Find("injection_disjoint")->FindPart("test")->keys,
            std::vector<std::string>{"b/1"});
  EXPECT_EQ(parsed->Find("bundle_disjoint"), nullptr);
  EXPECT_EQ(parsed->Find("request_disjoint")->FindPart("held_out_engines"), nullptr);
}

TEST(DatasetFilesTest, WritesTheSimulatorsLayout) {
  DatasetManifest manifest;
  manifest.preset = "p";
  manifest.seed = 3;
  ManifestBundle bundle;
  bundle.bundle = "b";
  bundle.engine = "e";
  manifest.bundles = {bundle};
  EXPECT_EQ(WriteManifestJson(manifest),
            "{\n \"preset\": \"p\",\n \"seed\": 3,\n \"bundles\": [\n  {\n   \"bundle\": \"b\",\n"
            "   \"engine\": \"e\",\n   \"seed\": 0,\n   \"model\": \"\",\n   \"fault\": \"none\",\n"
            "   \"category\": null,\n   \"requests\": [],\n   \"faulty_requests\": 0,\n"
            "   \"engine_steps\": 0,\n   \"events\": 0,\n   \"crashed\": false\n  }\n ]\n}\n");
  DatasetSplits splits;
  splits.seed = 3;
  splits.splits = {{"s", std::vector<std::string>{"e"}, std::nullopt, {{"train", {"b/1"}}}}};
  EXPECT_EQ(WriteSplitsJson(splits),
            "{\n \"seed\": 3,\n \"s\": {\n  \"held_out_engines\": [\n   \"e\"\n  ],\n"
            "  \"train\": [\n   \"b/1\"\n  ]\n }\n}\n");
}

TEST(DatasetFilesTest, FolderWriteThenReadRoundTrips) {
  const std::string folder = base::TempDir("dataset_files");
  ASSERT_TRUE(WriteDatasetFiles(folder, FullManifest(), FullSplits()).ok());
  auto manifest = ReadManifest(folder);
  ASSERT_TRUE(manifest.ok()) << manifest.status().ToString();
  EXPECT_EQ(*manifest, FullManifest());
  auto splits = ReadSplits(folder);
  ASSERT_TRUE(splits.ok()) << splits.status().ToString();
  EXPECT_EQ(*splits, FullSplits());
  auto missing = ReadManifest(folder + "/nothing");
  EXPECT_FALSE(missing.ok());
}

TEST(DatasetFilesTest, HandMadeManifestNeedsOnlyBundleNames) {
  auto parsed = ParseManifest(R"({"bundles": [{"bundle": "x"}]})", "m");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_FALSE(parsed->preset.has_value());
  EXPECT_FALSE(parsed->seed.has_value());
  ASSERT_EQ(parsed->bundles.size(), 1u);
  EXPECT_EQ(parsed->bundles[0].bundle, "x");
  EXPECT_EQ(parsed->bundles[0].fault, "none");
}

struct BadCase {
  const char* text;
  const char* message;
};

TEST(DatasetFilesTest, BadManifestsAreRefusedWithTheFieldAndWhatWasExpected) {
  const BadCase cases[] = {
      {"", "m: not valid JSON (expected a teller dataset manifest)"},
      {"{\"bundles\": [", "m: not valid JSON (expected a teller dataset manifest)"},
      {"[]", "m: expected {\"bundles\": [{\"bundle\": NAME, ...}]}"},
      {"{\"bundles\": {}}", "m: expected {\"bundles\": [{\"bundle\": NAME, ...}]}"},
      {R"({"bundles": [3]})", "m: bundles[0]: expected an object, got number"},
      {R"({"bundles": [{}]})",
       "m: bundles[0].bundle: expected the bundle's folder name (a string), got null"},
      {R"({"bundles": [{"bundle": 1}]})",
       "m: bundles[0].bundle: expected the bundle's folder name (a string), got number"},
      {R"({"preset": 1, "bundles": []})", "m: preset: expected a string, got number"},
      {R"({"seed": -4, "bundles": []})", "m: seed: expected a non-negative integer, got number"},
      {R"({"bundles": [{"bundle": "b", "requests": "b/1"}]})",
       "m: bundles[0].requests: expected an array, got string"},
      {R"({"bundles": [{"bundle": "b", "crashed": 0}]})",
       "m: bundles[0].crashed: expected true or false, got number"},
  };
  for (const BadCase& c : cases) {
    auto parsed = ParseManifest(c.text, "m");
    ASSERT_FALSE(parsed.ok()) << c.text;
    EXPECT_EQ(parsed.status().message(), c.message) << c.text;
  }
}

TEST(DatasetFilesTest, BadSplitsAreRefusedWithTheFieldAndWhatWasExpected) {
  const BadCase cases[] = {
      {"{", "s: not valid JSON (expected the splits of a teller dataset)"},
      {"[]", "s: expected an object of splits, got array"},
      {R"({"seed": "x"})", "s: seed: expected a non-negative integer, got string"},
      {R"({"request_disjoint": [1]})",
       "s: request_disjoint: expected a split (an object of parts), got array"},
      {R"({"r": {"train": "a/1"}})",
       "s: r.train: expected an array of \"bundle/request\" keys, got string"},
      {R"({"r": {"train": ["a/1", 2]}})", "s: r.train[1] is not a \"bundle/request\" string"},
      {R"({"r": {"held_out_engines": [1]}})",
       "s: r.held_out_engines[0]: expected a string, got number"},
  };
  for (const BadCase& c : cases) {
    auto parsed = ParseSplits(c.text, "s");
    ASSERT_FALSE(parsed.ok()) << c.text;
    EXPECT_EQ(parsed.status().message(), c.message) << c.text;
  }
}

// Every prefix of a valid file is refused or read, never a crash.
TEST(DatasetFilesTest, TruncatedFilesAreRefused) {
  const std::string manifest = WriteManifestJson(FullManifest());
  for (size_t n = 0; n + 1 < manifest.size(); n += 5) {
    EXPECT_FALSE(ParseManifest(manifest.substr(0, n), "m").ok()) << n;
  }
  const std::string splits = WriteSplitsJson(FullSplits());
  for (size_t n = 0; n + 1 < splits.size(); n += 5) {
    EXPECT_FALSE(ParseSplits(splits.substr(0, n), "s").ok()) << n;
  }
}

}  // namespace
}  // namespace teller::wire
