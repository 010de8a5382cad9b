#include "wire/clock_fit.h"

#include <gtest/gtest.h>

namespace teller::wire {
namespace {

TEST(ClockFitTest, CorrectsDriftBetweenTwoPairsExactly) {
  // Monotonic runs 1000 ns fast per second against realtime.
  HostClockConverter clocks({{1700000000000000000, 5000000000, std::nullopt},
                             {1700000001000000000, 6000001000, std::nullopt}});
  int64_t t = 0;
  ASSERT_TRUE(clocks.ToTrace(ClockDomain::kMonotonic, 5000000000, &t));
  EXPECT_EQ(t, 1700000000000000000);
  ASSERT_TRUE(clocks.ToTrace(ClockDomain::kMonotonic, 6000001000, &t));
  EXPECT_EQ(t, 1700000001000000000);
  // Halfway in monotonic time is halfway in realtime.
  ASSERT_TRUE(clocks.ToTrace(ClockDomain::kMonotonic, 5500000500, &t));
  EXPECT_EQ(t, 1700000000500000000);
  // 1000001 monotonic ns are 1000000 realtime ns exactly.
  ASSERT_TRUE(clocks.ToTrace(ClockDomain::kMonotonic, 5001000001, &t));
  EXPECT_EQ(t, 1700000000001000000);
  // 1001001 monotonic ns are 1000999.999 realtime ns, which round to 1001000.
  ASSERT_TRUE(clocks.ToTrace(ClockDomain::kMonotonic, 5001001001, &t));
  EXPECT_EQ(t, 1700000000001001000);
  ASSERT_TRUE(clocks.ToTrace(ClockDomain::kMonotonic, 5000000001, &t));
  EXPECT_EQ(t, 1700000000000000001);  // 0.999999 ns rounds to 1
  // Beyond the last pair the last segment's line continues (drift still corrected).
  ASSERT_TRUE(clocks.ToTrace(ClockDomain::kMonotonic, 7000002000, &t));
  EXPECT_EQ(t, 1700000002000000000);
  // Before the first pair too.
  ASSERT_TRUE(clocks.ToTrace(ClockDomain::kMonotonic, 4000000000 - 1000, &t));
  EXPECT_EQ(t, 1699999999000000000);
  // No GPU samples: the GPU clock cannot be converted.
  EXPECT_FALSE(clocks.has_gpu());
  EXPECT_FALSE(clocks.ToTrace(ClockDomain::kGpu, 5, &t));
  ASSERT_TRUE(clocks.ToTrace(ClockDomain::kRealtime, 5, &t));
  EXPECT_EQ(t, 5);
}

TEST(ClockFitTest, PiecewiseLinearAcrossSeveralPairsInAnyOrder) {
  // Slope 1 on [0, 100], slope 2 on [100, 200] (in source ns).
  ClockFit fit({{200, 1300}, {0, 1000}, {100, 1100}});
  EXPECT_EQ(fit.ToRealtime(50), 1050);
  EXPECT_EQ(fit.ToRealtime(100), 1100);
  EXPECT_EQ(fit.ToRealtime(150), 1200);
  EXPECT_EQ(fit.ToRealtime(250), 1400);
  EXPECT_EQ(fit.ToRealtime(-10), 990);
}

TEST(ClockFitTest, OnePairIsAnOffsetAndNoneIsIdentity) {
  ClockFit one({{10, 1000}});
  EXPECT_EQ(one.ToRealtime(15), 1005);
  ClockFit none;
  EXPECT_EQ(none.ToRealtime(15), 15);
  ClockFit duplicates({{10, 1000}, {10, 2000}});
  EXPECT_EQ(duplicates.sample_count(), 1u);
}

TEST(ClockFitTest, GpuClockFitsItsOwnSamples) {
  HostClockConverter clocks({{1000, 10, 500}, {3000, 2010, 2500}});
  int64_t t = 0;
  ASSERT_TRUE(clocks.ToTrace(ClockDomain::kGpu, 1500, &t));
  EXPECT_EQ(t, 2000);
  ASSERT_TRUE(clocks.ToTrace(ClockDomain::kMonotonic, 1010, &t));
  EXPECT_EQ(t, 2000);
}

}  // namespace
}  // namespace teller::wire
