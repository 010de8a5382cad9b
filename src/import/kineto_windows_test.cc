#include "import/kineto_windows.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <random>

#include "base/file_util.h"
#include "base/testing.h"
#include "import/importer.h"
#include "import/kineto_testing.h"

namespace teller::import {
namespace {

using testing::EngineTraceShape;
using testing::MakeEngineTrace;

std::string WriteTrace(const std::string& dir, const std::string& json) {
  std::string path = dir + "/trace.json";
  base::Status status = base::WriteFileAtomic(path, json);
  EXPECT_TRUE(status.ok()) << status.ToString();
  return path;
}

// Every cut lies outside every step (a step with its kernels is one busy span).
void ExpectCutsOutsideSteps(const KinetoWindowPlan& plan,
                            const std::vector<std::pair<int64_t, int64_t>>& spans) {
  for (int64_t cut : plan.cuts_ts) {
    for (const auto& [begin, end] : spans) {
      EXPECT_FALSE(begin < cut && cut < end)
          << "cut at " << cut << " ns inside the step [" << begin << ", " << end << ")";
    }
  }
}

TEST(KinetoWindowsTest, CutsFallBetweenStepsAboutEveryWindowEvents) {
  std::string dir = base::TempDir("kineto_windows_cuts");
  EngineTraceShape shape;
  auto trace = MakeEngineTrace(shape);
  std::string path = WriteTrace(dir, trace.json);
  KinetoWindowOptions options;
  options.window_events = 50;  // 10 events per step: a cut every 5 steps
  base::StatusOr<KinetoWindowPlan> plan = PlanKinetoWindows(path, options);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->events, 2 + 40 * 10 + 1);
  EXPECT_EQ(plan->metadata_events, 2);
  EXPECT_EQ(plan->windows(), 8u);
  EXPECT_EQ(plan->windows_over_budget, 0);
  EXPECT_GE(plan->largest_window_events, 50);
  EXPECT_LT(plan->largest_window_events, 70);
  EXPECT_TRUE(plan->truncation.empty());
  ExpectCutsOutsideSteps(*plan, trace.step_spans_ns);
}

TEST(KinetoWindowsTest, WindowFilesHoldEveryEventOnceAndTheSharedFactsEach) {
  std::string dir = base::TempDir("kineto_windows_split");
  auto trace = MakeEngineTrace(EngineTraceShape{});
  std::string path = WriteTrace(dir, trace.json);
  KinetoWindowOptions options;
  options.window_events = 50;
  auto plan = PlanKinetoWindows(path, options);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  auto files = SplitKinetoWindows(path, *plan, dir, options);
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  ASSERT_EQ(files->size(), plan->windows());

  model::Trace whole;
  ASSERT_TRUE(ImportKineto(path, ImportOptions(), &whole).ok());
  std::vector<int64_t> whole_starts = whole.events.start_ns;
  std::vector<int64_t> window_starts;
  for (const std::string& file : *files) {
    model::Trace window;
    base::Status status = ImportKineto(file, ImportOptions(), &window);
    ASSERT_TRUE(status.ok()) << status.ToString();
    ASSERT_GT(window.events.size(), 0u) << file;
    // Metadata and top-level values are in every window.
    ASSERT_EQ(window.processes.size(), 1u);
    EXPECT_EQ(window.str(window.processes.name[0]), "vllm-engine");
    EXPECT_EQ(window.processes.rank[0], 3);
    window_starts.insert(window_starts.end(), window.events.start_ns.begin(),
                         window.events.start_ns.end());
  }
  std::sort(whole_starts.begin(), whole_starts.end());
  std::sort(window_starts.begin(), window_starts.end());
  EXPECT_EQ(window_starts, whole_starts);  // baseTimeNanoseconds applied in each window too
}

TEST(KinetoWindowsTest, WithoutAQuietPointTheWindowGrowsAndSaysSo) {
  std::string dir = base::TempDir("kineto_windows_busy");
  EngineTraceShape shape;
  shape.gap_us = 0;
  auto trace = MakeEngineTrace(shape);
  std::string path = WriteTrace(dir, trace.json);
  KinetoWindowOptions options;
  options.window_events = 50;
  auto plan = PlanKinetoWindows(path, options);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ExpectCutsOutsideSteps(*plan, trace.step_spans_ns);
  EXPECT_GE(plan->windows_over_budget, 1);
  EXPECT_GE(plan->largest_window_events, 400);
}

// The timeline keeps at most max_cells cells: on a long trace it coarsens, and a
// cut is still never inside a busy span.
TEST(KinetoWindowsTest, ACoarseTimelineStillCutsOnlyAtQuietPoints) {
  std::string dir = base::TempDir("kineto_windows_coarse");
  std::mt19937 random(5);
  for (int trial = 0; trial < 6; ++trial) {
    EngineTraceShape shape;
    shape.steps = 60;
    shape.gap_us = std::uniform_int_distribution<int64_t>(1, 3000)(random);
    shape.kernels_per_step = std::uniform_int_distribution<int>(1, 5)(random);
    auto trace = MakeEngineTrace(shape);
    std::string path = WriteTrace(dir, trace.json);
    KinetoWindowOptions options;
    options.window_events = std::uniform_int_distribution<int64_t>(5, 80)(random);
    options.finest_resolution_ns = 1'000;
    options.max_cells = 64;
    auto plan = PlanKinetoWindows(path, options);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    ExpectCutsOutsideSteps(*plan, trace.step_spans_ns);
    EXPECT_TRUE(std::is_sorted(plan->cuts_ts.begin(), plan->cuts_ts.end()));
  }
}

// Gaps between steps far shorter than the coarse cells: the refinement pass still
// finds a quiet instant near every window's target.
TEST(KinetoWindowsTest, ShortGapsOnALongTraceAreFoundByTheRefinementPass) {
  std::string dir = base::TempDir("kineto_windows_refine");
  EngineTraceShape shape;
  shape.steps = 200;
  shape.gap_us = 30;
  auto trace = MakeEngineTrace(shape);
  std::string path = WriteTrace(dir, trace.json);
  KinetoWindowOptions options;
  options.window_events = 100;  // 10 steps
  options.finest_resolution_ns = 1'000;
  options.max_cells = 256;
  auto plan = PlanKinetoWindows(path, options);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_LT(plan->resolution_ns, 30'000);  // the refined resolution, under the gaps
  EXPECT_GE(plan->windows(), 18u);
  EXPECT_EQ(plan->windows_over_budget, 0);
  ExpectCutsOutsideSteps(*plan, trace.step_spans_ns);
}

TEST(KinetoWindowsTest, ATruncatedFileIsPlannedFromTheEventsBeforeTheCut) {
  std::string dir = base::TempDir("kineto_windows_cut");
  auto trace = MakeEngineTrace(EngineTraceShape{});
  std::string path = WriteTrace(dir, trace.json.substr(0, trace.json.size() / 2));
  KinetoWindowOptions options;
  options.window_events = 50;
  auto plan = PlanKinetoWindows(path, options);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_NE(plan->truncation.find("JSON ends at byte"), std::string::npos) << plan->truncation;
  EXPECT_GT(plan->events, 100);
  EXPECT_LT(plan->events, 300);
}

// Inputs kineto_windows_fuzzer found (tests/fixtures/fuzz/kineto_windows_fuzzer), run
// as the fuzzer runs them; under ASan (the asan preset) they were heap overflows.
TEST(KinetoWindowsTest, FuzzFindingsStayFixed) {
  std::string fixtures = base::SourceDir() + "/tests/fixtures/fuzz/kineto_windows_fuzzer";
  std::string dir = base::TempDir("kineto_windows_fuzz");
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(fixtures)) {
    auto bytes = base::ReadFile(entry.path().string());
    ASSERT_TRUE(bytes.ok());
    KinetoWindowOptions options;
    options.window_events = 1 + static_cast<int64_t>(bytes->size() % 5);
    options.finest_resolution_ns = 1'000;
    options.max_cells = 32;
    auto plan = PlanKinetoWindows(entry.path().string(), options);
    ASSERT_TRUE(plan.ok()) << entry.path() << ": " << plan.status().ToString();
    EXPECT_TRUE(std::is_sorted(plan->cuts_ts.begin(), plan->cuts_ts.end()));
    auto files = SplitKinetoWindows(entry.path().string(), *plan, dir, options);
    ASSERT_TRUE(files.ok()) << files.status().ToString();
    EXPECT_EQ(files->size(), plan->windows());
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

TEST(KinetoWindowsTest, BadInputsAreClearErrors) {
  std::string dir = base::TempDir("kineto_windows_bad");
  KinetoWindowOptions options;
  options.window_events = 0;
  auto zero = PlanKinetoWindows(WriteTrace(dir, MakeEngineTrace({}).json), options);
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("window_events"), std::string::npos);
  options.window_events = 10;
  auto missing = PlanKinetoWindows(dir + "/none.json", options);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("none.json"), std::string::npos);
  auto no_events = PlanKinetoWindows(WriteTrace(dir, R"({"schemaVersion": 1})"), options);
  ASSERT_FALSE(no_events.ok());
  EXPECT_NE(no_events.status().message().find("no traceEvents"), std::string::npos);
}

}  // namespace
}  // namespace teller::import
