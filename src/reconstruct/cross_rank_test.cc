// The split path: parts of a trace (some of its processes each) reconstructed apart
// from a plan over their collective records equal the joined trace's reconstruction
// restricted to each part.
#include "reconstruct/cross_rank.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string_view>

#include "reconstruct/call_chain_builder.h"
#include "reconstruct/synthetic_trace.h"
#include "reconstruct/trace_parts_testing.h"

namespace teller::reconstruct {
namespace {

void ExpectSameSteps(const model::Trace& joined, const PartBase& base, const model::Trace& part) {
  const model::StepTable& js = joined.steps;
  const model::StepTable& ps = part.steps;
  const uint32_t processes = static_cast<uint32_t>(part.processes.size());
  size_t k = 0;
  for (size_t s = 0; s < js.size(); ++s) {
    const uint32_t process = js.process[s].value();
    if (process < base.process || process >= base.process + processes) continue;
    ASSERT_LT(k, ps.size());
    EXPECT_EQ(ps.process[k].value() + base.process, process);
    EXPECT_EQ(ps.event[k].value() + base.event, js.event[s].value());
    EXPECT_EQ(ps.number[k], js.number[s]);
    EXPECT_EQ(ps.global_step[k], js.global_step[s]);
    EXPECT_EQ(ps.phase[k], js.phase[s]);
    EXPECT_EQ(ps.start_ns[k], js.start_ns[s]);
    EXPECT_EQ(ps.end_ns[k], js.end_ns[s]);
    const uint32_t jb = js.node_begin[s].value(), pb = ps.node_begin[k].value();
    ASSERT_EQ(ps.node_end[k].value() - pb, js.node_end[s].value() - jb) << "step " << s;
    for (uint32_t n = 0; n < js.node_end[s].value() - jb; ++n) {
      EXPECT_EQ(part.nodes.event[pb + n].value() + base.event, joined.nodes.event[jb + n].value());
      EXPECT_EQ(part.nodes.depth[pb + n], joined.nodes.depth[jb + n]);
      const model::NodeIndex jp = joined.nodes.parent[jb + n], pp = part.nodes.parent[pb + n];
      EXPECT_EQ(pp.valid(), jp.valid());
      if (jp.valid()) {
        EXPECT_EQ(pp.value() - pb, jp.value() - jb);
      }
    }
    ++k;
  }
  EXPECT_EQ(k, ps.size());
}

void ExpectSameMatches(const model::Trace& joined, const PartBase& base, const model::Trace& part) {
  const model::CollectiveMatchTable& jm = joined.collective_matches;
  const model::CollectiveMatchTable& pm = part.collective_matches;
  const uint32_t events = static_cast<uint32_t>(part.events.size());
  size_t k = 0;
  for (size_t i = 0; i < jm.size(); ++i) {
    const uint32_t event = jm.event[i].value();
    if (event < base.event || event >= base.event + events) continue;
    ASSERT_LT(k, pm.size());
    EXPECT_EQ(pm.match[k], jm.match[i]);
    EXPECT_EQ(pm.event[k].value() + base.event, event);
    EXPECT_EQ(pm.rank[k], jm.rank[i]);
    ++k;
  }
  EXPECT_EQ(k, pm.size());
}

void ExpectPartOfJoined(const model::Trace& joined, const PartBase& base,
                        const model::Trace& part) {
  for (size_t p = 0; p < part.processes.size(); ++p) {
    EXPECT_EQ(part.processes.clock_offset_ns[p],
              joined.processes.clock_offset_ns[base.process + p]);
    EXPECT_EQ(part.processes.clock_uncertainty_ns[p],
              joined.processes.clock_uncertainty_ns[base.process + p]);
  }
  for (size_t row = 0; row < part.events.size(); ++row) {
    ASSERT_EQ(part.events.start_ns[row], joined.events.start_ns[base.event + row]) << row;
    ASSERT_EQ(part.events.dur_ns[row], joined.events.dur_ns[base.event + row]) << row;
  }
  for (size_t i = 0; i < part.logs.size(); ++i) {
    EXPECT_EQ(part.logs.ts_ns[i], joined.logs.ts_ns[base.log + i]);
  }
  ExpectSameSteps(joined, base, part);
  ExpectSameMatches(joined, base, part);
}

void ExpectRunCounters(const CrossRankPlan& plan, const model::Trace& joined) {
  const model::Stats& stats = joined.stats;
  EXPECT_EQ(plan.counters.matches, stats.Get(model::stat::kReconstructCollectiveMatches));
  EXPECT_EQ(plan.counters.unmatched, stats.Get(model::stat::kReconstructCollectivesUnmatched));
  EXPECT_EQ(plan.counters.matched_by_order,
            stats.Get(model::stat::kReconstructCollectivesMatchedByOrder));
  EXPECT_EQ(plan.counters.unaligned_hosts, stats.Get(model::stat::kReconstructClockUnalignedHosts));
  for (const std::string& note : plan.notes) {
    EXPECT_NE(std::find(joined.meta.notes.begin(), joined.meta.notes.end(), note),
              joined.meta.notes.end())
        << note;
  }
}

SyntheticOptions RandomOptions(uint64_t seed) {
  return RandomSplitOptions(seed, 5, /*compositions=*/false);
}

TEST(CrossRankTest, PartsEqualTheJoinedTraceRestrictedToThem) {
  int64_t aligned_processes = 0, matched_rows = 0;
  for (uint64_t seed = 1; seed <= 24; ++seed) {
    const SyntheticOptions options = RandomOptions(seed);
    SCOPED_TRACE(::testing::Message() << "seed " << seed << " processes " << options.processes
                                      << " hosts " << options.hosts);
    model::Trace whole = MakeSyntheticTrace(options);
    // Every third log line names only its rank; the first part holds them all, so most
    // shift by the offset of a rank it does not hold.
    for (size_t i = 0; i < whole.logs.size(); i += 3) {
      whole.logs.process[i] = model::ProcessIndex::Invalid();
    }
    std::mt19937_64 rng(seed);
    std::vector<model::Trace> parts;
    for (const auto& chosen : DealProcesses(options.processes, 2 + seed % 2, &rng)) {
      parts.push_back(CopyProcesses(whole, chosen, /*orphan_logs=*/parts.empty()));
    }
    std::vector<PartBase> bases;
    base::StatusOr<model::Trace> joined_or = JoinParts(parts, &bases);
    ASSERT_TRUE(joined_or.ok()) << joined_or.status().ToString();
    model::Trace& joined = *joined_or;
    ASSERT_TRUE(BuildCallChains(&joined).ok());
    ASSERT_EQ(joined.stats.Get(model::stat::kReconstructCollectivesMatchedByStepOrder), 0);

    const base::StatusOr<CrossRankPlan> plan_or = BuildParts(&parts, parts.size());
    ASSERT_TRUE(plan_or.ok()) << plan_or.status().ToString();
    const CrossRankPlan& plan = *plan_or;
    ExpectRunCounters(plan, joined);
    for (size_t k = 0; k < parts.size(); ++k) {
      SCOPED_TRACE(::testing::Message() << "part " << k);
      ExpectPartOfJoined(joined, bases[k], parts[k]);
      matched_rows += static_cast<int64_t>(parts[k].collective_matches.size());
    }
    for (int64_t offset : joined.processes.clock_offset_ns) aligned_processes += offset != 0;
  }
  EXPECT_GT(aligned_processes, 0) << "some draw must move a host's clock";
  EXPECT_GT(matched_rows, 0);
}

TEST(CrossRankTest, PartMissingFromThePlanStillReconstructsUnmatchedAndUnshifted) {
  SyntheticOptions options = RandomOptions(4);
  options.processes = 6;
  options.hosts = 3;
  const model::Trace whole = MakeSyntheticTrace(options);
  std::vector<model::Trace> parts;
  for (const std::vector<uint32_t>& chosen : {std::vector<uint32_t>{0, 3}, {1, 4}, {2, 5}}) {
    parts.push_back(CopyProcesses(whole, chosen));
  }
  const std::vector<int64_t> starts_before = parts[2].events.start_ns;
  const base::StatusOr<CrossRankPlan> plan_or = BuildParts(&parts, /*planned=*/2);
  ASSERT_TRUE(plan_or.ok()) << plan_or.status().ToString();
  const CrossRankPlan& plan = *plan_or;
  EXPECT_EQ(plan.parts.size(), 2u);
  const model::Trace& lost = parts[2];
  EXPECT_TRUE(lost.reconstructed);
  EXPECT_EQ(lost.collective_matches.size(), 0u);
  EXPECT_EQ(lost.processes.clock_offset_ns, (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(lost.events.start_ns, starts_before);
  EXPECT_EQ(lost.steps.size(), static_cast<size_t>(2 * options.steps_per_process));
  EXPECT_GT(parts[0].collective_matches.size(), 0u);
}

// The communicator of the joined trace's first match.
std::string_view FirstMatchCommunicator(const model::Trace& trace) {
  const model::EventRow event = trace.collective_matches.event[0];
  for (size_t c = 0; c < trace.collectives.size(); ++c) {
    if (trace.collectives.event[c] == event) return trace.str(trace.collectives.communicator[c]);
  }
  return {};
}

// Match ids follow the order of the communicators' string ids (as BuildCallChains
// numbered them before the records), not their names' order nor their first use.
TEST(CrossRankTest, MatchIdsFollowTheCommunicatorsStringIds) {
  SyntheticOptions options;
  options.comm_kernels_per_step = 2;
  options.communicators = 2;
  model::Trace whole = MakeSyntheticTrace(options);  // pool: pg0, pg1; steps use pg1 first
  model::Trace copy = CopyProcesses(whole, {0, 1});  // pool in order of use: pg1, pg0
  ASSERT_TRUE(BuildCallChains(&whole).ok());
  ASSERT_TRUE(BuildCallChains(&copy).ok());
  EXPECT_EQ(FirstMatchCommunicator(whole), "pg0");
  EXPECT_EQ(FirstMatchCommunicator(copy), "pg1");
}

TEST(CrossRankTest, PlanThatDoesNotFitThePartIsAnError) {
  SyntheticOptions options;
  options.hosts = 2;
  model::Trace part = MakeSyntheticTrace(options);
  ASSERT_TRUE(PreparePart(&part).ok());
  CrossRankPlan plan = MatchCollectiveRecords({ExtractCollectiveRecords(part)}, true);
  CrossRankPlan::Part share = plan.parts[0];
  share.clock_offset_ns.push_back(0);
  EXPECT_FALSE(BuildCallChainsOfPart(&part, share).ok());
  share = plan.parts[0];
  share.match_collective.assign(share.match.size(), static_cast<uint32_t>(part.collectives.size()));
  EXPECT_FALSE(BuildCallChainsOfPart(&part, share).ok());
  EXPECT_TRUE(BuildCallChainsOfPart(&part, plan.parts[0]).ok());
}

TEST(CrossRankTest, BrokenRecordsAreAnError) {
  SyntheticOptions options;
  options.hosts = 2;
  model::Trace part = MakeSyntheticTrace(options);
  ASSERT_TRUE(PreparePart(&part).ok());
  const CollectiveRecords records = ExtractCollectiveRecords(part);
  ASSERT_TRUE(CheckCollectiveRecords(records).ok());
  CollectiveRecords broken = records;
  broken.process[0] = static_cast<uint32_t>(broken.process_rank.size());
  EXPECT_FALSE(CheckCollectiveRecords(broken).ok());
  broken = records;
  broken.op[0] = static_cast<uint32_t>(broken.names.size());
  EXPECT_FALSE(CheckCollectiveRecords(broken).ok());
  broken = records;
  broken.end_ns.pop_back();
  EXPECT_FALSE(CheckCollectiveRecords(broken).ok());
}

TEST(CrossRankTest, UnpreparedPartIsAnError) {
  model::Trace part = MakeSyntheticTrace(SyntheticOptions{});
  part.events.phase[0] = model::EventPhase::kBegin;
  EXPECT_FALSE(BuildCallChainsOfPart(&part, CrossRankPlan::Part{}).ok());
}

}  // namespace
}  // namespace teller::reconstruct
