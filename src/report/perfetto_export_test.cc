#include "report/perfetto_export.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/file_util.h"
#include "base/testing.h"
#include "report/report_test_trace.h"

namespace teller::report {
namespace {

TEST(PerfettoExportTest, WritesValidChromeTraceWithFlowsAndRequests) {
  model::Trace trace = MakeReportTestTrace();
  std::string path = base::TempDir("perfetto") + "/trace.json";
  ASSERT_TRUE(ExportPerfetto(trace, path, {}).ok());
  auto json = nlohmann::json::parse(*base::ReadFile(path));
  EXPECT_EQ(json["otherData"]["teller_origin_ns"].get<int64_t>(), 1700000000000000000);
  int complete = 0, flow_start = 0, flow_end = 0;
  for (const auto& event : json["traceEvents"]) {
    std::string ph = event["ph"];
    if (ph == "X") {
      ++complete;
      if (event["name"] == "decode") {
        EXPECT_EQ(event["args"]["requests"], "r1,r2");
        EXPECT_EQ(event["args"]["phase"], "decode");
      }
      if (event["name"] == "gemm_fp16") {
        EXPECT_DOUBLE_EQ(event["ts"].get<double>(), 10.0);
        EXPECT_DOUBLE_EQ(event["dur"].get<double>(), 900.0);
      }
    }
    if (ph == "s") ++flow_start;
    if (ph == "f") ++flow_end;
  }
  EXPECT_EQ(complete, 4);
  EXPECT_EQ(flow_start, 1);  // the launch -> kernel flow only
  EXPECT_EQ(flow_end, 1);
  // Names taken from a trace never appear as raw markup.
  EXPECT_EQ(base::ReadFile(path)->find("<script>"), std::string::npos);
}

TEST(PerfettoExportTest, WindowKeepsOnlyOverlappingEvents) {
  model::Trace trace = MakeReportTestTrace();
  std::string path = base::TempDir("perfetto_window") + "/trace.json";
  PerfettoOptions options;
  options.window_start_ns = 1700000000000000000 + 60000;
  options.window_end_ns = 1700000000000000000 + 70000;
  ASSERT_TRUE(ExportPerfetto(trace, path, options).ok());
  auto json = nlohmann::json::parse(*base::ReadFile(path));
  std::vector<std::string> names;
  for (const auto& event : json["traceEvents"]) {
    if (event["ph"] == "X") names.push_back(event["name"]);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"decode", "gemm_fp16"}));
}


}  // namespace
}  // namespace teller::report
