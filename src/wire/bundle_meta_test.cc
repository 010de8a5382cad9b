#include "wire/bundle_meta.h"

#include <gtest/gtest.h>

namespace teller::wire {
namespace {

BundleMeta FullMeta() {
  BundleMeta meta;
  meta.tool_version = "0.1.0";
  meta.host = "node0";
  meta.command = {"vllm", "serve", "m\u00e9ta \"x\""};
  meta.start_time_ns = 1700000000123456789;
  meta.clock_pairs = {{1700000000123456789, 5000, 1700000000123999999},
                      {1700000001000000000, 6000, std::nullopt}};
  meta.hosts = {{"node1", {{1, 2, 3}}}};
  meta.ranks = {{0, 0, "node0", 11, 0}, {1, 0, "node1", 12, 0}};
  meta.devices = {{"node0", 0, "H100", "GPU-1"}};
  meta.capture = {{"cupti_activity", true, ""}, {"nvtx", false, "NVTX_INJECTION64_PATH was taken"}};
  meta.notes = {"first", "second"};
  return meta;
}

TEST(BundleMetaTest, FormatThenParseRoundTrips) {
  auto text = FormatBundleMeta(FullMeta());
  ASSERT_TRUE(text.ok());
  auto parsed = ParseBundleMeta(*text, "x/meta.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(*parsed, FullMeta());
  EXPECT_EQ(parsed->ClockPairsOf("node1").size(), 1u);
  EXPECT_EQ(parsed->ClockPairsOf("node0").size(), 2u);
  EXPECT_EQ(parsed->ClockPairsOf("elsewhere").size(), 2u);
}

TEST(BundleMetaTest, ErrorsNameTheFileAndTheField) {
  struct Case {
    const char* text;
    const char* message;
  };
  const Case cases[] = {
      {"{\"format\": \"teller-bundle\"", "m.json: not valid JSON at offset"},
      {"[1]", "m.json: top level: expected an object"},
      {"{\"format\": \"other\", \"format_version\": 1}",
       "m.json: format: expected \"teller-bundle\""},
      {"{\"format\": \"teller-bundle\"}", "m.json: format_version: missing"},
      {"{\"format\": \"teller-bundle\", \"format_version\": 2}",
       "m.json: format_version 2 is not supported"},
      {"{\"format\": \"teller-bundle\", \"format_version\": 1, \"clock_pairs\": "
       "[{\"realtime_ns\": 1, \"monotonic_ns\": 2}, {\"realtime_ns\": 1, \"monotonic_ns\": "
       "\"2\"}]}",
       "m.json: clock_pairs[1].monotonic_ns: expected an integer, got string"},
      {"{\"format\": \"teller-bundle\", \"format_version\": 1, \"hosts\": [{\"name\": \"a\", "
       "\"clock_pairs\": [{\"realtime_ns\": 1}]}]}",
       "m.json: hosts[0].clock_pairs[0].monotonic_ns: missing"},
      {"{\"format\": \"teller-bundle\", \"format_version\": 1, \"capture\": [{\"enabled\": 1}]}",
       "m.json: capture[0].enabled: expected true or false"},
  };
  for (const Case& c : cases) {
    auto parsed = ParseBundleMeta(c.text, "m.json");
    ASSERT_FALSE(parsed.ok()) << c.text;
    EXPECT_NE(parsed.status().message().find(c.message), std::string::npos)
        << parsed.status().message();
  }
}

TEST(BundleMetaTest, OptionalFieldsMayBeAbsent) {
  auto parsed = ParseBundleMeta("{\"format\": \"teller-bundle\", \"format_version\": 1}", "m.json");
  ASSERT_TRUE(parsed.ok());
  EXPECT_TRUE(parsed->clock_pairs.empty());
  EXPECT_TRUE(parsed->host.empty());
}

}  // namespace
}  // namespace teller::wire
