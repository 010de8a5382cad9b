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
