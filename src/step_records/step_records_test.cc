#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "base/testing.h"
#include "sim/simulated_trace_testing.h"
#include "step_records/dataset.h"
#include "step_records/dataset_testing.h"
#include "step_records/record_features.h"
#include "step_records/step_records.h"

namespace teller::step_records {
namespace {

using Json = nlohmann::json;

RecordSet RecordsOf(const model::Trace& trace) {
  RecordSet set;
  RecordOptions options;
  options.bundle = "run";
  EXPECT_TRUE(AddTraceRecords(trace, options, &set).ok());
  return set;
}

TEST(StepRecords, OneRecordPerRequestStepWithAlignedNodeColumns) {
  const model::Trace trace = sim::SimulatedTrace("", "records_normal");
  const RecordSet set = RecordsOf(trace);
  Json labels = Json::parse(trace.meta.labels_json);
  size_t expected = 0;
  for (const Json& r : labels["requests"]) expected += r["steps"].size();
  EXPECT_EQ(set.records.size(), expected);
  for (const StepRecord& record : set.records) {
    ASSERT_TRUE(tpe::ValidateSerialization(record.serialization).ok());
    const size_t nodes = record.serialization.node_count();
    EXPECT_EQ(record.node_rank.size(), nodes);
    EXPECT_EQ(record.node_layer.size(), nodes);
    EXPECT_EQ(record.node_family.size(), nodes);
    EXPECT_EQ(record.node_affected.size(), nodes);
    for (size_t k = 0; k < nodes; ++k) {
      EXPECT_EQ(set.symbols.Get(record.serialization.symbol[2 * k]),
                set.symbols.Get(tpe::SymbolTable::LayerSymbol(record.node_layer[k])));
    }
    EXPECT_TRUE(record.has_labels);
    EXPECT_FALSE(record.is_anomaly);
    EXPECT_EQ(record.mechanism, "none");
    EXPECT_GT(record.duration_ns, 0);
    EXPECT_FALSE(record.ranks.empty());
  }
  EXPECT_EQ(set.label_instances, 0);
}

TEST(StepRecords, FaultLabelsReachRecordsAndNodes) {
  const model::Trace trace = sim::SimulatedTrace("gpu_throttle:rank=1", "records_throttle");
  const RecordSet set = RecordsOf(trace);
  size_t anomalous = 0;
  for (const StepRecord& record : set.records) {
    if (!record.is_anomaly) {
      EXPECT_EQ(record.fault_type, diagnose::FaultCategory::kNone);
      continue;
    }
    ++anomalous;
    EXPECT_TRUE(record.request_faulty);
    EXPECT_EQ(record.fault_type, diagnose::FaultCategory::kCudaKernel);
    EXPECT_EQ(record.mechanism, "gpu_throttle");
    EXPECT_FALSE(record.explanation.empty());
    // gpu_throttle slows every kernel of rank 1 (culprits); its peers wait for it in
    // their collectives and host syncs (victims), and compute nowhere else changes.
    size_t on_rank1 = 0, elsewhere = 0;
    for (size_t k = 0; k < record.node_count(); ++k) {
      if (!record.node_affected[k]) continue;
      if (record.node_rank[k] == 1) {
        ++on_rank1;
        continue;
      }
      ++elsewhere;
      EXPECT_NE(record.node_layer[k], model::Layer::kK) << "a peer's compute kernel changed";
    }
    EXPECT_GT(on_rank1, elsewhere) << record.key() << " step " << record.step;
    EXPECT_FALSE(record.AffectedOperators(set.symbols).empty());
  }
  EXPECT_GT(anomalous, 0u);
  // Labelled instances all exist as nodes of some request's projection.
  EXPECT_GT(set.label_instances, 0);
  EXPECT_GE(set.matched_instances, set.label_instances * 95 / 100)
      << set.matched_instances << " of " << set.label_instances;
}

TEST(StepRecords, KeysSelectRequests) {
  const model::Trace trace = sim::SimulatedTrace("", "records_keys");
  const RecordSet all = RecordsOf(trace);
  ASSERT_FALSE(all.records.empty());
  const std::string key = all.records.front().key();
  std::unordered_set<std::string> keys{key};
  RecordSet some;
  RecordOptions options;
  options.bundle = "run";
  options.keys = &keys;
  ASSERT_TRUE(AddTraceRecords(trace, options, &some).ok());
  ASSERT_FALSE(some.records.empty());
  for (const StepRecord& record : some.records) EXPECT_EQ(record.key(), key);
}

TEST(StepRecords, BadLabelsAreAnErrorNamingTheBundle) {
  model::Trace trace = sim::SimulatedTrace("", "records_bad_labels");
  trace.meta.labels_json = "{\"schema\": \"something-else\"}";
  RecordSet set;
  RecordOptions options;
  options.bundle = "bundle-7";
  const base::Status status = AddTraceRecords(trace, options, &set);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("bundle-7"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("teller-labels/1"), std::string::npos) << status.message();
}

TEST(RecordFeatures, RowsMatchRecordsAndNamesMatchColumns) {
  const model::Trace trace = sim::SimulatedTrace("gpu_throttle:rank=1", "records_features");
  const RecordSet set = RecordsOf(trace);
  const FeatureRows stats = StatisticalFeatures(set.records);
  EXPECT_EQ(stats.rows, static_cast<int64_t>(set.records.size()));
  EXPECT_EQ(stats.cols, static_cast<int64_t>(stats.names.size()));
  EXPECT_EQ(stats.values.size(), static_cast<size_t>(stats.rows * stats.cols));
  const FeatureRows structural = StructuralFeatures(set.records, set.symbols, 64);
  EXPECT_EQ(structural.cols, stats.cols + 128);
  // The structural rows start with the statistical ones.
  for (int64_t r = 0; r < stats.rows; ++r) {
    for (int64_t c = 0; c < stats.cols; ++c) {
      ASSERT_EQ(structural.values[r * structural.cols + c], stats.values[r * stats.cols + c]);
    }
  }
  // The node-count column is log1p(nodes).
  const auto log_nodes =
      std::find(stats.names.begin(), stats.names.end(), "log_nodes") - stats.names.begin();
  EXPECT_NEAR(stats.values[log_nodes], std::log1p(double(set.records[0].node_count())), 1e-5);
  for (float v : structural.values) ASSERT_TRUE(std::isfinite(v));
}

class DatasetRecords : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { folder_ = new std::string(BuildSmallDataset("records_dataset")); }
  static void TearDownTestSuite() { delete folder_; }
  static std::string* folder_;
};
std::string* DatasetRecords::folder_ = nullptr;

TEST_F(DatasetRecords, SplitPartsGiveDisjointRecords) {
  auto dataset = ReadDataset(*folder_);
  ASSERT_TRUE(dataset.ok()) << dataset.status().message();
  EXPECT_EQ(dataset->bundles.size(), 6u);
  std::set<std::string> seen_train;
  for (const char* part : {"train", "test"}) {
    auto keys = ReadSplitKeys(*folder_, "request_disjoint", part);
    ASSERT_TRUE(keys.ok()) << keys.status().message();
    RecordSet set;
    LoadOptions options;
    options.keys = &*keys;
    ASSERT_TRUE(LoadDatasetRecords(*dataset, options, &set).ok());
    ASSERT_FALSE(set.records.empty()) << part;
    for (const StepRecord& record : set.records) {
      EXPECT_TRUE(keys->count(record.key())) << record.key();
      if (std::string(part) == "train")
        seen_train.insert(record.key());
      else
        EXPECT_FALSE(seen_train.count(record.key())) << record.key();
      EXPECT_FALSE(record.engine.empty());
    }
  }
}

TEST_F(DatasetRecords, MissingSplitOrPartNamesWhatExists) {
  auto split = ReadSplitKeys(*folder_, "by_moon_phase", "train");
  ASSERT_FALSE(split.ok());
  EXPECT_NE(split.status().message().find("request_disjoint"), std::string::npos);
  auto part = ReadSplitKeys(*folder_, "request_disjoint", "holdout");
  ASSERT_FALSE(part.ok());
  EXPECT_NE(part.status().message().find("train"), std::string::npos);
  auto none = ReadDataset(base::TempDir("records_not_a_dataset"));
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("manifest.json"), std::string::npos);
}

}  // namespace
}  // namespace teller::step_records

namespace teller::step_records {
namespace {

TEST(StepRecords, VerticalViewSplitsEachRecordByRank) {
  const model::Trace trace = sim::SimulatedTrace("gpu_throttle:rank=1", "records_vertical");
  const RecordSet horizontal = RecordsOf(trace);
  RecordSet vertical;
  RecordOptions options;
  options.bundle = "run";
  options.vertical = true;
  ASSERT_TRUE(AddTraceRecords(trace, options, &vertical).ok());
  size_t expected = 0, nodes = 0, vertical_nodes = 0;
  for (const StepRecord& r : horizontal.records) {
    expected += r.ranks.size();
    nodes += r.node_count();
  }
  for (const StepRecord& r : vertical.records) {
    ASSERT_EQ(r.ranks.size(), 1u);
    vertical_nodes += r.node_count();
    for (int32_t rank : r.node_rank) EXPECT_EQ(rank, r.ranks[0]);
  }
  EXPECT_EQ(vertical.records.size(), expected);
  EXPECT_EQ(vertical_nodes, nodes);
}

}  // namespace
}  // namespace teller::step_records
