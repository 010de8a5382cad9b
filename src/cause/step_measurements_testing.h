// Test helpers of the split deviation map (step_measurements.h): every part's rows
// measured with the merged summaries, and two maps compared field by field.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cause/deviation_map.h"
#include "cause/step_measurements.h"
#include "localize/step_features_parts.h"
#include "model/trace.h"

namespace teller::cause {

// Steps 2 and 3a over parts already reconstructed apart: each part's rows.
inline std::vector<StepMeasurements> MeasureParts(const std::vector<model::Trace>& parts) {
  std::vector<localize::LocalStepFeatures> locals;
  std::vector<localize::StepFeatureSummary> feature_summaries;
  std::vector<MeasurementSummary> summaries;
  for (const model::Trace& part : parts) {
    locals.push_back(localize::ComputeLocalStepFeatures(part));
    feature_summaries.push_back(locals.back().summary);
    summaries.push_back(SummarizeMeasurementInputs(part));
  }
  const localize::MergedStepFeatureSummary merged_features =
      localize::MergeStepFeatureSummaries(feature_summaries);
  const MergedMeasurementSummary merged = MergeMeasurementSummaries(summaries);
  std::vector<StepMeasurements> rows;
  for (size_t k = 0; k < parts.size(); ++k) {
    auto features = localize::FinishStepFeatures(parts[k], std::move(locals[k]), merged_features);
    EXPECT_TRUE(features.ok());
    if (!features.ok()) return {};
    base::StatusOr<StepMeasurements> part_rows = MeasureStepsOfPart(parts[k], *features, merged);
    EXPECT_TRUE(part_rows.ok());
    if (!part_rows.ok()) return {};
    rows.push_back(std::move(*part_rows));
  }
  return rows;
}

// The host name of a map step's node ("" unknown).
inline std::string HostOf(const DeviationMap& map, size_t row) {
  const int32_t node = map.steps[row].node;
  return node < 0 || static_cast<size_t>(node) >= map.node_names.size() ? "" : map.node_names[node];
}

// Two maps of one run equal in every field; steps by their (rank, number), nodes by name.
inline void ExpectSameMap(const DeviationMap& fitted, const DeviationMap& joined) {
  EXPECT_EQ(fitted.ranks, joined.ranks);
  EXPECT_EQ(fitted.skipped_steps, joined.skipped_steps);
  EXPECT_EQ(fitted.device_work, joined.device_work);
  ASSERT_EQ(fitted.steps.size(), joined.steps.size());
  for (size_t i = 0; i < fitted.steps.size(); ++i) {
    const MapStep &a = fitted.steps[i], &b = joined.steps[i];
    SCOPED_TRACE(::testing::Message() << "map step " << i << " rank " << b.rank << " number "
                                      << b.number);
    EXPECT_EQ(a.rank, b.rank);
    EXPECT_EQ(a.number, b.number);
    EXPECT_EQ(a.group, b.group);
    EXPECT_EQ(a.start_ns, b.start_ns);
    EXPECT_EQ(HostOf(fitted, i), HostOf(joined, i));
    EXPECT_EQ(a.cells_begin, b.cells_begin);
    EXPECT_EQ(a.cells_end, b.cells_end);
  }
  ASSERT_EQ(fitted.cells.size(), joined.cells.size());
  for (size_t c = 0; c < fitted.cells.size(); ++c) {
    const Cell &a = fitted.cells[c], &b = joined.cells[c];
    SCOPED_TRACE(::testing::Message() << "cell " << c << " " << ChannelName(b.channel));
    EXPECT_EQ(a.step_row, b.step_row);
    EXPECT_EQ(a.channel, b.channel);
    EXPECT_EQ(a.family, b.family);
    EXPECT_EQ(a.value, b.value);
    EXPECT_EQ(a.expected, b.expected);
    EXPECT_EQ(a.sigma, b.sigma);
    EXPECT_EQ(a.count, b.count);
  }
}

}  // namespace teller::cause
