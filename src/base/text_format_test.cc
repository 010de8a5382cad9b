#include "base/text_format.h"

#include <gtest/gtest.h>

namespace teller::base {
namespace {

TEST(TextFormatTest, DurationsReadTheSameOnEverySurface) {
  EXPECT_EQ(FormatDuration(1100000), "1.100 ms");
  EXPECT_EQ(FormatDuration(830), "830 ns");
  EXPECT_EQ(FormatDuration(97700), "97.7 us");
  EXPECT_EQ(FormatDuration(1250000000), "1.250 s");
  EXPECT_EQ(FormatDuration(-2500), "-2.5 us");
  EXPECT_EQ(FormatDurationRounded(4.04e6), "4.0 ms");
  EXPECT_EQ(FormatDurationRounded(41200), "41 us");
  EXPECT_EQ(FormatSeconds(600e9, 0), "600 s");
  EXPECT_EQ(FormatSeconds(3.46e9, 1), "3.5 s");
}

TEST(TextFormatTest, UtcClockIsTheTimeOfDayToTheMillisecond) {
  EXPECT_EQ(FormatUtcClock(632'000'000), "00:00:00.632 UTC");
  // 2026-12-06 07:03:17.250 UTC
  EXPECT_EQ(FormatUtcClock(1'796'540'597'250'000'000), "07:03:17.250 UTC");
}

}  // namespace
}  // namespace teller::base
