// The split path of the deviation map's measurements: parts of a run (some processes
// each, own string pool) reconstructed and featured apart, each measuring its steps with
// the merge of every part's summary, equal the joined trace's measurements of the same
// steps, every column and cell included.
#include "cause/step_measurements.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <utility>

#include "cause/step_measurements_testing.h"
#include "localize/step_features_parts.h"
#include "reconstruct/call_chain_builder.h"
#include "reconstruct/synthetic_trace.h"
#include "reconstruct/trace_parts_testing.h"

namespace teller::cause {
namespace {

using reconstruct::PartBase;

reconstruct::SyntheticOptions RandomOptions(uint64_t seed) {
  return reconstruct::RandomSplitOptions(seed, 6, /*compositions=*/true);
}

struct SplitTotals {
  int64_t rank_steps = 0, cells = 0, transfer_cells = 0, transfers_need_others = 0, padded = 0;
  int64_t measurement_bytes = 0, summary_bytes = 0, merged_bytes = 0;
};

// Part row p equals joined row j.
void ExpectSameRow(const StepMeasurements& part, size_t p, const StepMeasurements& joined,
                   size_t j) {
  EXPECT_EQ(part.rank[p], joined.rank[j]);
  EXPECT_EQ(part.number[p], joined.number[j]);
  EXPECT_EQ(part.group[p], joined.group[j]);
  EXPECT_EQ(part.start_ns[p], joined.start_ns[j]);
  EXPECT_EQ(part.size[p], joined.size[j]);
  EXPECT_EQ(part.context[p], joined.context[j]);
  EXPECT_EQ(part.requests[p], joined.requests[j]);
  EXPECT_EQ(part.padded_size[p], joined.padded_size[j]);
  EXPECT_EQ(part.context_spread[p], joined.context_spread[j]);
  const uint32_t pb = part.cells_begin[p], jb = joined.cells_begin[j];
  ASSERT_EQ(part.cells_begin[p + 1] - pb, joined.cells_begin[j + 1] - jb);
  for (uint32_t c = 0; c < part.cells_begin[p + 1] - pb; ++c) {
    SCOPED_TRACE(::testing::Message() << "cell " << c << " " << ChannelName(part.channel[pb + c]));
    EXPECT_EQ(part.channel[pb + c], joined.channel[jb + c]);
    EXPECT_EQ(part.family[pb + c], joined.family[jb + c]);
    EXPECT_EQ(part.value[pb + c], joined.value[jb + c]);
    EXPECT_EQ(part.count[pb + c], joined.count[jb + c]);
  }
}

// Transfer cells a part alone (only its own summary merged) measures otherwise.
int64_t TransfersThatNeedOtherParts(const model::Trace& part,
                                    const localize::StepFeatures& features,
                                    const StepMeasurements& rows) {
  const MergedMeasurementSummary alone =
      MergeMeasurementSummaries({SummarizeMeasurementInputs(part)});
  base::StatusOr<StepMeasurements> own = MeasureStepsOfPart(part, features, alone);
  EXPECT_TRUE(own.ok());
  int64_t differ = 0;
  for (size_t s = 0; s < rows.steps(); ++s) {
    for (uint32_t c = rows.cells_begin[s]; c < rows.cells_begin[s + 1]; ++c) {
      if (rows.channel[c] != Channel::kCollectiveTransfer) continue;
      const int64_t mine = own->Find(s, rows.channel[c], rows.family[c]);
      differ += mine < 0 || own->value[mine] != rows.value[c];
    }
  }
  return differ;
}

// One draw: each part's measurements against the joined trace's, steps mapped by event.
void CheckDraw(uint64_t seed, SplitTotals* totals) {
  const reconstruct::SyntheticOptions options = RandomOptions(seed);
  SCOPED_TRACE(::testing::Message() << "seed " << seed << " processes " << options.processes
                                    << " hosts " << options.hosts);
  const model::Trace whole = reconstruct::MakeSyntheticTrace(options);
  std::vector<model::Trace> parts = reconstruct::SplitIntoParts(whole, seed);
  std::vector<PartBase> bases;
  base::StatusOr<model::Trace> joined = reconstruct::JoinParts(parts, &bases);
  ASSERT_TRUE(joined.ok());
  ASSERT_TRUE(reconstruct::BuildCallChains(&*joined).ok());
  ASSERT_TRUE(reconstruct::BuildParts(&parts, parts.size()).ok());
  const StepMeasurements joined_rows =
      MeasureSteps(*joined, localize::ComputeStepFeatures(*joined));

  // Step 2: the parts' features.
  std::vector<localize::LocalStepFeatures> locals;
  std::vector<localize::StepFeatureSummary> feature_summaries;
  for (const model::Trace& part : parts) {
    locals.push_back(localize::ComputeLocalStepFeatures(part));
    feature_summaries.push_back(locals.back().summary);
  }
  const localize::MergedStepFeatureSummary merged_features =
      localize::MergeStepFeatureSummaries(feature_summaries);
  std::vector<localize::StepFeatures> features;
  for (size_t k = 0; k < parts.size(); ++k) {
    auto finished = localize::FinishStepFeatures(parts[k], std::move(locals[k]), merged_features);
    ASSERT_TRUE(finished.ok());
    features.push_back(std::move(*finished));
  }

  // Step 3: the measurements.
  std::vector<MeasurementSummary> summaries;
  for (const model::Trace& part : parts) {
    summaries.push_back(SummarizeMeasurementInputs(part));  // what would cross the network
    ASSERT_TRUE(CheckMeasurementSummary(summaries.back()).ok());
    totals->summary_bytes += static_cast<int64_t>(summaries.back().ColumnBytes());
  }
  const MergedMeasurementSummary merged = MergeMeasurementSummaries(summaries);
  totals->merged_bytes += static_cast<int64_t>(merged.ColumnBytes());
  std::map<uint32_t, size_t> joined_step_of_event;
  for (size_t s = 0; s < joined->steps.size(); ++s) {
    joined_step_of_event[joined->steps.event[s].value()] = s;
  }
  for (size_t k = 0; k < parts.size(); ++k) {
    SCOPED_TRACE(::testing::Message() << "part " << k);
    base::StatusOr<StepMeasurements> rows = MeasureStepsOfPart(parts[k], features[k], merged);
    ASSERT_TRUE(rows.ok()) << rows.status().ToString();
    ASSERT_EQ(rows->steps(), parts[k].steps.size());
    for (size_t s = 0; s < rows->steps(); ++s) {
      SCOPED_TRACE(::testing::Message() << "step " << s);
      const auto found =
          joined_step_of_event.find(parts[k].steps.event[s].value() + bases[k].event);
      ASSERT_NE(found, joined_step_of_event.end());
      ExpectSameRow(*rows, s, joined_rows, found->second);
    }
    for (Channel channel : rows->channel)
      totals->transfer_cells += channel == Channel::kCollectiveTransfer;
    totals->transfers_need_others += TransfersThatNeedOtherParts(parts[k], features[k], *rows);
    for (size_t s = 0; s < rows->steps(); ++s)
      totals->padded += rows->padded_size[s] != rows->size[s];
    totals->rank_steps += static_cast<int64_t>(rows->steps());
    totals->cells += static_cast<int64_t>(rows->cells());
    totals->measurement_bytes += static_cast<int64_t>(rows->ColumnBytes());
  }
}

TEST(StepMeasurementsTest, PartsEqualTheJoinedMeasurementsOfTheirSteps) {
  SplitTotals totals;
  for (uint64_t seed = 1; seed <= 24; ++seed) CheckDraw(seed, &totals);
  EXPECT_GT(totals.transfer_cells, 0);
  // The draws must need the merge: a part alone measures some transfers otherwise.
  EXPECT_GT(totals.transfers_need_others, 0);
  ASSERT_GT(totals.rank_steps, 0);
  const double rank_steps = static_cast<double>(totals.rank_steps);
  std::printf(
      "split measurements: %lld rank-steps, %.1f cells each, %lld transfer cells (a part "
      "alone gets %lld wrong); measurements %.1f bytes per rank-step, summaries %.1f, merged "
      "%.1f; steps padded past their size %lld\n",
      static_cast<long long>(totals.rank_steps), static_cast<double>(totals.cells) / rank_steps,
      static_cast<long long>(totals.transfer_cells),
      static_cast<long long>(totals.transfers_need_others),
      static_cast<double>(totals.measurement_bytes) / rank_steps,
      static_cast<double>(totals.summary_bytes) / rank_steps,
      static_cast<double>(totals.merged_bytes) / rank_steps, static_cast<long long>(totals.padded));
}

// One draw: the map fitted from every part's rows equals the joined trace's, in the
// parts' order (node numbers and steps too) and reversed.
// Steps numbered below 2 serve no request on every part but the last, in the parts and
// in the joined trace alike: the run's first serving step lies in one part, and the
// others' earlier steps are not scored.
void StopServingEarlySteps(std::vector<model::Trace>* parts, const std::vector<PartBase>& bases,
                           model::Trace* joined) {
  std::map<uint32_t, size_t> joined_step_of_event;
  for (size_t s = 0; s < joined->steps.size(); ++s) {
    joined_step_of_event[joined->steps.event[s].value()] = s;
  }
  for (size_t k = 0; k + 1 < parts->size(); ++k) {
    model::Trace& part = (*parts)[k];
    for (size_t s = 0; s < part.steps.size(); ++s) {
      if (part.steps.number[s] >= 2) continue;
      part.steps.requests_count[s] = 0;
      joined->steps.requests_count[joined_step_of_event.at(part.steps.event[s].value() +
                                                            bases[k].event)] = 0;
    }
  }
}

// The first part's steps carry no request ids (a tensor-parallel worker's do not), in
// the part and in the joined trace alike, while the other parts' do: the run has request
// ids, so that part's gaps count only where work waited, as in the joined trace.
void DropTheFirstPartsRequestIds(std::vector<model::Trace>* parts,
                                 const std::vector<PartBase>& bases, model::Trace* joined) {
  std::map<uint32_t, size_t> joined_step_of_event;
  for (size_t s = 0; s < joined->steps.size(); ++s) {
    joined_step_of_event[joined->steps.event[s].value()] = s;
  }
  model::Trace& part = parts->front();
  for (size_t s = 0; s < part.steps.size(); ++s) {
    part.steps.requests_begin[s] = 0;
    part.steps.requests_count[s] = 0;
    joined->steps.requests_count[joined_step_of_event.at(part.steps.event[s].value() +
                                                          bases[0].event)] = 0;
  }
  part.step_requests.clear();
}

struct FitTotals {
  int64_t map_steps = 0, cells = 0, skipped = 0, nodes = 0, parts = 0, serving = 0, roles = 0;
};

void CheckFitDraw(uint64_t seed, FitTotals* totals) {
  const reconstruct::SyntheticOptions options = RandomOptions(seed);
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  const model::Trace whole = reconstruct::MakeSyntheticTrace(options);
  std::vector<model::Trace> parts = reconstruct::SplitIntoParts(whole, seed);
  std::vector<PartBase> bases;
  base::StatusOr<model::Trace> joined = reconstruct::JoinParts(parts, &bases);
  ASSERT_TRUE(joined.ok());
  ASSERT_TRUE(reconstruct::BuildCallChains(&*joined).ok());
  ASSERT_TRUE(reconstruct::BuildParts(&parts, parts.size()).ok());
  if (seed % 2 == 1) StopServingEarlySteps(&parts, bases, &*joined);
  if (seed % 3 == 0 && parts.size() > 1) DropTheFirstPartsRequestIds(&parts, bases, &*joined);
  const DeviationMap joined_map = BuildDeviationMap(*joined);
  std::vector<StepMeasurements> rows = MeasureParts(parts);
  ASSERT_EQ(rows.size(), parts.size());
  const DeviationMap fitted = FitDeviationMap(rows, DeviationOptions{});
  ExpectSameMap(fitted, joined_map);
  EXPECT_EQ(fitted.node_names, joined_map.node_names);
  // MapStep::step: the row among the parts' rows appended in order.
  std::map<uint32_t, size_t> joined_step_of_event;
  for (size_t s = 0; s < joined->steps.size(); ++s) {
    joined_step_of_event[joined->steps.event[s].value()] = s;
  }
  std::vector<size_t> joined_step_of_row;
  for (size_t k = 0; k < parts.size(); ++k) {
    for (size_t s = 0; s < parts[k].steps.size(); ++s) {
      joined_step_of_row.push_back(
          joined_step_of_event.at(parts[k].steps.event[s].value() + bases[k].event));
    }
  }
  for (size_t i = 0; i < fitted.steps.size() && i < joined_map.steps.size(); ++i) {
    EXPECT_EQ(joined_step_of_row.at(fitted.steps[i].step.value()), joined_map.steps[i].step.value());
    EXPECT_EQ(fitted.steps[i].node, joined_map.steps[i].node);
  }
  std::reverse(rows.begin(), rows.end());
  ExpectSameMap(FitDeviationMap(rows, DeviationOptions{}), joined_map);
  totals->map_steps += static_cast<int64_t>(joined_map.steps.size());
  totals->cells += static_cast<int64_t>(joined_map.cells.size());
  totals->skipped += joined_map.skipped_steps;
  totals->nodes += static_cast<int64_t>(joined_map.node_names.size());
  totals->parts += static_cast<int64_t>(parts.size());
  std::set<uint64_t> families;
  for (const StepMeasurements& part : rows) {
    for (size_t s = 0; s < part.steps(); ++s) {
      totals->serving += part.serving[s];
      families.insert(part.families[s]);
    }
  }
  totals->roles += static_cast<int64_t>(families.size());
}

TEST(StepMeasurementsTest, MapFittedFromThePartsEqualsTheJoinedMap) {
  FitTotals totals;
  for (uint64_t seed = 1; seed <= 24; ++seed) CheckFitDraw(seed, &totals);
  EXPECT_GT(totals.cells, 0);
  std::printf("fitted from parts: 24 runs in %lld parts, %lld scored rank-steps, %lld cells, "
              "%lld steps skipped, %lld nodes, %lld rows serving, %lld step family sets\n",
              static_cast<long long>(totals.parts), static_cast<long long>(totals.map_steps),
              static_cast<long long>(totals.cells), static_cast<long long>(totals.skipped),
              static_cast<long long>(totals.nodes), static_cast<long long>(totals.serving),
              static_cast<long long>(totals.roles));
}

// One trace's map: measured then fitted equals the map built from the trace.
TEST(StepMeasurementsTest, FitOfTheWholeTracesRowsIsItsMap) {
  model::Trace trace = reconstruct::MakeSyntheticTrace(RandomOptions(7));
  ASSERT_TRUE(reconstruct::BuildCallChains(&trace).ok());
  const localize::StepFeatures features = localize::ComputeStepFeatures(trace);
  const DeviationMap built = BuildDeviationMap(trace, features, DeviationOptions{});
  const DeviationMap fitted = FitDeviationMap(MeasureSteps(trace, features), DeviationOptions{});
  ExpectSameMap(fitted, built);
  ASSERT_EQ(fitted.steps.size(), built.steps.size());
  for (size_t i = 0; i < built.steps.size(); ++i) EXPECT_EQ(fitted.steps[i].step, built.steps[i].step);
  EXPECT_GT(built.cells.size(), 0u);
}

// A summary of one match's members and one global step's largest size.
MeasurementSummary Summary(uint32_t match, int32_t device, int32_t host, int64_t device_last,
                           int64_t host_last, int64_t global, double size) {
  MeasurementSummary summary;
  summary.match = {match};
  summary.device_members = {device};
  summary.host_members = {host};
  summary.device_last_start_ns = {device_last};
  summary.host_last_start_ns = {host_last};
  summary.global_step = {global};
  summary.largest_size = {size};
  return summary;
}

TEST(StepMeasurementsTest, MergeCountsDeviceMembersWhereAnyPartHasThem) {
  constexpr int64_t kNone = std::numeric_limits<int64_t>::min();
  // Match 4: host calls on both parts, a kernel on the second only; match 5 host only.
  std::vector<MeasurementSummary> parts = {Summary(4, 0, 1, kNone, 900, 2, 16.0),
                                           Summary(4, 1, 1, 300, 800, 2, 40.0)};
  MeasurementSummary host_only = Summary(5, 0, 2, kNone, 700, 3, 8.0);
  parts.push_back(host_only);
  for (const MeasurementSummary& part : parts) EXPECT_TRUE(CheckMeasurementSummary(part).ok());
  for (int order = 0; order < 2; ++order) {
    const MergedMeasurementSummary merged = MergeMeasurementSummaries(parts);
    ASSERT_EQ(merged.match, (std::vector<uint32_t>{4, 5}));
    EXPECT_EQ(merged.has_device, (std::vector<uint8_t>{1, 0}));
    EXPECT_EQ(merged.members, (std::vector<int32_t>{1, 2}));
    EXPECT_EQ(merged.last_arrival_ns, (std::vector<int64_t>{300, 700}));
    EXPECT_EQ(merged.global_step, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(merged.largest_size, (std::vector<double>{40.0, 8.0}));
    std::reverse(parts.begin(), parts.end());
  }
  MeasurementSummary ragged = host_only;
  ragged.host_members.push_back(1);
  EXPECT_FALSE(CheckMeasurementSummary(ragged).ok());
  MeasurementSummary unsorted = host_only;
  unsorted.global_step = {3, 3};
  unsorted.largest_size = {8.0, 8.0};
  EXPECT_FALSE(CheckMeasurementSummary(unsorted).ok());
}

// A merge without the part's summary (here of no part): its matches are unknown.
TEST(StepMeasurementsTest, PartMissingFromTheMergeIsAnError) {
  const model::Trace whole = reconstruct::MakeSyntheticTrace(RandomOptions(3));
  std::mt19937_64 rng(3);
  std::vector<model::Trace> parts;
  for (const auto& chosen : reconstruct::DealProcesses(3, 3, &rng)) {
    parts.push_back(reconstruct::CopyProcesses(whole, chosen));
  }
  ASSERT_TRUE(reconstruct::BuildParts(&parts, parts.size()).ok());
  ASSERT_GT(parts[2].collective_matches.size(), 0u);
  const localize::StepFeatures features = localize::ComputeStepFeatures(parts[2]);
  EXPECT_TRUE(MeasureStepsOfPart(parts[2], features,
                                 MergeMeasurementSummaries({SummarizeMeasurementInputs(parts[2])}))
                  .ok());
  EXPECT_FALSE(MeasureStepsOfPart(parts[2], features, MergeMeasurementSummaries({})).ok());
}

}  // namespace
}  // namespace teller::cause
