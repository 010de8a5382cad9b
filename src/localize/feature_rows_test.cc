// The findings' rows (feature_rows.h) and their bytes: rows of reconstructed parts survive
// encoding column for column, appended parts number steps, nodes and names as one trace
// does, the examples are a row's instances ranked as a finding ranks them, and broken
// buffers are errors that name the offset or decode to rows the scores can read.
#include "localize/feature_rows_wire.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "base/byte_io_testing.h"
#include "localize/baseline.h"
#include "localize/peer_scores.h"
#include "reconstruct/call_chain_builder.h"
#include "reconstruct/synthetic_trace.h"
#include "reconstruct/trace_parts_testing.h"

namespace teller::localize {
namespace {

using base::Decoded;
using base::ExpectError;
using base::ExpectEveryTruncationFails;

void ExpectSameRows(const FeatureRows& a, const FeatureRows& b) {
  EXPECT_EQ(a.rank, b.rank);
  EXPECT_EQ(a.number, b.number);
  EXPECT_EQ(a.global_step, b.global_step);
  EXPECT_EQ(a.phase, b.phase);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.batch_bucket, b.batch_bucket);
  EXPECT_EQ(a.requests, b.requests);
  EXPECT_EQ(a.start_ns, b.start_ns);
  EXPECT_EQ(a.dur_ns, b.dur_ns);
  EXPECT_EQ(a.first_node, b.first_node);
  EXPECT_EQ(a.features.step, b.features.step);
  EXPECT_EQ(a.features.family, b.features.family);
  EXPECT_EQ(a.features.count, b.features.count);
  EXPECT_EQ(a.features.total_ns, b.features.total_ns);
  EXPECT_EQ(a.features.mean_ns, b.features.mean_ns);
  EXPECT_EQ(a.features.max_ns, b.features.max_ns);
  EXPECT_EQ(a.features.queue_max_ns, b.features.queue_max_ns);
  EXPECT_EQ(a.features.gap_ns, b.features.gap_ns);
  EXPECT_EQ(a.features.share, b.features.share);
  EXPECT_EQ(a.features.skew_ns, b.features.skew_ns);
  EXPECT_EQ(a.features.order_breaks, b.features.order_breaks);
  EXPECT_EQ(a.longest_begin, b.longest_begin);
  EXPECT_EQ(a.longest, b.longest);
  EXPECT_EQ(a.delayed_begin, b.delayed_begin);
  EXPECT_EQ(a.delayed, b.delayed);
  EXPECT_EQ(a.names, b.names);
  EXPECT_EQ(a.examples, b.examples);
  EXPECT_EQ(a.nodes, b.nodes);
  EXPECT_EQ(a.has_step_requests, b.has_step_requests);
}

// The reconstructed parts of a random split run by seed.
std::vector<model::Trace> BuiltParts(uint64_t seed, int steps_per_process = 6) {
  base::StatusOr<std::vector<model::Trace>> parts =
      reconstruct::RandomBuiltParts(seed, steps_per_process);
  EXPECT_TRUE(parts.ok()) << parts.status().ToString();
  return parts.ok() ? std::move(*parts) : std::vector<model::Trace>{};
}

FeatureRows RowsOf(const model::Trace& part, uint32_t examples = kFeatureRowExamples) {
  return FeatureRowsOfPart(part, ComputeStepFeatures(part), examples);
}

TEST(FeatureRowsTest, RowsSurviveTheirBytes) {
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    for (const model::Trace& part : BuiltParts(seed)) {
      const FeatureRows rows = RowsOf(part);
      ASSERT_TRUE(CheckFeatureRows(rows).ok()) << CheckFeatureRows(rows).ToString();
      ASSERT_GT(rows.features.size(), 0u);
      ExpectSameRows(Decoded(DecodeFeatureRows(EncodeFeatureRows(rows))), rows);
    }
  }
}

// Offsets past u16 (a step of more than 65,536 nodes) cross as u32.
TEST(FeatureRowsTest, ExamplesFarIntoALongStepSurviveTheirBytes) {
  FeatureRows rows = RowsOf(BuiltParts(1).front());
  const uint32_t last_step = static_cast<uint32_t>(rows.steps() - 1);
  ASSERT_EQ(rows.features.step.back().value(), last_step);
  rows.nodes += 70000;
  rows.longest.back() = rows.nodes - rows.first_node[last_step] - 1;
  ASSERT_TRUE(CheckFeatureRows(rows).ok()) << CheckFeatureRows(rows).ToString();
  const std::string bytes = EncodeFeatureRows(rows);
  ExpectSameRows(Decoded(DecodeFeatureRows(bytes)), rows);
  EXPECT_GT(bytes.size(), EncodeFeatureRows(RowsOf(BuiltParts(1).front())).size());
}

// Parts appended in order: steps and nodes shifted by the parts before, names one pool.
TEST(FeatureRowsTest, AppendedPartsNumberStepsNodesAndNamesAsOneTrace) {
  const std::vector<model::Trace> parts = BuiltParts(3);
  ASSERT_GE(parts.size(), 2u);
  std::vector<FeatureRows> rows;
  for (const model::Trace& part : parts) rows.push_back(RowsOf(part));
  const FeatureRows all = ConcatFeatureRows(rows);
  ASSERT_TRUE(CheckFeatureRows(all).ok()) << CheckFeatureRows(all).ToString();
  size_t step = 0, row = 0;
  uint32_t nodes = 0;
  for (const FeatureRows& part : rows) {
    for (size_t s = 0; s < part.steps(); ++s, ++step) {
      EXPECT_EQ(all.first_node[step], part.first_node[s] + nodes);
      EXPECT_EQ(all.names[all.name[step]], part.names[part.name[s]]);
      EXPECT_EQ(all.rank[step], part.rank[s]);
    }
    for (size_t r = 0; r < part.features.size(); ++r, ++row) {
      EXPECT_EQ(all.features.step[row].value(),
                part.features.step[r].value() + step - part.steps());
      for (Feature feature : {Feature::kTotalNs, Feature::kQueueMaxNs}) {
        std::vector<model::NodeIndex> shifted;
        for (model::NodeIndex node : part.Examples(r, feature, kFeatureRowExamples)) {
          shifted.push_back(model::NodeIndex(node.value() + nodes));
        }
        EXPECT_EQ(all.Examples(row, feature, kFeatureRowExamples), shifted);
      }
    }
    nodes += part.nodes;
  }
  EXPECT_EQ(all.nodes, nodes);
  EXPECT_EQ(all.steps(), step);
}

// The examples of a row: its instances ranked by duration (or by delay), the first few,
// ascending by node; fewer asked, the longest of them.
TEST(FeatureRowsTest, ExamplesAreTheRowsLongestInstances) {
  const std::vector<model::Trace> parts = BuiltParts(5);
  const model::Trace& part = parts.front();
  const StepFeatures features = ComputeStepFeatures(part);
  const FeatureRows rows = FeatureRowsOfPart(part, features, 3);
  int64_t cut = 0;
  for (size_t row = 0; row < features.size(); ++row) {
    std::vector<std::pair<int64_t, uint32_t>> ranked;
    for (int64_t i = 0; i < features.count[row]; ++i) {
      const model::NodeIndex node = features.instances[features.instances_begin[row] + i];
      ranked.emplace_back(-part.events.dur_ns[part.nodes.event[node.value()].value()],
                          node.value());
    }
    std::sort(ranked.begin(), ranked.end());
    for (size_t count : {size_t{1}, size_t{3}}) {
      std::vector<model::NodeIndex> expected;
      for (size_t i = 0; i < ranked.size() && i < count; ++i) {
        expected.push_back(model::NodeIndex(ranked[i].second));
      }
      std::sort(expected.begin(), expected.end());
      EXPECT_EQ(rows.Examples(row, Feature::kTotalNs, count), expected) << "row " << row;
    }
    cut += ranked.size() > 3;
  }
  EXPECT_GT(cut, 0) << "no row with more instances than examples";
}

TEST(FeatureRowsTest, BrokenBuffersNameTheOffset) {
  const std::vector<model::Trace> parts = BuiltParts(2, 2);
  const std::string bytes = EncodeFeatureRows(RowsOf(parts.front(), 2));
  ExpectEveryTruncationFails(bytes, DecodeFeatureRows);
  std::string foreign = bytes;
  foreign[0] = 'X';
  ExpectError(DecodeFeatureRows(foreign).status(), "0", "magic");
  // An example past its step's nodes.
  FeatureRows rows = RowsOf(parts.front(), 2);
  ASSERT_FALSE(rows.longest.empty());
  rows.longest.back() = rows.nodes;
  ExpectError(DecodeFeatureRows(EncodeFeatureRows(rows)).status(), std::to_string(bytes.size()),
              "outside its step");
}

// Any one byte flipped: an error, or rows whose every index the scores follow is in range.
TEST(FeatureRowsTest, FlippedBytesDecodeToReadableRowsOrFail) {
  const std::vector<model::Trace> parts = BuiltParts(4, 2);
  const std::string bytes = EncodeFeatureRows(RowsOf(parts.front(), 2));
  base::ExpectFlippedBytesDecodeOrFail({&bytes}, [](const std::string& flipped) {
    base::StatusOr<FeatureRows> rows = DecodeFeatureRows(flipped);
    if (!rows.ok()) return 1;
    std::vector<model::StepIndex> steps;
    for (uint32_t s = 0; s < rows->steps(); ++s) steps.push_back(model::StepIndex(s));
    BaselineOptions options;
    options.by_role = options.absent_as_zero = options.exclude_shifts = true;
    const Baseline baseline = Baseline::Learn(*rows, steps, options);
    for (model::StepIndex step : steps) baseline.ScoreStep(*rows, step);
    ScorePeers(*rows, kAllFeatures);
    for (size_t row = 0; row < rows->features.size(); ++row) {
      rows->Examples(row, Feature::kQueueMaxNs, rows->examples);
    }
    return 0;
  });
}

}  // namespace
}  // namespace teller::localize
