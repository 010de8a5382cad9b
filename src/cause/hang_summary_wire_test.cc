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
  base::ExpectDamageRefused(bytes, [](std::string_view b) { return DecodeCollectiveSummary(b); });
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

// Two culprits and thresholds other than the defaults.
HangQuery TwoProbes() {
  HangOptions options;
  options.min_pending_launch_ns = 7;
  options.min_stalled_ns = 2'000'000'000;
  options.min_stalled_ratio = 12.5;
  options.min_steps_before = 4;
  return QueryWithOptions({{1, 500}, {3, 600}}, options);
}

TEST(CulpritStatesWireTest, ProbesAndStatesSurviveTheRoundTrip) {
  const HangQuery query = TwoProbes();
  const HangQuery query_back = base::Decoded(DecodeHangQuery(EncodeHangQuery(query)));
  EXPECT_EQ(query_back.probes, query.probes);
  const HangOptions read = OptionsOfQuery(query_back);
  EXPECT_EQ(read.min_pending_launch_ns, 7);
  EXPECT_EQ(read.min_stalled_ns, 2'000'000'000);
  EXPECT_EQ(read.min_stalled_ratio, 12.5);
  EXPECT_EQ(read.min_steps_before, 4u);
  EXPECT_EQ(read.min_wait_ns, HangOptions{}.min_wait_ns);  // not the owners' to read
  EXPECT_TRUE(base::Decoded(DecodeHangQuery(EncodeHangQuery({}))).probes.empty());
  const CulpritStatesPart part = TwoStates();
  const CulpritStatesPart back =
      base::Decoded(DecodeCulpritStatesPart(EncodeCulpritStatesPart(part)));
  EXPECT_EQ(back.events_end_ns, part.events_end_ns);
  ASSERT_EQ(back.states.size(), 2u);
  for (size_t i = 0; i < back.states.size(); ++i) ExpectSameState(back.states[i], part.states[i]);
  EXPECT_TRUE(base::Decoded(DecodeCulpritStatesPart(EncodeCulpritStatesPart({}))).states.empty());
  // Without culprits (no hang, or another evidence's), 44 bytes to each process (the
  // thresholds) and 24 bytes from each part.
  EXPECT_EQ(EncodeHangQuery({}).size(), 44u);
  EXPECT_EQ(EncodeCulpritStatesPart({}).size(), 24u);
}

TEST(CulpritStatesWireTest, EveryTruncationIsAnErrorAndFlippedBytesNeverCrash) {
  const std::string query = EncodeHangQuery(TwoProbes());
  base::ExpectDamageRefused(query, [](std::string_view b) { return DecodeHangQuery(b); });
  const std::string states = EncodeCulpritStatesPart(TwoStates());
  base::ExpectDamageRefused(states, [](std::string_view b) { return DecodeCulpritStatesPart(b); });
}

TEST(CulpritStatesWireTest, BadFieldsNameTheirOffset) {
  // Header 8, thresholds 8 + 8 + 8 + 4, count 8: the first rank at 44, the second at 56.
  std::string unordered = EncodeHangQuery(TwoProbes());
  unordered[56] = 1;  // ranks 1, 1
  base::ExpectError(DecodeHangQuery(unordered).status(), "60", "rank 1, above 1 expected");
  std::string many = EncodeHangQuery(TwoProbes());
  many[43] = 1;  // the count's last byte: 2^56 + 2
  base::ExpectError(DecodeHangQuery(many).status(), "44", "72057594037927938 culprits");
  HangQuery negative = TwoProbes();
  negative.min_stalled_ratio = -1;
  base::ExpectError(DecodeHangQuery(EncodeHangQuery(negative)).status(), "32",
                    "the stalled steps' least ratio is -1, at least 0 expected");
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

// Two stalled steps of a part: rank 0 waiting in an all_reduce with a pending launch, rank 1
// in time.sleep.
std::vector<StalledStep> TwoStalledSteps() {
  StalledStep waiting{0, 70, "DecodeEngine.step", 2'000'000'000, 3'000'000'000, 5'000'000, 40,
                      {1, "cudaLaunchKernel", 2'000'100'000, 2'999'900'000}, "all_reduce",
                      "all_reduce"};
  StalledStep sleeping{1, 71, "DecodeEngine.step", 2'000'000'500, 2'999'999'500, 5'000'000, 40,
                       {}, "", "time.sleep"};
  return {waiting, sleeping};
}

TEST(StalledStepsWireTest, StepsSurviveTheRoundTrip) {
  const std::vector<StalledStep> steps = TwoStalledSteps();
  HangReport sent, back;
  SetStalledSteps({steps}, &sent);
  SetStalledSteps({base::Decoded(DecodeStalledSteps(EncodeStalledSteps(steps)))}, &back);
  EXPECT_EQ(back.stalled.size(), 2u);
  EXPECT_EQ(HangDifference(back, sent), "");
  // The bytes as written: no steps is the header and a count of 0.
  EXPECT_EQ(EncodeStalledSteps({}), std::string("TLST\x01\0\0\0\0\0\0\0\0\0\0\0", 16));
  // 92 bytes a step and its strings' lengths.
  const std::string one = EncodeStalledSteps({steps[1]});
  EXPECT_EQ(one.size(), 16u + 92u + std::string("DecodeEngine.steptime.sleep").size());
}

TEST(StalledStepsWireTest, EveryTruncationIsAnErrorAndFlippedBytesNeverCrash) {
  const std::string bytes = EncodeStalledSteps(TwoStalledSteps());
  base::ExpectDamageRefused(bytes, [](std::string_view b) { return DecodeStalledSteps(b); });
  std::string many = bytes;
  many[15] = 1;  // the count's last byte: 2^56 + 2
  base::ExpectError(DecodeStalledSteps(many).status(), "16", "72057594037927938 stalled steps");
  // Header 8, count 8, rank 4, pid 8, name 8 + 17, start 8: the open time at 61.
  std::string negative = bytes;
  negative[68] = static_cast<char>(0x80);  // its top byte
  base::ExpectError(DecodeStalledSteps(negative).status(), "69", "at least 0 expected");
}

// Stalled steps over two parts: appended in plan order, the report's since and longest
// wait over both, the rank outside the collective the culprit, whichever part holds it.
TEST(StalledStepsWireTest, PartsMergeAsTheJoinedTraceWould) {
  const std::vector<StalledStep> steps = TwoStalledSteps();
  HangReport whole, split;
  SetStalledSteps({steps}, &whole);
  SetStalledSteps({{steps[0]}, {}, {steps[1]}}, &split);
  EXPECT_EQ(HangDifference(split, whole), "");
  EXPECT_EQ(split.evidence, HangEvidence::kStalledStep);
  EXPECT_EQ(split.culprits, std::vector<int32_t>{1});
  EXPECT_EQ(split.victims, std::vector<int32_t>{0});
  EXPECT_EQ(split.since_ns, 2'000'000'000);
  EXPECT_EQ(split.longest_wait_ns, 3'000'000'000);
  ASSERT_EQ(split.states.size(), 1u);
  EXPECT_EQ(split.states[0].range, "time.sleep");
  HangReport reversed;
  SetStalledSteps({{steps[1]}, {steps[0]}}, &reversed);
  EXPECT_NE(HangDifference(reversed, whole), "");  // the order is the plan's
  HangReport none;
  SetStalledSteps({{}, {}}, &none);
  EXPECT_FALSE(none.found());
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
