// A part's crash report as bytes (crash_report_wire.h): a simulated crash survives the
// round trip, every cut or foreign buffer is an error naming the offset, a flipped byte
// never crashes the decoder; and the earliest of the parts' crashes is the run's.
#include "cause/crash_report_wire.h"

#include <gtest/gtest.h>

#include "base/byte_io_testing.h"
#include "sim/simulated_trace_testing.h"

namespace teller::cause {
namespace {

const CrashReport& SimulatedCrash() {
  static const CrashReport report =
      FindCrash(sim::SimulatedTrace(sim::SmallConfig(sim::EngineKind::kVllmV1Online, 4, 12, 5),
                                    "illegal_memory_access:rank=1,onset=8", "crash_report_wire"));
  return report;
}

TEST(CrashReportWireTest, ACrashSurvivesTheRoundTrip) {
  const CrashReport& report = SimulatedCrash();
  ASSERT_TRUE(report.found && report.has_suspect);
  const CrashReport decoded = base::Decoded(DecodeCrashReport(EncodeCrashReport(report)));
  EXPECT_EQ(CrashDifference(decoded, report), "");
  const CrashReport none = base::Decoded(DecodeCrashReport(EncodeCrashReport(CrashReport{})));
  EXPECT_FALSE(none.found);
  EXPECT_EQ(CrashDifference(none, CrashReport{}), "");
}

TEST(CrashReportWireTest, EveryTruncationIsAnErrorAndFlippedBytesNeverCrash) {
  const std::string bytes = EncodeCrashReport(SimulatedCrash());
  base::ExpectDamageRefused(bytes, [](std::string_view b) { return DecodeCrashReport(b); });
}

TEST(CrashReportWireTest, ForeignOrDamagedBuffersNameTheOffset) {
  const std::string bytes = EncodeCrashReport(SimulatedCrash());
  std::string foreign = bytes;
  foreign[0] = 'X';
  base::ExpectError(DecodeCrashReport(foreign).status(), "0", "magic");
  std::string flag = bytes;
  flag[8] = 7;  // the found flag, after the magic and the version
  base::ExpectError(DecodeCrashReport(flag).status(), "9", "found flag is 7");
}

// The run's crash is the earliest part's, the first on a tie; none found: none.
TEST(CrashReportWireTest, TheEarliestPartsCrashIsTheRuns) {
  CrashReport early = SimulatedCrash(), late = SimulatedCrash(), tie = SimulatedCrash();
  late.at_ns += 1;
  late.rank = 3;
  tie.rank = 2;
  EXPECT_EQ(MergeCrashReports({CrashReport{}, late, early, tie}).rank, early.rank);
  EXPECT_FALSE(MergeCrashReports({CrashReport{}, CrashReport{}}).found);
  EXPECT_NE(CrashDifference(early, late).find("rank"), std::string::npos);
}

}  // namespace
}  // namespace teller::cause
