#include "store/windowed_build.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "base/file_util.h"
#include "base/testing.h"
#include "import/kineto_testing.h"
#include "store/open_trace.h"
#include "store/trace_store.h"

namespace teller::store {
namespace {

using model::Trace;

// Events as (thread, name, start, duration, layer, correlation), sorted.
using EventKey = std::tuple<int64_t, std::string, int64_t, int64_t, int, int64_t>;
std::vector<EventKey> EventKeys(const Trace& trace) {
  std::vector<EventKey> keys;
  const model::EventTable& e = trace.events;
  for (size_t i = 0; i < e.size(); ++i) {
    keys.emplace_back(trace.threads.os_tid[e.thread[i].value()], std::string(trace.str(e.name[i])),
                      e.start_ns[i], e.dur_ns[i], static_cast<int>(e.layer[i]),
                      e.correlation[i].valid() ? int64_t{e.correlation[i].value()} : -1);
  }
  std::sort(keys.begin(), keys.end());
  return keys;
}

// Each step: number, start, end, name, and its tree as (depth, name, start) in pre-order.
using StepKey = std::tuple<int64_t, int64_t, int64_t, std::string,
                           std::vector<std::tuple<int, std::string, int64_t>>>;
std::vector<StepKey> StepKeys(const Trace& trace) {
  std::vector<StepKey> keys;
  const model::StepTable& s = trace.steps;
  for (size_t i = 0; i < s.size(); ++i) {
    std::vector<std::tuple<int, std::string, int64_t>> tree;
    for (uint32_t n = s.node_begin[i].value(); n < s.node_end[i].value(); ++n) {
      uint32_t event = trace.nodes.event[n].value();
      tree.emplace_back(trace.nodes.depth[n], std::string(trace.str(trace.events.name[event])),
                        trace.events.start_ns[event]);
    }
    keys.emplace_back(s.number[i], s.start_ns[i], s.end_ns[i], std::string(trace.str(s.name[i])),
                      std::move(tree));
  }
  std::sort(keys.begin(), keys.end());
  return keys;
}

Trace Load(const std::string& path) {
  base::StatusOr<Trace> trace = LoadTrace(path);
  EXPECT_TRUE(trace.ok()) << trace.status().ToString();
  return trace.ok() ? std::move(*trace) : Trace();
}

Trace BuildWhole(const std::string& input) {
  OpenOptions options;
  base::StatusOr<Trace> trace = OpenTrace({input}, options);
  EXPECT_TRUE(trace.ok()) << trace.status().ToString();
  return trace.ok() ? std::move(*trace) : Trace();
}

int64_t Stat(const Trace& trace, const std::string& name) {
  auto it = trace.stats.entries().find(name);
  return it == trace.stats.entries().end() ? 0 : it->second.value;
}

TEST(WindowedBuildTest, WindowsBuildTheSameStepsTreesAndEventsAsTheWholeTrace) {
  std::string dir = base::TempDir("windowed_build_same");
  auto engine = import::testing::MakeEngineTrace(import::testing::EngineTraceShape{});
  std::string input = dir + "/trace.json";
  ASSERT_TRUE(base::WriteFileAtomic(input, engine.json).ok());
  WindowedBuildOptions options;
  options.window_events = 50;
  base::StatusOr<WindowedBuildSummary> summary =
      BuildStoreWindowed(input, dir + "/windowed.db", options);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->windows, 8);
  EXPECT_EQ(summary->steps, 40);
  EXPECT_FALSE(std::filesystem::exists(dir + "/windowed.db.windows"));

  Trace whole = BuildWhole(input);
  Trace windowed = Load(dir + "/windowed.db");
  ASSERT_TRUE(windowed.reconstructed);
  EXPECT_EQ(EventKeys(windowed), EventKeys(whole));
  std::vector<StepKey> steps = StepKeys(windowed);
  EXPECT_EQ(steps, StepKeys(whole));
  // Steps without an input number are numbered 0..39 across the windows.
  ASSERT_EQ(steps.size(), 40u);
  EXPECT_EQ(std::get<0>(steps.front()), 0);
  EXPECT_EQ(std::get<0>(steps.back()), 39);
  EXPECT_EQ(windowed.processes.size(), whole.processes.size());
  EXPECT_EQ(windowed.threads.size(), whole.threads.size());
  EXPECT_EQ(windowed.processes.rank[0], 3);
  for (const char* counter :
       {"reconstruct_kernels_bound", "reconstruct_kernels_unbound", "reconstruct_nodes",
        "reconstruct_steps", "kineto_events_read", "kineto_events_imported"}) {
    EXPECT_EQ(Stat(windowed, counter), Stat(whole, counter)) << counter;
  }
  EXPECT_EQ(Stat(windowed, "build_windows"), 8);
  EXPECT_EQ(windowed.meta.sources, std::vector<std::string>{input});
  bool noted = false;
  for (const std::string& note : windowed.meta.notes) {
    EXPECT_EQ(note.find("window-0"), std::string::npos) << note;
    noted |= note.find("built in 8 time windows") != std::string::npos;
  }
  EXPECT_TRUE(noted);
}

TEST(WindowedBuildTest, AnImportOnlyBuildKeepsEveryEventAndBuildsNothing) {
  std::string dir = base::TempDir("windowed_build_import");
  auto engine = import::testing::MakeEngineTrace(import::testing::EngineTraceShape{});
  std::string input = dir + "/trace.json";
  ASSERT_TRUE(base::WriteFileAtomic(input, engine.json).ok());
  WindowedBuildOptions options;
  options.window_events = 70;
  options.reconstruct = false;
  auto summary = BuildStoreWindowed(input, dir + "/imported.db", options);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  Trace imported = Load(dir + "/imported.db");
  EXPECT_FALSE(imported.reconstructed);
  EXPECT_EQ(imported.steps.size(), 0u);
  OpenOptions whole_options;
  whole_options.reconstruct = false;
  base::StatusOr<Trace> whole = OpenTrace({input}, whole_options);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(EventKeys(imported), EventKeys(*whole));
  // The imported store reconstructs like the raw file.
  base::StatusOr<Trace> rebuilt = OpenTrace({dir + "/imported.db"}, OpenOptions());
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status().ToString();
  EXPECT_EQ(rebuilt->steps.size(), 40u);
}

// Recorded traces (../shared/real-traces): windows as small as the trace allows give
// the same events and steps as the whole build. Training traces have few quiet
// points, so some windows grow; that is reported, not an error.
TEST(WindowedBuildTest, RealTracesBuildTheSameInWindows) {
  std::string real = base::RealTracesDir();
  if (real.empty()) GTEST_SKIP() << "no ../shared/real-traces";
  std::string dir = base::TempDir("windowed_build_real");
  int checked = 0;
  for (const char* name : {"kineto__resnet50_worker0_legacy_schema.pt.trace.json.gz",
                           "hta__a100_2rank_nccl_rank0.json.gz",
                           "tracelens__mi300x_vllm_decode_cudagraph_step.json.gz"}) {
    std::string input = real + "/" + name;
    if (!std::filesystem::exists(input)) continue;
    WindowedBuildOptions options;
    options.window_events = 2000;
    std::string output = dir + "/" + std::to_string(checked) + ".db";
    auto summary = BuildStoreWindowed(input, output, options);
    ASSERT_TRUE(summary.ok()) << name << ": " << summary.status().ToString();
    Trace whole = BuildWhole(input);
    Trace windowed = Load(output);
    EXPECT_EQ(EventKeys(windowed), EventKeys(whole)) << name;
    EXPECT_EQ(StepKeys(windowed), StepKeys(whole)) << name;
    EXPECT_EQ(Stat(windowed, "reconstruct_kernels_bound"), Stat(whole, "reconstruct_kernels_bound"))
        << name;
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "none of the traces is there";
}

TEST(WindowedBuildTest, ChoosingWindowsAndBadInputsAreClearErrors) {
  std::string dir = base::TempDir("windowed_build_bad");
  auto engine = import::testing::MakeEngineTrace(import::testing::EngineTraceShape{});
  std::string input = dir + "/trace.json";
  ASSERT_TRUE(base::WriteFileAtomic(input, engine.json).ok());
  std::string log = dir + "/server.log";
  ASSERT_TRUE(base::WriteFileAtomic(log, "INFO 01-02 10:00:00 engine started\n").ok());

  // Automatic: a small file is built whole; asked for: windows; never: whole.
  EXPECT_EQ(*ChooseWindowEvents({input}, -1), 0);
  EXPECT_EQ(*ChooseWindowEvents({input}, 1000), 1000);
  EXPECT_EQ(*ChooseWindowEvents({input, log}, 0), 0);
  auto two = ChooseWindowEvents({input, log}, 1000);
  ASSERT_FALSE(two.ok());
  EXPECT_NE(two.status().message().find("exactly one Kineto JSON file"), std::string::npos);
  auto not_kineto = ChooseWindowEvents({log}, 1000);
  ASSERT_FALSE(not_kineto.ok());
  EXPECT_NE(not_kineto.status().message().find("not a Kineto JSON file"), std::string::npos);

  // The spill folder must be new; nothing is written when it is not.
  std::filesystem::create_directories(dir + "/busy");
  WindowedBuildOptions options;
  options.window_events = 50;
  options.spill_directory = dir + "/busy";
  auto busy = BuildStoreWindowed(input, dir + "/out.db", options);
  ASSERT_FALSE(busy.ok());
  EXPECT_NE(busy.status().message().find("busy"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir + "/out.db"));

  // A file cut short builds what it holds and says where it was cut.
  std::string cut = dir + "/cut.json";
  ASSERT_TRUE(base::WriteFileAtomic(cut, engine.json.substr(0, engine.json.size() * 2 / 3)).ok());
  options.spill_directory.clear();
  auto partial = BuildStoreWindowed(cut, dir + "/cut.db", options);
  ASSERT_TRUE(partial.ok()) << partial.status().ToString();
  Trace trace = Load(dir + "/cut.db");
  EXPECT_EQ(Stat(trace, "kineto_truncated_file"), 1);
  EXPECT_GT(trace.steps.size(), 20u);
  EXPECT_EQ(trace.stats.entries().find("kineto_truncated_file")->second.severity,
            model::StatSeverity::kDataLoss);
}

// A file whose every event is dropped is the error an ImportInputs gives, in windows too.
TEST(WindowedBuildTest, AFileWithEveryEventDroppedIsAnError) {
  std::string dir = base::TempDir("windowed_build_dropped");
  WindowedBuildOptions options;
  options.window_events = 1;
  std::string input = base::SourceDir() + "/tests/fixtures/kineto/all_dropped.json";
  auto built = BuildStoreWindowed(input, dir + "/out.db", options);
  ASSERT_FALSE(built.ok());
  EXPECT_EQ(built.status().message(),
            input +
                ": 3 event(s) read and none kept: 2 dropped as kineto_event_bad_pid (host events "
                "whose pid is missing, empty or neither a number nor a name), 1 as "
                "kineto_event_missing_ts");
}

}  // namespace
}  // namespace teller::store
