// The split path: parts of a trace (some of its processes each) reconstructed apart
// from a plan over their collective records equal the joined trace's reconstruction
// restricted to each part.
#include "reconstruct/cross_rank.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string_view>
#include <tuple>

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
    std::vector<model::Trace> parts = SplitIntoParts(whole, seed, /*orphan_logs=*/true);
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

void ExpectSameCounters(const model::Trace& report, const model::Trace& joined) {
  for (const model::StatDef* stat :
       {&model::stat::kReconstructCollectiveMatches, &model::stat::kReconstructCollectivesUnmatched,
        &model::stat::kReconstructCollectivesMatchedByStepOrder,
        &model::stat::kReconstructCollectivesStepOrderSkipped}) {
    EXPECT_EQ(report.stats.Get(*stat), joined.stats.Get(*stat)) << stat->name;
  }
}

// The collective rows of odd sequence numbers dropped: their kernels match by step order
// after the others matched by their rows.
void DropCollectiveRowsOfOddSequences(model::CollectiveTable* table) {
  model::CollectiveTable kept;
  for (size_t c = 0; c < table->size(); ++c) {
    if (table->sequence[c] % 2 == 1) continue;
#define TELLER_KEEP_ROW(name, ...) kept.name.push_back(table->name[c]);
#define TELLER_NO_DERIVED(...)
    TELLER_COLLECTIVE_COLUMNS(TELLER_KEEP_ROW, TELLER_NO_DERIVED)
#undef TELLER_KEEP_ROW
#undef TELLER_NO_DERIVED
  }
  *table = std::move(kept);
}

// Each name pool reversed in every other part, so that the parts' pools differ.
void ReverseNames(StepOrderRecords* records) {
  std::reverse(records->names.begin(), records->names.end());
  const uint32_t last = static_cast<uint32_t>(records->names.size()) - 1;
  for (uint32_t& name : records->name) name = last - name;
}

// Steps 4-6 of cross_rank.h over built parts; the run's counters go to `report`.
StepOrderPlan MatchPartsByStepOrder(std::vector<model::Trace>* parts, const CrossRankPlan& plan,
                                    model::Trace* report) {
  std::vector<StepOrderRecords> records;
  for (size_t k = 0; k < parts->size(); ++k) {
    records.push_back(ExtractStepOrderRecords((*parts)[k]));
    if (k % 2 == 1) ReverseNames(&records.back());
    EXPECT_TRUE(CheckStepOrderRecords(records.back()).ok());
  }
  StepOrderPlan step_plan = MatchStepOrderRecords(records, FirstStepOrderMatchId(plan));
  for (size_t k = 0; k < parts->size(); ++k) {
    EXPECT_TRUE(ApplyStepOrderMatches(step_plan.parts[k], &(*parts)[k]).ok());
  }
  RecordCrossRankCounters(plan, report);
  RecordStepOrderCounters(step_plan, report);
  return step_plan;
}

// A random run whose collective kernels carry no collective rows (or, in every fourth,
// half of them do), some with one rank's step of another name, some with unknown ranks,
// split into 2-3 parts.
TEST(CrossRankTest, PartsMatchedByStepOrderEqualTheJoinedTrace) {
  int64_t matched = 0, skipped = 0, after_rows = 0;
  for (uint64_t seed = 1; seed <= 24; ++seed) {
    SyntheticOptions options = RandomSplitOptions(seed, 5, /*compositions=*/seed % 2 == 0);
    options.collective_rows = seed % 4 == 2;
    options.collective_sequence = options.collective_sequence || options.collective_rows;
    if (seed % 3 == 0) options.odd_comm_step = static_cast<int>(seed % 5);
    SCOPED_TRACE(::testing::Message() << "seed " << seed << " processes " << options.processes);
    model::Trace whole = MakeSyntheticTrace(options);
    if (seed % 4 == 3) std::fill(whole.processes.rank.begin(), whole.processes.rank.end(), -1);
    DropCollectiveRowsOfOddSequences(&whole.collectives);
    std::vector<model::Trace> parts = SplitIntoParts(whole, seed);
    std::vector<PartBase> bases;
    base::StatusOr<model::Trace> joined_or = JoinParts(parts, &bases);
    ASSERT_TRUE(joined_or.ok()) << joined_or.status().ToString();
    model::Trace& joined = *joined_or;
    ASSERT_TRUE(BuildCallChains(&joined).ok());

    const base::StatusOr<CrossRankPlan> plan_or = BuildParts(&parts, parts.size());
    ASSERT_TRUE(plan_or.ok()) << plan_or.status().ToString();
    model::Trace report;
    const StepOrderPlan step_plan = MatchPartsByStepOrder(&parts, *plan_or, &report);
    ExpectSameCounters(report, joined);
    const std::set<model::CollectiveMatchId> ids(joined.collective_matches.match.begin(),
                                                 joined.collective_matches.match.end());
    EXPECT_EQ(static_cast<int64_t>(ids.size()),
              joined.stats.Get(model::stat::kReconstructCollectiveMatches))
        << "step-order ids continue after the row matches' ids";
    for (size_t k = 0; k < parts.size(); ++k) {
      SCOPED_TRACE(::testing::Message() << "part " << k);
      ExpectSameMatches(joined, bases[k], parts[k]);
    }
    matched += step_plan.matched;
    skipped += step_plan.skipped;
    after_rows += FirstStepOrderMatchId(*plan_or) > 0 && step_plan.matched > 0;
  }
  EXPECT_GT(matched, 0);
  EXPECT_GT(after_rows, 0) << "some draw must number step-order matches after row matches";
  EXPECT_GT(skipped, 0) << "some draw must differ in a step's collective names";
}

TEST(CrossRankTest, BrokenStepOrderRecordsAndPlansAreAnError) {
  SyntheticOptions options;
  options.collective_rows = false;
  model::Trace part = MakeSyntheticTrace(options);
  ASSERT_TRUE(BuildCallChainsOfPart(&part, CrossRankPlan::Part{}).ok());
  const StepOrderRecords records = ExtractStepOrderRecords(part);
  ASSERT_GT(records.size(), 0u);
  ASSERT_TRUE(CheckStepOrderRecords(records).ok());
  StepOrderRecords broken = records;
  broken.process[0] = broken.processes;
  EXPECT_FALSE(CheckStepOrderRecords(broken).ok());
  broken = records;
  broken.name[0] = static_cast<uint32_t>(broken.names.size());
  EXPECT_FALSE(CheckStepOrderRecords(broken).ok());
  broken = records;
  broken.start_ns.pop_back();
  EXPECT_FALSE(CheckStepOrderRecords(broken).ok());
  StepOrderPlan plan = MatchStepOrderRecords({records}, 0);
  ASSERT_GT(plan.parts[0].event.size(), 0u);
  StepOrderPlan::Part share = plan.parts[0];
  share.event[0] = static_cast<uint32_t>(part.events.size());
  EXPECT_FALSE(ApplyStepOrderMatches(share, &part).ok());
  EXPECT_TRUE(ApplyStepOrderMatches(plan.parts[0], &part).ok());
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

// Records of one part's processes: (host, pid, rank, has events) each, no collectives.
CollectiveRecords ProcessRecords(
    const std::vector<std::tuple<std::string, int64_t, int32_t, bool>>& processes) {
  CollectiveRecords records;
  for (const auto& [host, pid, rank, has_events] : processes) {
    records.process_host.push_back(static_cast<uint32_t>(records.names.size()));
    records.names.push_back(host);
    records.process_pid.push_back(pid);
    records.process_rank.push_back(rank);
    records.process_node.push_back(-1);
    records.process_has_events.push_back(has_events ? 1 : 0);
  }
  return records;
}

// As BundleParts::NumberUnrankedProcesses on the joined parts: a bundle's unranked
// processes with events in (host, pid) order after the highest rank up to the bundle's
// last part; a lone unranked one, one without events, and parts of no bundle keep theirs.
TEST(CrossRankTest, UnrankedProcessesOfABundleAreNumberedInHostAndPidOrder) {
  std::vector<CollectiveRecords> parts = {
      ProcessRecords({{"a", 5, 3, true}}),        // a Kineto file, rank 3
      ProcessRecords({{"node1", 20, -1, true}}),  // bundle 1
      ProcessRecords({{"node0", 30, -1, true}, {"node0", 7, -1, false}}),
      ProcessRecords({{"node0", 9, -1, true}}),
      ProcessRecords({{"b", 1, -1, true}}),  // bundle 4: alone, stays
      ProcessRecords({{"c", 1, 8, true}}),   // later: not counted
  };
  const std::vector<uint8_t> changed = NumberUnrankedProcesses({-1, 1, 1, 1, 4, -1}, &parts);
  EXPECT_EQ(changed, (std::vector<uint8_t>{0, 1, 1, 1, 0, 0}));
  EXPECT_EQ(parts[1].process_rank, std::vector<int32_t>{6});
  EXPECT_EQ(parts[2].process_rank, (std::vector<int32_t>{5, -1}));
  EXPECT_EQ(parts[3].process_rank, std::vector<int32_t>{4});
  EXPECT_EQ(parts[4].process_rank, std::vector<int32_t>{-1});
  // Without the parts' bundles, nothing is numbered.
  EXPECT_EQ(NumberUnrankedProcesses({}, &parts), std::vector<uint8_t>(6, 0));
}

// A share's ranks are set before its matches are written (the matches carry ranks), and
// on the part's log lines that had none.
TEST(CrossRankTest, AShareSetsItsPartsRanks) {
  SyntheticOptions options;
  options.hosts = 2;
  model::Trace part = MakeSyntheticTrace(options);
  ASSERT_TRUE(PreparePart(&part).ok());
  CrossRankPlan plan = MatchCollectiveRecords({ExtractCollectiveRecords(part)}, true);
  CrossRankPlan::Part share = plan.parts[0];
  for (size_t p = 0; p < part.processes.size(); ++p) {
    share.process_rank.push_back(static_cast<int32_t>(40 + p));
  }
  CrossRankPlan::Part too_short = share;
  too_short.process_rank.pop_back();
  model::Trace copy = MakeSyntheticTrace(options);
  ASSERT_TRUE(PreparePart(&copy).ok());
  EXPECT_FALSE(BuildCallChainsOfPart(&copy, too_short).ok());
  ASSERT_TRUE(BuildCallChainsOfPart(&part, share).ok());
  EXPECT_EQ(part.processes.rank, share.process_rank);
  for (size_t i = 0; i < part.collective_matches.size(); ++i) {
    EXPECT_GE(part.collective_matches.rank[i], 40);
  }
}

TEST(CrossRankTest, UnpreparedPartIsAnError) {
  model::Trace part = MakeSyntheticTrace(SyntheticOptions{});
  part.events.phase[0] = model::EventPhase::kBegin;
  EXPECT_FALSE(BuildCallChainsOfPart(&part, CrossRankPlan::Part{}).ok());
}

}  // namespace
}  // namespace teller::reconstruct
