// The simulator's small preset through the foundation: every bundle imports and
// reconstructs with no error or data-loss counter, every engine step is found with
// its request ids, and every labelled request exists in the reconstructed trace; the
// dataset's files read and write back byte for byte through src/wire.
#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/file_util.h"
#include "base/testing.h"
#include "sim/dataset.h"
#include "store/open_trace.h"
#include "wire/dataset_files.h"
#include "wire/labels_file.h"

namespace teller {
namespace {

namespace fs = std::filesystem;

// The small preset, built once for every test of this file.
const std::string& SmallDataset() {
  static const std::string folder = [] {
    auto preset = sim::GetPreset("small");
    EXPECT_TRUE(preset.ok());
    sim::DatasetOptions options;
    options.output = base::TempDir("synth_small");
    auto summary = sim::BuildDataset(*preset, options);
    EXPECT_TRUE(summary.ok()) << summary.status().ToString();
    return options.output;
  }();
  return folder;
}

TEST(SynthDatasetTest, SmallPresetBundlesImportAndReconstructCleanly) {
  int bundles = 0;
  for (const auto& entry : fs::directory_iterator(SmallDataset())) {
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

// The simulator's manifest.json, splits.json and labels.json read through the wire
// readers and written back by the wire writers give the same bytes.
TEST(SynthDatasetTest, DatasetFilesReadAndWriteBackByteForByte) {
  const std::string folder = SmallDataset();
  auto manifest_text = base::ReadFile(folder + "/manifest.json");
  ASSERT_TRUE(manifest_text.ok());
  auto manifest = wire::ReadManifest(folder);
  ASSERT_TRUE(manifest.ok()) << manifest.status().ToString();
  EXPECT_EQ(wire::WriteManifestJson(*manifest), *manifest_text);
  auto splits_text = base::ReadFile(folder + "/splits.json");
  ASSERT_TRUE(splits_text.ok());
  auto splits = wire::ReadSplits(folder);
  ASSERT_TRUE(splits.ok()) << splits.status().ToString();
  EXPECT_EQ(wire::WriteSplitsJson(*splits), *splits_text);
  ASSERT_NE(splits->Find("bundle_disjoint"), nullptr);
  ASSERT_NE(splits->Find("injection_disjoint"), nullptr);
  EXPECT_TRUE(splits->Find("injection_disjoint")->held_out_mechanisms.has_value());

  int faulty = 0;
  ASSERT_GE(manifest->bundles.size(), 5u);
  for (const wire::ManifestBundle& bundle : manifest->bundles) {
    SCOPED_TRACE(bundle.bundle);
    auto text = base::ReadFile(folder + "/" + bundle.bundle + "/labels.json");
    ASSERT_TRUE(text.ok()) << text.status().ToString();
    auto labels = wire::ParseLabels(*text, bundle.bundle);
    ASSERT_TRUE(labels.ok()) << labels.status().ToString();
    EXPECT_EQ(wire::WriteLabelsJson(*labels), *text);
    EXPECT_EQ(labels->run_id, bundle.bundle);
    EXPECT_EQ(labels->engine, bundle.engine);
    EXPECT_EQ(labels->requests.size(), bundle.requests.size());
    faulty += !labels->faults.empty();
  }
  EXPECT_GT(faulty, 0);
}

}  // namespace
}  // namespace teller
