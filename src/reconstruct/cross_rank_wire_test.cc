// The split path's exchange as bytes: records and plan parts survive encoding, parts
// built from decoded plans equal parts built from the originals, and broken buffers
// are errors that name the offset.
#include "reconstruct/cross_rank_wire.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

#include "base/byte_io_testing.h"
#include "reconstruct/call_chain_builder.h"
#include "reconstruct/synthetic_trace.h"
#include "reconstruct/trace_parts_testing.h"

namespace teller::reconstruct {
namespace {

using base::Decoded;
using base::ExpectError;
using base::ExpectEveryTruncationFails;

void ExpectSameRecords(const CollectiveRecords& a, const CollectiveRecords& b) {
  EXPECT_EQ(a.names, b.names);
  EXPECT_EQ(a.process_rank, b.process_rank);
  EXPECT_EQ(a.process_host, b.process_host);
  EXPECT_EQ(a.process_node, b.process_node);
  EXPECT_EQ(a.process_pid, b.process_pid);
  EXPECT_EQ(a.process_has_events, b.process_has_events);
  EXPECT_EQ(a.collective, b.collective);
  EXPECT_EQ(a.communicator, b.communicator);
  EXPECT_EQ(a.op, b.op);
  EXPECT_EQ(a.sequence, b.sequence);
  EXPECT_EQ(a.process, b.process);
  EXPECT_EQ(a.start_ns, b.start_ns);
  EXPECT_EQ(a.end_ns, b.end_ns);
  EXPECT_EQ(a.host_side, b.host_side);
}

void ExpectSamePart(const CrossRankPlan::Part& a, const CrossRankPlan::Part& b) {
  EXPECT_EQ(a.process_rank, b.process_rank);
  EXPECT_EQ(a.clock_offset_ns, b.clock_offset_ns);
  EXPECT_EQ(a.clock_uncertainty_ns, b.clock_uncertainty_ns);
  EXPECT_EQ(a.clock_aligned, b.clock_aligned);
  EXPECT_EQ(a.rank, b.rank);
  EXPECT_EQ(a.rank_clock_offset_ns, b.rank_clock_offset_ns);
  EXPECT_EQ(a.match, b.match);
  EXPECT_EQ(a.match_collective, b.match_collective);
}

void ExpectSameRun(const CrossRankPlan& a, const CrossRankPlan& b) {
  EXPECT_EQ(a.counters.matches, b.counters.matches);
  EXPECT_EQ(a.counters.unmatched, b.counters.unmatched);
  EXPECT_EQ(a.counters.matched_by_order, b.counters.matched_by_order);
  EXPECT_EQ(a.counters.order_op_mismatch, b.counters.order_op_mismatch);
  EXPECT_EQ(a.counters.unaligned_hosts, b.counters.unaligned_hosts);
  EXPECT_EQ(a.notes, b.notes);
}

// What the cross-rank pass writes into a built part.
void ExpectSameBuiltPart(const model::Trace& a, const model::Trace& b) {
  EXPECT_EQ(a.processes.clock_offset_ns, b.processes.clock_offset_ns);
  EXPECT_EQ(a.processes.clock_uncertainty_ns, b.processes.clock_uncertainty_ns);
  EXPECT_EQ(a.events.start_ns, b.events.start_ns);
  EXPECT_EQ(a.events.dur_ns, b.events.dur_ns);
  EXPECT_EQ(a.logs.ts_ns, b.logs.ts_ns);
  EXPECT_EQ(a.collective_matches.match, b.collective_matches.match);
  EXPECT_EQ(a.collective_matches.event, b.collective_matches.event);
  EXPECT_EQ(a.collective_matches.rank, b.collective_matches.rank);
  EXPECT_EQ(a.steps.global_step, b.steps.global_step);
  EXPECT_EQ(a.steps.start_ns, b.steps.start_ns);
  EXPECT_EQ(a.nodes.event, b.nodes.event);
}

// The parts of a random run by seed, each as if imported alone.
std::vector<model::Trace> RandomParts(uint64_t seed) {
  const SyntheticOptions options = RandomSplitOptions(seed, 4, /*compositions=*/false);
  const model::Trace whole = MakeSyntheticTrace(options);
  std::vector<model::Trace> parts = SplitIntoParts(whole, seed, /*orphan_logs=*/true);
  return parts;
}

TEST(CrossRankWireTest, PartsBuiltFromDecodedPlansEqualPartsBuiltFromTheOriginals) {
  int64_t matched_rows = 0, moved_processes = 0;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    std::vector<model::Trace> direct = RandomParts(seed);
    std::vector<model::Trace> wired = RandomParts(seed);
    const base::StatusOr<CrossRankPlan> direct_plan = BuildParts(&direct, direct.size());
    ASSERT_TRUE(direct_plan.ok()) << direct_plan.status().ToString();

    std::vector<CollectiveRecords> records;
    for (model::Trace& part : wired) {
      ASSERT_TRUE(PreparePart(&part).ok());
      const CollectiveRecords sent = ExtractCollectiveRecords(part);
      records.push_back(Decoded(DecodeCollectiveRecords(EncodeCollectiveRecords(sent))));
      ExpectSameRecords(sent, records.back());
    }
    const CrossRankPlan plan = MatchCollectiveRecords(records, /*align_clocks=*/true);
    ASSERT_EQ(plan.parts.size(), wired.size());
    ExpectSameRun(*direct_plan, Decoded(DecodeCrossRankRun(EncodeCrossRankRun(plan))));
    for (size_t k = 0; k < wired.size(); ++k) {
      SCOPED_TRACE(::testing::Message() << "part " << k);
      const CrossRankPlan::Part share =
          Decoded(DecodeCrossRankPart(EncodeCrossRankPart(plan.parts[k])));
      ExpectSamePart(direct_plan->parts[k], share);
      ASSERT_TRUE(BuildCallChainsOfPart(&wired[k], share).ok());
      ExpectSameBuiltPart(direct[k], wired[k]);
      matched_rows += static_cast<int64_t>(share.match.size());
      for (int64_t offset : share.clock_offset_ns) moved_processes += offset != 0;
    }
  }
  EXPECT_GT(matched_rows, 0);
  EXPECT_GT(moved_processes, 0);
}

// An encoded buffer of each kind, from the first run whose first part has matches and
// aligned clocks.
struct Buffers {
  std::string records, part, run;
};

Buffers SomeBuffers() {
  for (uint64_t seed = 1; seed <= 32; ++seed) {
    std::vector<model::Trace> parts = RandomParts(seed);
    std::vector<CollectiveRecords> records;
    for (model::Trace& part : parts) {
      EXPECT_TRUE(PreparePart(&part).ok());
      records.push_back(ExtractCollectiveRecords(part));
    }
    CrossRankPlan plan = MatchCollectiveRecords(records, /*align_clocks=*/true);
    if (plan.parts[0].match.empty() || plan.parts[0].clock_offset_ns.empty()) continue;
    if (plan.notes.empty()) plan.notes.push_back("a note");
    return {EncodeCollectiveRecords(records[0]), EncodeCrossRankPart(plan.parts[0]),
            EncodeCrossRankRun(plan)};
  }
  ADD_FAILURE() << "no run with matches and aligned clocks";
  return {};
}

TEST(CrossRankWireTest, EveryTruncationIsAnError) {
  const Buffers buffers = SomeBuffers();
  ASSERT_GT(buffers.records.size(), 100u);
  ExpectEveryTruncationFails(buffers.records, DecodeCollectiveRecords);
  ExpectEveryTruncationFails(buffers.part, DecodeCrossRankPart);
  ExpectEveryTruncationFails(buffers.run, DecodeCrossRankRun);
}

// Any one byte flipped decodes or is an error, never a crash (run it under ASan).
TEST(CrossRankWireTest, FlippedBytesNeverCrash) {
  const Buffers buffers = SomeBuffers();
  base::ExpectFlippedBytesDecodeOrFail(
      {&buffers.records, &buffers.part, &buffers.run}, [](const std::string& bytes) {
        return !DecodeCollectiveRecords(bytes).ok() + !DecodeCrossRankPart(bytes).ok() +
               !DecodeCrossRankRun(bytes).ok();
      });
}

void PutU64(std::string* bytes, size_t at, uint64_t value) {
  std::memcpy(bytes->data() + at, &value, sizeof(value));
}

TEST(CrossRankWireTest, ForeignOrOversizedBuffersNameTheOffset) {
  const Buffers buffers = SomeBuffers();
  std::string bytes = buffers.records;
  bytes[1] ^= 0x20;
  ExpectError(DecodeCollectiveRecords(bytes).status(), "0", "magic \"TLCR\"");
  ExpectError(DecodeCrossRankPart(buffers.records).status(), "0", "magic \"TLCP\"");

  bytes = buffers.part;
  bytes[4] = 7;
  ExpectError(DecodeCrossRankPart(bytes).status(), "4", "expected version 2, found 7");

  bytes = buffers.records;
  PutU64(&bytes, 8, uint64_t{1} << 60);  // the name count
  ExpectError(DecodeCollectiveRecords(bytes).status(), "16", "names");

  bytes = buffers.part;
  PutU64(&bytes, 8, uint64_t{1} << 61);  // process_rank's row count
  ExpectError(DecodeCrossRankPart(bytes).status(), "16", "process_rank");

  bytes = buffers.run;
  PutU64(&bytes, 8 + 5 * 8, UINT64_MAX);  // the note count
  ExpectError(DecodeCrossRankRun(bytes).status(), "56", "notes");
}

void ExpectSameStepOrderRecords(const StepOrderRecords& a, const StepOrderRecords& b) {
  EXPECT_EQ(a.names, b.names);
  EXPECT_EQ(a.processes, b.processes);
  EXPECT_EQ(a.global_step, b.global_step);
  EXPECT_EQ(a.rank, b.rank);
  EXPECT_EQ(a.process, b.process);
  EXPECT_EQ(a.start_ns, b.start_ns);
  EXPECT_EQ(a.event, b.event);
  EXPECT_EQ(a.name, b.name);
}

// The parts of a random run by seed whose collective kernels carry no collective rows
// (matched by step order), built from their shares of the plan.
std::vector<model::Trace> BuiltPartsWithoutCollectiveRows(uint64_t seed, CrossRankPlan* plan) {
  SyntheticOptions options = RandomSplitOptions(seed, 4, /*compositions=*/seed % 2 == 0);
  options.collective_rows = false;
  std::vector<model::Trace> parts = SplitIntoParts(MakeSyntheticTrace(options), seed);
  base::StatusOr<CrossRankPlan> built = BuildParts(&parts, parts.size());
  EXPECT_TRUE(built.ok()) << built.status().ToString();
  if (built.ok()) *plan = std::move(*built);
  return parts;
}

TEST(CrossRankWireTest, PartsMatchedByStepOrderFromDecodedBytesEqualTheDirectOnes) {
  int64_t matched = 0;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    CrossRankPlan plan;
    std::vector<model::Trace> direct = BuiltPartsWithoutCollectiveRows(seed, &plan);
    std::vector<model::Trace> wired = BuiltPartsWithoutCollectiveRows(seed, &plan);
    std::vector<StepOrderRecords> sent, received;
    for (const model::Trace& part : wired) {
      sent.push_back(ExtractStepOrderRecords(part));
      received.push_back(Decoded(DecodeStepOrderRecords(EncodeStepOrderRecords(sent.back()))));
      ExpectSameStepOrderRecords(sent.back(), received.back());
    }
    const uint32_t first_id = FirstStepOrderMatchId(plan);
    const StepOrderPlan direct_plan = MatchStepOrderRecords(sent, first_id);
    const StepOrderPlan wired_plan = MatchStepOrderRecords(received, first_id);
    for (size_t k = 0; k < wired.size(); ++k) {
      SCOPED_TRACE(::testing::Message() << "part " << k);
      const StepOrderPlan::Part share =
          Decoded(DecodeStepOrderPart(EncodeStepOrderPart(wired_plan.parts[k])));
      EXPECT_EQ(share.match, direct_plan.parts[k].match);
      EXPECT_EQ(share.event, direct_plan.parts[k].event);
      ASSERT_TRUE(ApplyStepOrderMatches(direct_plan.parts[k], &direct[k]).ok());
      ASSERT_TRUE(ApplyStepOrderMatches(share, &wired[k]).ok());
      ExpectSameBuiltPart(direct[k], wired[k]);
      matched += static_cast<int64_t>(share.match.size());
    }
  }
  EXPECT_GT(matched, 0);
}

// An encoded step-order records buffer and plan part, from the first run whose first part
// has matches by step order.
Buffers SomeStepOrderBuffers() {
  for (uint64_t seed = 1; seed <= 32; ++seed) {
    CrossRankPlan plan;
    std::vector<model::Trace> parts = BuiltPartsWithoutCollectiveRows(seed, &plan);
    std::vector<StepOrderRecords> records;
    for (const model::Trace& part : parts) records.push_back(ExtractStepOrderRecords(part));
    const StepOrderPlan step_plan = MatchStepOrderRecords(records, FirstStepOrderMatchId(plan));
    if (step_plan.parts[0].match.empty()) continue;
    return {EncodeStepOrderRecords(records[0]), EncodeStepOrderPart(step_plan.parts[0]), ""};
  }
  ADD_FAILURE() << "no run with matches by step order";
  return {};
}

TEST(CrossRankWireTest, EveryTruncationOfStepOrderBytesIsAnError) {
  const Buffers buffers = SomeStepOrderBuffers();
  ASSERT_GT(buffers.records.size(), 100u);
  ExpectEveryTruncationFails(buffers.records, DecodeStepOrderRecords);
  ExpectEveryTruncationFails(buffers.part, DecodeStepOrderPart);
}

TEST(CrossRankWireTest, FlippedStepOrderBytesNeverCrash) {
  const Buffers buffers = SomeStepOrderBuffers();
  base::ExpectFlippedBytesDecodeOrFail({&buffers.records, &buffers.part}, [](const std::string& bytes) {
    return !DecodeStepOrderRecords(bytes).ok() + !DecodeStepOrderPart(bytes).ok();
  });
}

TEST(CrossRankWireTest, ForeignOrOversizedStepOrderBuffersNameTheOffset) {
  const Buffers buffers = SomeStepOrderBuffers();
  ExpectError(DecodeStepOrderPart(buffers.records).status(), "0", "magic \"TLSP\"");
  ExpectError(DecodeStepOrderRecords(buffers.part).status(), "0", "magic \"TLSR\"");
  std::string bytes = buffers.records;
  bytes[4] = 9;
  ExpectError(DecodeStepOrderRecords(bytes).status(), "4", "expected version 2, found 9");
  bytes = buffers.records;
  PutU64(&bytes, 8, uint64_t{1} << 60);  // the name count
  ExpectError(DecodeStepOrderRecords(bytes).status(), "16", "names");
  bytes = buffers.part;
  PutU64(&bytes, 8, uint64_t{1} << 61);  // match's row count
  ExpectError(DecodeStepOrderPart(bytes).status(), "16", "match");
}

TEST(CrossRankWireTest, DecodedStepOrderColumnsOfOtherLengthsOrOutOfRangeAreAnError) {
  StepOrderRecords records;
  records.names = {"ncclKernel_AllReduce"};
  records.processes = 1;
  records.global_step = {0, 0};
  records.rank = {0, 0};
  records.process = {0, 0};
  records.start_ns = {1};  // one row short
  records.event = {3, 4};
  records.name = {0, 0};
  EXPECT_FALSE(DecodeStepOrderRecords(EncodeStepOrderRecords(records)).ok());
  records.start_ns.push_back(2);
  EXPECT_TRUE(DecodeStepOrderRecords(EncodeStepOrderRecords(records)).ok());
  records.process[1] = 1;  // past the part's processes
  EXPECT_FALSE(DecodeStepOrderRecords(EncodeStepOrderRecords(records)).ok());

  StepOrderPlan::Part part;
  part.match = {model::CollectiveMatchId(7), model::CollectiveMatchId(7)};
  part.event = {3};
  const base::Status status = DecodeStepOrderPart(EncodeStepOrderPart(part)).status();
  EXPECT_NE(status.message().find("2 rows of match but 1 of event"), std::string::npos)
      << status.ToString();
}

TEST(CrossRankWireTest, DecodedColumnsOfOtherLengthsAreAnError) {
  CollectiveRecords records;
  records.names = {"comm"};
  records.process_rank = {0};
  records.process_host = {CollectiveRecords::kNoName};
  records.process_node = {0};
  records.process_pid = {10};
  records.process_has_events = {1};
  records.collective = {0, 1};
  records.communicator = {0};  // one row short
  records.op = {CollectiveRecords::kNoName, CollectiveRecords::kNoName};
  records.sequence = {-1, -1};
  records.process = {0, 0};
  records.start_ns = {1, 2};
  records.end_ns = {2, 3};
  records.host_side = {0, 0};
  EXPECT_FALSE(DecodeCollectiveRecords(EncodeCollectiveRecords(records)).ok());
  records.communicator.push_back(0);
  EXPECT_TRUE(DecodeCollectiveRecords(EncodeCollectiveRecords(records)).ok());

  CrossRankPlan::Part part;
  part.clock_offset_ns = {5, 6};
  part.clock_uncertainty_ns = {1, 1};
  part.clock_aligned = {1};
  const base::Status status = DecodeCrossRankPart(EncodeCrossRankPart(part)).status();
  EXPECT_NE(status.message().find("2 rows of clock_offset_ns but 1 of clock_aligned"),
            std::string::npos)
      << status.ToString();
}

}  // namespace
}  // namespace teller::reconstruct
