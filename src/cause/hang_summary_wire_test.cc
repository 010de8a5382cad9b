// The hang scan's collectives in parts (hang_report.h, hang_summary_wire.h): a part's
// summary survives the round trip, every cut is an error, a flipped byte never crashes the
// decoder, a bad field names its offset; and parts merge as the joined trace's rows would.
#include "cause/hang_summary_wire.h"

#include <gtest/gtest.h>

#include "base/byte_io_testing.h"

namespace teller::cause {
namespace {

// Two communicators: "0" with ranks 0 and 1 (rank 1 one collective behind), "1" with rank 2.
CollectiveSummary TwoCommunicators() {
  CommunicatorCollectives tp{"0", {10, 12, 9000}, {}};
  tp.members.push_back({0, 7, "allreduce", 4096, 100, 9000});
  tp.members.push_back({1, 6, "allreduce", 4096, 80, 12});
  CommunicatorCollectives pp{"1", {5}, {{2, 3, "send", 64, 40, 5}}};
  return {tp, pp};
}

void ExpectSameMember(const CollectiveMember& a, const CollectiveMember& b) {
  EXPECT_EQ(a.rank, b.rank);
  EXPECT_EQ(a.sequence, b.sequence);
  EXPECT_EQ(a.op, b.op);
  EXPECT_EQ(a.size_bytes, b.size_bytes);
  EXPECT_EQ(a.start_ns, b.start_ns);
  EXPECT_EQ(a.dur_ns, b.dur_ns);
}

TEST(CollectiveSummaryWireTest, ASummarySurvivesTheRoundTrip) {
  const CollectiveSummary summary = TwoCommunicators();
  const CollectiveSummary back =
      base::Decoded(DecodeCollectiveSummary(EncodeCollectiveSummary(summary)));
  ASSERT_EQ(back.size(), 2u);
  for (size_t c = 0; c < back.size(); ++c) {
    EXPECT_EQ(back[c].name, summary[c].name);
    EXPECT_EQ(back[c].durations, summary[c].durations);
    ASSERT_EQ(back[c].members.size(), summary[c].members.size());
    for (size_t m = 0; m < back[c].members.size(); ++m) {
      ExpectSameMember(back[c].members[m], summary[c].members[m]);
    }
  }
  EXPECT_TRUE(base::Decoded(DecodeCollectiveSummary(EncodeCollectiveSummary({}))).empty());
}

TEST(CollectiveSummaryWireTest, EveryTruncationIsAnErrorAndFlippedBytesNeverCrash) {
  const std::string bytes = EncodeCollectiveSummary(TwoCommunicators());
  base::ExpectEveryTruncationFails(bytes,
                                   [](std::string_view b) { return DecodeCollectiveSummary(b); });
  base::ExpectFlippedBytesDecodeOrFail(
      {&bytes}, [](std::string_view b) { return DecodeCollectiveSummary(b).ok(); });
  std::string many = bytes;
  many[15] = 1;  // the communicator count's last byte: 2^56 + 2
  base::ExpectError(DecodeCollectiveSummary(many).status(), "16", "72057594037927938 communicators");
}

TEST(CollectiveSummaryWireTest, BadFieldsNameTheirOffset) {
  // Header 8, count 8, name 8 + 1, durations 8 + 24, member count 8: rank 0 at 65.
  constexpr size_t kFirstRank = 65;
  std::string unordered = EncodeCollectiveSummary(TwoCommunicators());
  unordered[kFirstRank] = 1;  // ranks 1, 1
  base::ExpectError(DecodeCollectiveSummary(unordered).status(), "122",
                    "rank 1, above 1 expected");
  CollectiveSummary negative = TwoCommunicators();
  negative[1].members[0].sequence = -4;
  base::ExpectError(DecodeCollectiveSummary(EncodeCollectiveSummary(negative)).status(), "216",
                    "sequence -4, at least 0 expected");
}

// Two culprits' states of a part: rank 1 with every field, rank 3 with none but its process.
CulpritStatesPart TwoStates() {
  CulpritStatesPart part;
  part.events_end_ns = 9000;
  CulpritStatePart& full = part.states.emplace_back();
  full.rank = 1;
  full.has_kernel = true;
  full.last_kernel = "gemm";
  full.last_kernel_end_ns = 800;
  full.has_runtime_call = true;
  full.last_runtime_call = "cudaLaunchKernel";
  full.last_runtime_call_ns = 700;
  full.has_range = true;
  full.range = "forward";
  full.range_start_ns = 600;
  full.range_end_ns = 9000;
  full.has_process = true;
  full.pending = {2, "cudaLaunchKernel", 650, 8350};
  CulpritStatePart& bare = part.states.emplace_back();
  bare.rank = 3;
  bare.has_process = true;
  return part;
}

void ExpectSameState(const CulpritStatePart& a, const CulpritStatePart& b) {
  EXPECT_EQ(a.rank, b.rank);
  EXPECT_EQ(a.has_kernel, b.has_kernel);
  EXPECT_EQ(a.last_kernel, b.last_kernel);
  EXPECT_EQ(a.last_kernel_end_ns, b.last_kernel_end_ns);
  EXPECT_EQ(a.has_runtime_call, b.has_runtime_call);
  EXPECT_EQ(a.last_runtime_call, b.last_runtime_call);
  EXPECT_EQ(a.last_runtime_call_ns, b.last_runtime_call_ns);
  EXPECT_EQ(a.has_range, b.has_range);
  EXPECT_EQ(a.range, b.range);
  EXPECT_EQ(a.range_start_ns, b.range_start_ns);
  EXPECT_EQ(a.range_end_ns, b.range_end_ns);
  EXPECT_EQ(a.has_process, b.has_process);
  EXPECT_EQ(a.pending.count, b.pending.count);
  EXPECT_EQ(a.pending.last_call, b.pending.last_call);
  EXPECT_EQ(a.pending.last_ns, b.pending.last_ns);
  EXPECT_EQ(a.pending.before_end_ns, b.pending.before_end_ns);
}

TEST(CulpritStatesWireTest, ProbesAndStatesSurviveTheRoundTrip) {
  const CulpritQuery query{{{1, 500}, {3, -20}}, 1'000'000'000};
  const CulpritQuery query_back = base::Decoded(DecodeCulpritQuery(EncodeCulpritQuery(query)));
  EXPECT_EQ(query_back.probes, query.probes);
  EXPECT_EQ(query_back.min_pending_launch_ns, query.min_pending_launch_ns);
  EXPECT_TRUE(base::Decoded(DecodeCulpritQuery(EncodeCulpritQuery({}))).probes.empty());
  const CulpritStatesPart part = TwoStates();
  const CulpritStatesPart back =
      base::Decoded(DecodeCulpritStatesPart(EncodeCulpritStatesPart(part)));
  EXPECT_EQ(back.events_end_ns, part.events_end_ns);
  ASSERT_EQ(back.states.size(), 2u);
  for (size_t i = 0; i < back.states.size(); ++i) ExpectSameState(back.states[i], part.states[i]);
  EXPECT_TRUE(base::Decoded(DecodeCulpritStatesPart(EncodeCulpritStatesPart({}))).states.empty());
  // Without culprits (no hang, or another evidence's), 24 bytes each way per part.
  EXPECT_EQ(EncodeCulpritQuery({}).size(), 24u);
  EXPECT_EQ(EncodeCulpritStatesPart({}).size(), 24u);
}

TEST(CulpritStatesWireTest, EveryTruncationIsAnErrorAndFlippedBytesNeverCrash) {
  const std::string query = EncodeCulpritQuery({{{1, 500}, {3, 600}}, 7});
  base::ExpectEveryTruncationFails(query, [](std::string_view b) { return DecodeCulpritQuery(b); });
  base::ExpectFlippedBytesDecodeOrFail(
      {&query}, [](std::string_view b) { return DecodeCulpritQuery(b).ok(); });
  const std::string states = EncodeCulpritStatesPart(TwoStates());
  base::ExpectEveryTruncationFails(states,
                                   [](std::string_view b) { return DecodeCulpritStatesPart(b); });
  base::ExpectFlippedBytesDecodeOrFail(
      {&states}, [](std::string_view b) { return DecodeCulpritStatesPart(b).ok(); });
}

TEST(CulpritStatesWireTest, BadFieldsNameTheirOffset) {
  // Header 8, threshold 8, count 8: the first rank at 24, the second at 36.
  std::string unordered = EncodeCulpritQuery({{{1, 500}, {3, 600}}, 7});
  unordered[36] = 1;  // ranks 1, 1
  base::ExpectError(DecodeCulpritQuery(unordered).status(), "40", "rank 1, above 1 expected");
  std::string many = EncodeCulpritQuery({{{1, 500}}, 7});
  many[23] = 1;  // the count's last byte: 2^56 + 1
  base::ExpectError(DecodeCulpritQuery(many).status(), "24", "72057594037927937 culprits");
  // Header 8, end 8, count 8, rank 4: the first flag at 28.
  std::string flag = EncodeCulpritStatesPart(TwoStates());
  flag[28] = 2;
  base::ExpectError(DecodeCulpritStatesPart(flag).status(), "29",
                    "whether it has a kernel is 2, 0 or 1 expected");
}

// A culprit's state over two parts: each field the later of the parts' (the later part on a
// tie), the range open when it ends at the run's last end, the first part's pending launches.
TEST(CulpritStatesWireTest, PartsMergeAsTheJoinedTraceWould) {
  HangReport report;
  report.evidence = HangEvidence::kTrace;
  report.waits.push_back({0, "0", 7, "allreduce", 4096, 100, 9000, {1}});
  report.culprits = {1};
  CulpritStatesPart first;
  first.events_end_ns = 9000;
  CulpritStatePart& a = first.states.emplace_back();
  a.rank = 1;
  a.has_kernel = true;
  a.last_kernel = "gemm";
  a.last_kernel_end_ns = 800;
  a.has_range = true;
  a.range = "step";
  a.range_start_ns = 50;
  a.range_end_ns = 9500;
  a.has_process = true;
  a.pending.count = 1;
  CulpritStatesPart second;
  second.events_end_ns = 9500;
  CulpritStatePart& b = second.states.emplace_back();
  b.rank = 1;
  b.has_kernel = true;
  b.last_kernel = "softmax";
  b.last_kernel_end_ns = 800;  // a tie: the later part's
  b.has_runtime_call = true;
  b.last_runtime_call = "cudaMemcpy";
  b.last_runtime_call_ns = 90;
  b.has_process = true;
  b.pending.count = 5;
  ASSERT_TRUE(SetCulpritStates({first, second}, TwoCommunicators(), &report).ok());
  ASSERT_EQ(report.states.size(), 1u);
  const CulpritState& state = report.states[0];
  EXPECT_EQ(state.last_sequence, 6);
  EXPECT_EQ(state.last_kernel, "softmax");
  EXPECT_EQ(state.last_runtime_call, "cudaMemcpy");
  EXPECT_EQ(state.range, "step");
  EXPECT_TRUE(state.range_open);  // 9500, the second part's last end
  EXPECT_EQ(state.pending.count, 1u);
  second.states[0].rank = 2;
  const base::Status mismatched = SetCulpritStates({first, second}, {}, &report);
  ASSERT_FALSE(mismatched.ok());
  EXPECT_NE(mismatched.message().find("part 1's state 0 is rank 2's, rank 1's expected"),
            std::string::npos)
      << mismatched.ToString();
}

// A communicator split over two parts: durations appended, each rank's last collective the
// higher sequence, the later part's on a tie; a communicator new in the later part after
// the run's own.
TEST(CollectiveSummaryWireTest, PartsMergeAsTheJoinedRowsWould) {
  CollectiveSummary run = {{"0", {10}, {{0, 7, "allreduce", 8, 100, 10}, {3, 2, "x", 1, 1, 1}}}};
  CollectiveSummary later = {{"9", {4}, {{5, 1, "send", 2, 3, 4}}},
                             {"0", {20, 30}, {{0, 7, "allgather", 8, 200, 20},
                                              {1, 5, "allreduce", 8, 50, 30},
                                              {3, 1, "y", 1, 1, 1}}}};
  MergeCollectiveSummary(later, &run);
  ASSERT_EQ(run.size(), 2u);
  EXPECT_EQ(run[0].name, "0");
  EXPECT_EQ(run[1].name, "9");
  EXPECT_EQ(run[0].durations, (std::vector<model::DurationNs>{10, 20, 30}));
  ASSERT_EQ(run[0].members.size(), 3u);
  EXPECT_EQ(run[0].members[0].op, "allgather");  // the tie goes to the later part
  EXPECT_EQ(run[0].members[1].rank, 1);
  EXPECT_EQ(run[0].members[2].op, "x");  // the higher sequence stays
}

}  // namespace
}  // namespace teller::cause
