// The simulator's small preset through the foundation: every bundle imports and
// reconstructs with no error or data-loss counter, every engine step is found with
// its request ids, and every labelled request exists in the reconstructed trace.
#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/file_util.h"
#include "base/testing.h"
#include "sim/dataset.h"
#include "store/open_trace.h"

namespace teller {
namespace {

namespace fs = std::filesystem;

TEST(SynthDatasetTest, SmallPresetBundlesImportAndReconstructCleanly) {
  auto preset = sim::GetPreset("small");
  ASSERT_TRUE(preset.ok());
  sim::DatasetOptions options;
  options.output = base::TempDir("synth_small");
  auto summary = sim::BuildDataset(*preset, options);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  int bundles = 0;
  for (const auto& entry : fs::directory_iterator(options.output)) {
    if (!fs::exists(entry.path() / "meta.json")) continue;
    ++bundles;
    SCOPED_TRACE(entry.path().string());
    auto trace = store::OpenTrace({entry.path().string()}, {});
    ASSERT_TRUE(trace.ok()) << trace.status().ToString();
    for (const auto& [counter, stat] : trace->stats.entries()) {
      EXPECT_EQ(stat.severity, model::StatSeverity::kInfo) << counter << " = " << stat.value;
    }
    EXPECT_GT(trace->steps.size(), 0u);
    // Every collective sits on a collective kernel (graph replays share correlation ids).
    for (model::EventRow row : trace->collectives.event) {
      EXPECT_EQ(trace->events.layer[row.value()], model::Layer::kComm)
          << trace->str(trace->events.name[row.value()]);
    }
    for (model::StepSource source : trace->steps.source) {
      EXPECT_EQ(source, model::StepSource::kEngineStep);
    }
    auto labels = nlohmann::json::parse(trace->meta.labels_json, nullptr, false);
    ASSERT_FALSE(labels.is_discarded());
    ASSERT_TRUE(labels.contains("requests"));
    for (const auto& request : labels["requests"]) {
      std::string id = request["id"];
      EXPECT_TRUE(trace->strings.Find(id).valid()) << "labelled request " << id << " not in trace";
    }
  }
  EXPECT_GE(bundles, 5);  // one per engine at least
}

}  // namespace
}  // namespace teller
