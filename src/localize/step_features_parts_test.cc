// The split path of the step features: parts of a run (some processes each, own string
// pool) reconstructed apart, each computing its features from its own events and the
// merge of every part's summary, equal the joined trace's features restricted to the
// part's steps, every column included.
#include "localize/step_features_parts.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <random>
#include <utility>

#include "reconstruct/call_chain_builder.h"
#include "reconstruct/synthetic_trace.h"
#include "reconstruct/trace_parts_testing.h"

namespace teller::localize {
namespace {

using reconstruct::PartBase;

// Kernels of several names, some steps reordered (order breaks), some of another
// composition (first seen in another order on each process), collectives whose ends
// differ across ranks and hosts (skew).
reconstruct::SyntheticOptions RandomOptions(uint64_t seed) {
  return reconstruct::RandomSplitOptions(seed, 6, /*compositions=*/true);
}

// Rows [first, last) of each step.
std::vector<std::pair<size_t, size_t>> RowsOfSteps(const StepFeatures& features, size_t steps) {
  std::vector<std::pair<size_t, size_t>> rows(steps, {0, 0});
  for (size_t row = 0; row < features.size(); ++row) {
    auto& [first, last] = rows[features.step[row].value()];
    if (first == last) first = row;
    last = row + 1;
  }
  return rows;
}

// Part row p equals joined row j, instances compared as the joined trace's events.
void ExpectSameRow(const StepFeatures& part, size_t p, const StepFeatures& joined, size_t j) {
  EXPECT_EQ(part.family[p], joined.family[j]);
  EXPECT_EQ(part.count[p], joined.count[j]);
  EXPECT_EQ(part.total_ns[p], joined.total_ns[j]);
  EXPECT_EQ(part.mean_ns[p], joined.mean_ns[j]);
  EXPECT_EQ(part.max_ns[p], joined.max_ns[j]);
  EXPECT_EQ(part.queue_total_ns[p], joined.queue_total_ns[j]);
  EXPECT_EQ(part.queue_max_ns[p], joined.queue_max_ns[j]);
  EXPECT_EQ(part.gap_ns[p], joined.gap_ns[j]);
  EXPECT_EQ(part.share[p], joined.share[j]);
  EXPECT_EQ(part.skew_ns[p], joined.skew_ns[j]) << "family " << OperatorFamilyName(part.family[p]);
  EXPECT_EQ(part.order_breaks[p], joined.order_breaks[j])
      << "family " << OperatorFamilyName(part.family[p]);
}

void ExpectSameInstances(const model::Trace& part_trace, const StepFeatures& part, size_t p,
                         const PartBase& base, const model::Trace& joined_trace,
                         const StepFeatures& joined, size_t j) {
  ASSERT_EQ(part.count[p], joined.count[j]);
  for (int64_t i = 0; i < part.count[p]; ++i) {
    const model::NodeIndex pn = part.instances[part.instances_begin[p] + i];
    const model::NodeIndex jn = joined.instances[joined.instances_begin[j] + i];
    EXPECT_EQ(part_trace.nodes.event[pn.value()].value() + base.event,
              joined_trace.nodes.event[jn.value()].value());
  }
}

// Steps are mapped by their event: step indexes differ between part and joined trace.
void ExpectFeaturesOfJoinedRestrictedToPart(const model::Trace& joined_trace,
                                            const StepFeatures& joined, const PartBase& base,
                                            const model::Trace& part_trace,
                                            const StepFeatures& part) {
  std::map<uint32_t, size_t> joined_step_of_event;
  for (size_t s = 0; s < joined_trace.steps.size(); ++s) {
    joined_step_of_event[joined_trace.steps.event[s].value()] = s;
  }
  const auto joined_rows = RowsOfSteps(joined, joined_trace.steps.size());
  const auto part_rows = RowsOfSteps(part, part_trace.steps.size());
  for (size_t k = 0; k < part_trace.steps.size(); ++k) {
    const auto found = joined_step_of_event.find(part_trace.steps.event[k].value() + base.event);
    ASSERT_NE(found, joined_step_of_event.end()) << "step " << k;
    const auto [p_first, p_last] = part_rows[k];
    const auto [j_first, j_last] = joined_rows[found->second];
    ASSERT_EQ(p_last - p_first, j_last - j_first) << "rows of step " << k;
    for (size_t r = 0; r < p_last - p_first; ++r) {
      SCOPED_TRACE(::testing::Message() << "step " << k << " row " << r);
      ExpectSameRow(part, p_first + r, joined, j_first + r);
      ExpectSameInstances(part_trace, part, p_first + r, base, joined_trace, joined, j_first + r);
    }
  }
}

struct SplitTotals {
  int64_t rank_steps = 0, events = 0, summary_bytes = 0, skew_bytes = 0, merged_bytes = 0;
  int64_t skew_rows = 0, break_rows = 0, skew_needs_others = 0, breaks_need_others = 0;
};

// Rows whose cross-rank columns a part alone (its own summary merged) gets wrong.
void CountRowsThatNeedOtherParts(const model::Trace& part_trace, const StepFeatures& features,
                                 SplitTotals* totals) {
  LocalStepFeatures alone = ComputeLocalStepFeatures(part_trace);
  const MergedStepFeatureSummary merged = MergeStepFeatureSummaries({alone.summary});
  base::StatusOr<StepFeatures> own = FinishStepFeatures(part_trace, std::move(alone), merged);
  EXPECT_TRUE(own.ok());
  for (size_t row = 0; row < features.size(); ++row) {
    totals->skew_needs_others += own->skew_ns[row] != features.skew_ns[row];
    totals->breaks_need_others += own->order_breaks[row] != features.order_breaks[row];
  }
}

// One draw: the parts' features against the joined trace's.
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
  const StepFeatures joined_features = ComputeStepFeatures(*joined);

  std::vector<LocalStepFeatures> locals;
  std::vector<StepFeatureSummary> summaries;
  for (const model::Trace& part : parts) {
    locals.push_back(ComputeLocalStepFeatures(part));
    summaries.push_back(locals.back().summary);  // what would cross the network
    ASSERT_TRUE(CheckStepFeatureSummary(summaries.back()).ok());
    totals->summary_bytes += static_cast<int64_t>(summaries.back().ColumnBytes());
    totals->skew_bytes += static_cast<int64_t>(summaries.back().match.size() *
                                               (sizeof(uint32_t) + 2 * sizeof(int64_t)));
  }
  const MergedStepFeatureSummary merged = MergeStepFeatureSummaries(summaries);
  totals->merged_bytes += static_cast<int64_t>(merged.ColumnBytes());
  for (size_t k = 0; k < parts.size(); ++k) {
    SCOPED_TRACE(::testing::Message() << "part " << k);
    base::StatusOr<StepFeatures> features =
        FinishStepFeatures(parts[k], std::move(locals[k]), merged);
    ASSERT_TRUE(features.ok()) << features.status().ToString();
    ExpectFeaturesOfJoinedRestrictedToPart(*joined, joined_features, bases[k], parts[k], *features);
    CountRowsThatNeedOtherParts(parts[k], *features, totals);
    totals->rank_steps += static_cast<int64_t>(parts[k].steps.size());
    totals->events += static_cast<int64_t>(parts[k].events.size());
  }
  for (size_t row = 0; row < joined_features.size(); ++row) {
    totals->skew_rows += joined_features.skew_ns[row] > 0;
    totals->break_rows += joined_features.order_breaks[row] > 0;
  }
}

TEST(StepFeaturesPartsTest, PartsEqualTheJoinedFeaturesRestrictedToThem) {
  SplitTotals totals;
  for (uint64_t seed = 1; seed <= 24; ++seed) CheckDraw(seed, &totals);
  EXPECT_GT(totals.skew_rows, 0);
  EXPECT_GT(totals.break_rows, 0);
  // The draws must need the merge: a part alone gets some of both columns wrong.
  EXPECT_GT(totals.skew_needs_others, 0);
  EXPECT_GT(totals.breaks_need_others, 0);
  ASSERT_GT(totals.rank_steps, 0);
  const double rank_steps = static_cast<double>(totals.rank_steps);
  std::printf(
      "split step features: %lld rank-steps, %.0f events each; summaries %.1f bytes per "
      "rank-step (skew %.1f), merged %.1f; rows with skew %lld (a part alone gets %lld wrong), "
      "with order breaks %lld (%lld)\n",
      static_cast<long long>(totals.rank_steps), static_cast<double>(totals.events) / rank_steps,
      static_cast<double>(totals.summary_bytes) / rank_steps,
      static_cast<double>(totals.skew_bytes) / rank_steps,
      static_cast<double>(totals.merged_bytes) / rank_steps,
      static_cast<long long>(totals.skew_rows), static_cast<long long>(totals.skew_needs_others),
      static_cast<long long>(totals.break_rows), static_cast<long long>(totals.breaks_need_others));
}

// Three reconstructed parts of one draw.
std::vector<model::Trace> ReconstructedParts(uint64_t seed) {
  const reconstruct::SyntheticOptions options = RandomOptions(seed);
  const model::Trace whole = reconstruct::MakeSyntheticTrace(options);
  std::mt19937_64 rng(seed);
  std::vector<model::Trace> parts;
  for (const auto& chosen : reconstruct::DealProcesses(options.processes, 3, &rng)) {
    parts.push_back(reconstruct::CopyProcesses(whole, chosen));
  }
  EXPECT_TRUE(reconstruct::BuildParts(&parts, parts.size()).ok());
  return parts;
}

std::vector<StepFeatureSummary> SummariesOf(const std::vector<model::Trace>& parts) {
  std::vector<StepFeatureSummary> summaries;
  for (const model::Trace& part : parts) {
    summaries.push_back(ComputeLocalStepFeatures(part).summary);
  }
  return summaries;
}

TEST(StepFeaturesPartsTest, MergeDoesNotDependOnTheOrderOfTheSummaries) {
  std::vector<StepFeatureSummary> summaries = SummariesOf(ReconstructedParts(7));
  const MergedStepFeatureSummary merged = MergeStepFeatureSummaries(summaries);
  std::swap(summaries.front(), summaries.back());
  const MergedStepFeatureSummary swapped = MergeStepFeatureSummaries(summaries);
  EXPECT_EQ(swapped.match, merged.match);
  EXPECT_EQ(swapped.match_skew_ns, merged.match_skew_ns);
  EXPECT_EQ(swapped.composition_family_count, merged.composition_family_count);
  EXPECT_EQ(swapped.usual_begin, merged.usual_begin);
  EXPECT_EQ(swapped.usual_bigram, merged.usual_bigram);
  EXPECT_EQ(swapped.usual_times, merged.usual_times);
  EXPECT_GT(merged.compositions(), 1u);
}

TEST(StepFeaturesPartsTest, PartMissingFromTheMergeIsAnError) {
  std::vector<model::Trace> parts = ReconstructedParts(5);
  const MergedStepFeatureSummary nothing = MergeStepFeatureSummaries({});
  EXPECT_FALSE(FinishStepFeatures(parts[0], ComputeLocalStepFeatures(parts[0]), nothing).ok());
  const MergedStepFeatureSummary all = MergeStepFeatureSummaries(SummariesOf(parts));
  EXPECT_TRUE(FinishStepFeatures(parts[0], ComputeLocalStepFeatures(parts[0]), all).ok());
}

TEST(StepFeaturesPartsTest, BrokenSummariesAreAnError) {
  const std::vector<model::Trace> parts = ReconstructedParts(3);
  const StepFeatureSummary summary = ComputeLocalStepFeatures(parts[0]).summary;
  ASSERT_TRUE(CheckStepFeatureSummary(summary).ok());
  ASSERT_GE(summary.match.size(), 2u);
  ASSERT_FALSE(summary.histogram_bigram.empty());
  StepFeatureSummary broken = summary;
  broken.match_max_end_ns.pop_back();
  EXPECT_FALSE(CheckStepFeatureSummary(broken).ok());
  broken = summary;
  std::swap(broken.match[0], broken.match[1]);
  EXPECT_FALSE(CheckStepFeatureSummary(broken).ok());
  broken = summary;
  broken.composition_family_count.pop_back();
  EXPECT_FALSE(CheckStepFeatureSummary(broken).ok());
  broken = summary;
  broken.histogram_composition[0] = static_cast<uint32_t>(broken.compositions());
  EXPECT_FALSE(CheckStepFeatureSummary(broken).ok());
  broken = summary;
  broken.histogram_steps[0] = 0;
  EXPECT_FALSE(CheckStepFeatureSummary(broken).ok());
  broken = summary;
  broken.histogram_steps[0] = summary.composition_steps[summary.histogram_composition[0]] + 1;
  EXPECT_FALSE(CheckStepFeatureSummary(broken).ok());
}

}  // namespace
}  // namespace teller::localize
