#include "report/text_report.h"

#include <gtest/gtest.h>

#include "report/report_test_trace.h"
#include "wire/bundle_meta.h"

namespace teller::report {
namespace {

TEST(TextReportTest, StepTreeAsTable) {
  model::Trace trace = MakeReportTestTrace();
  TreeOptions options;
  options.columns = *ParseTreeColumns("layer,name,dur_ns,depth,start_ns");
  auto step = FindStep(trace, 3, -1);
  ASSERT_TRUE(step.ok());
  EXPECT_EQ(RenderStepTree(trace, *step, options),
            "layer\tname\tdur_ns\tdepth\tstart_ns\n"
            "STEP\tdecode\t1100000\t0\t0\n"
            "FE\t<script>alert(1)</script>\t50000\t1\t1000\n"
            "RT\tcudaLaunchKernel\t5000\t2\t2000\n"
            "K\tgemm_fp16\t900000\t3\t10000\n");
}

TEST(TextReportTest, RequestTreesAndErrors) {
  model::Trace trace = MakeReportTestTrace();
  TreeOptions options;
  options.columns = *ParseTreeColumns("layer,depth");
  auto trees = RenderRequestTrees(trace, "r2", options);
  ASSERT_TRUE(trees.ok());
  EXPECT_EQ(*trees, "layer\tdepth\nSTEP\t0\nFE\t1\nRT\t2\nK\t3\n");
  EXPECT_FALSE(RenderRequestTrees(trace, "r9", options).ok());
  EXPECT_FALSE(FindStep(trace, 4, -1).ok());
  EXPECT_FALSE(ParseTreeColumns("layer,color").ok());
}

TEST(TextReportTest, LimitsSayWhatWasHidden) {
  model::Trace trace = MakeReportTestTrace();
  TreeOptions options;
  options.max_nodes = 2;
  std::string text = RenderStepTree(trace, model::StepIndex(0), options);
  EXPECT_NE(text.find("requests: r1,r2"), std::string::npos);
  EXPECT_NE(text.find("... 2 more nodes"), std::string::npos);
}

TEST(TextReportTest, SummaryAndStatsCountWhatIsThere) {
  model::Trace trace = MakeReportTestTrace();
  trace.stats.Increment("kineto_event_missing_ts", 2);
  std::string summary = RenderSummary(trace, 10);
  EXPECT_NE(summary.find("steps 1  requests 2  [1 from engine_step]"), std::string::npos);
  std::string stats = RenderStats(trace);
  EXPECT_NE(stats.find("kineto_event_missing_ts"), std::string::npos);
  EXPECT_NE(stats.find("\n  K     " + std::string(11, ' ') + "1\n"), std::string::npos);
}

// A bundle recorded with the Python hooks on but without a STEP range says so (the hooks
// did not reach the engine's step); with the step there, or the hooks off, nothing is said.
TEST(TextReportTest, SummarySaysWhenTheHooksRecordedNoStep) {
  const std::string line = "note: the Python hooks were on but no STEP hook fired";
  model::Trace trace = MakeReportTestTrace();
  wire::BundleMeta meta;
  meta.capture = {{"python_hooks", true, ""}};
  trace.meta.meta_json = *wire::FormatBundleMeta(meta);
  EXPECT_EQ(RenderSummary(trace, 10).find(line), std::string::npos);
  for (model::Layer& layer : trace.events.layer) {
    if (layer == model::Layer::kStep) layer = model::Layer::kFe;
  }
  trace.steps.source[0] = model::StepSource::kTopLevelRange;
  std::string summary = RenderSummary(trace, 10);
  EXPECT_NE(summary.find(line + " (no engine step range): the steps come from top_level_range;"),
            std::string::npos)
      << summary;
  meta.capture = {{"python_hooks", false, "--no-python-hooks"}};
  trace.meta.meta_json = *wire::FormatBundleMeta(meta);
  EXPECT_EQ(RenderSummary(trace, 10).find(line), std::string::npos);
}

}  // namespace
}  // namespace teller::report
