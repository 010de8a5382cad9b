#include "capture/tsc_clock.h"

#include <time.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace teller::capture {
namespace {

int64_t NowNs() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}

TEST(TscClockTest, WithoutTscStampsAreMonotonicNs) {
  TscClock clock(false);
  clock.Sample();
  EXPECT_EQ(clock.sample_count(), 0u);
  EXPECT_EQ(clock.ToNs(123456789), 123456789);
}

// A synthetic 2.5 GHz counter: interpolation and extension are exact to 1 ns,
// including across a rate change between intervals.
TEST(TscClockTest, InterpolatesBetweenSamplesExactly) {
  TscClock clock(true);
  const uint64_t t0 = 1'000'000'000'000ull;
  const int64_t m0 = 5'000'000'000;
  auto tsc_at = [&](int64_t dns) { return t0 + static_cast<uint64_t>(dns) * 5 / 2; };
  clock.AddSample(t0, m0);
  EXPECT_EQ(clock.ToNs(t0 + 1000), m0 + 1000);  // one sample: nominal 1 GHz
  clock.AddSample(tsc_at(200'000'000), m0 + 200'000'000);
  for (int64_t dns : {0LL, 1LL, 999LL, 123'456'789LL, 199'999'999LL, 200'000'000LL}) {
    EXPECT_NEAR(clock.ToNs(tsc_at(dns)), m0 + dns, 1) << dns;
  }
  // Past the newest sample and before the oldest: the nearest interval's rate.
  EXPECT_NEAR(clock.ToNs(tsc_at(250'000'000)), m0 + 250'000'000, 1);
  EXPECT_NEAR(clock.ToNs(t0 - 2'500), m0 - 1000, 1);
  // The monotonic clock runs 100 ppm faster from here on (an NTP slew).
  const uint64_t t2 = tsc_at(200'000'000);
  const int64_t m2 = m0 + 200'000'000;
  clock.AddSample(t2 + 2'500'000'000ull, m2 + 1'000'100'000);
  EXPECT_NEAR(clock.ToNs(t2 + 1'250'000'000ull), m2 + 500'050'000, 1);
  EXPECT_NEAR(clock.ToNs(tsc_at(100'000'000)), m0 + 100'000'000, 1);  // old interval kept
}

TEST(TscClockTest, CloseSamplesMergeAndOldOnesRollOff) {
  TscClock clock(true);
  clock.AddSample(1000, 0);
  clock.AddSample(2000, 1000);  // second sample always kept
  clock.AddSample(3000, 2000);  // < 10 ms after the previous kept one: replaces it
  EXPECT_EQ(clock.sample_count(), 2u);
  EXPECT_EQ(clock.ToNs(2500), 1500);
  for (int i = 1; i <= 100; ++i) {
    clock.AddSample(3000 + i * 20'000'000ull, 2000 + i * 20'000'000LL);
  }
  EXPECT_EQ(clock.sample_count(), TscClock::kMaxSamples);
  EXPECT_EQ(clock.ToNs(3000 + 50 * 20'000'000ull + 7), 2000 + 50 * 20'000'000LL + 7);
  clock.AddSample(10, 0);  // going backwards: ignored
  EXPECT_EQ(clock.sample_count(), TscClock::kMaxSamples);
}

// The real counter against clock_gettime: a TSC read between two clock reads converts
// to a time between them (within 500 ns, allowing for a preempted read), for reads
// before, inside and just after the sampled span.
TEST(TscClockTest, RealTscMatchesClockMonotonic) {
  if (!TscClock::TscIsInvariant()) GTEST_SKIP() << "no invariant TSC";
  TscClock clock(true);
  struct Probe {
    int64_t before_ns;
    uint64_t tsc;
    int64_t after_ns;
  };
  std::vector<Probe> probes;
  clock.Sample();
  const int64_t end_ns = NowNs() + 30'000'000;
  while (NowNs() < end_ns) {
    Probe probe;
    probe.before_ns = NowNs();
    probe.tsc = TscClock::ReadTsc();
    probe.after_ns = NowNs();
    probes.push_back(probe);
    if (probes.size() % 1000 == 0) clock.Sample();
  }
  clock.Sample();
  ASSERT_GT(probes.size(), 1000u);
  size_t off = 0;
  int64_t worst_ns = 0;
  for (const Probe& probe : probes) {
    if (probe.after_ns - probe.before_ns > 2000) continue;  // preempted: no bound
    const int64_t ns = clock.ToNs(probe.tsc);
    const int64_t error_ns = std::max(probe.before_ns - ns, ns - probe.after_ns);
    worst_ns = std::max(worst_ns, error_ns);
    if (error_ns > 500) ++off;
  }
  // A noisy VM may preempt a sample itself; nearly all probes must still be exact.
  EXPECT_LT(off, probes.size() / 100) << "worst error " << worst_ns << " ns";
}

// The inline newest-interval path and the general search agree with the rounding
// rule a.ns + round((t - a.tsc) * rate_q32 / 2^32) everywhere: before the newest
// interval, inside it and past it, on odd rates.
TEST(TscClockTest, NewestIntervalMatchesTheGeneralRule) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 50; ++trial) {
    TscClock clock(true);
    uint64_t tsc = rng() % (uint64_t{1} << 50);
    int64_t ns = static_cast<int64_t>(rng() % (uint64_t{1} << 50));
    std::vector<std::pair<uint64_t, int64_t>> samples;
    for (int i = 0; i < 4; ++i) {
      samples.emplace_back(tsc, ns);
      clock.AddSample(tsc, ns);
      tsc += 20'000'000 + rng() % 3'000'000'000ull;  // 0.3 to 3 GHz-ish rates
      ns += 20'000'000 + static_cast<int64_t>(rng() % 1'000'000'000);
    }
    auto expected = [&](uint64_t t) {
      size_t i = samples.size() - 1;
      while (i > 1 && t < samples[i - 1].first) --i;
      const auto [t0, n0] = samples[i - 1];
      const auto [t1, n1] = samples[i];
      const __int128 rate = (static_cast<__int128>(n1 - n0) << 32) /
                            (static_cast<__int128>(t1) - static_cast<__int128>(t0));
      const __int128 dt = static_cast<__int128>(t) - static_cast<__int128>(t0);
      return n0 + static_cast<int64_t>((dt * rate + (__int128{1} << 31)) >> 32);
    };
    for (int probe = 0; probe < 200; ++probe) {
      const uint64_t span = tsc - samples[0].first + 10'000'000'000ull;
      const uint64_t t = samples[0].first - 1'000'000 + rng() % span;
      ASSERT_EQ(clock.ToNs(t), expected(t)) << "trial " << trial << " tsc " << t;
    }
  }
}

// The reader converts each TscRangeBatch stamp with the samples CopySamples gave for
// the batch's first stamp (wire/tsc_conversion.h): the same ns as ToNs, for every stamp
// from that one on, whatever the rates, merges and dropped samples before.
TEST(TscClockTest, CopiedSamplesConvertAsToNs) {
  std::mt19937_64 random(7);
  TscClock clock(true);
  uint64_t tsc = 1'000'000;
  int64_t ns = 1'000'000'000;
  std::vector<wire::TscSample> samples;
  auto reader_ns = [&](uint64_t stamp) {
    if (samples.size() == 1) {
      return static_cast<int64_t>(static_cast<uint64_t>(samples[0].ns) + (stamp - samples[0].tsc));
    }
    const size_t i = wire::TscIntervalEnd(samples.data(), samples.size(), stamp);
    return wire::TscLineNs(samples[i - 1], wire::TscRateQ32(samples[i - 1], samples[i]), stamp);
  };
  for (int round = 0; round < 300; ++round) {
    const int64_t step_ns = static_cast<int64_t>(random() % 30'000'000);  // merges below 10 ms
    tsc += static_cast<uint64_t>(step_ns) * (2 + random() % 2) + random() % 1000;
    ns += step_ns;
    clock.AddSample(tsc, ns);
    const uint64_t oldest = tsc - random() % 100'000'000;
    clock.CopySamples(oldest, &samples);
    ASSERT_FALSE(samples.empty());
    ASSERT_LE(samples.size(), TscClock::kMaxSamples);
    for (int k = 0; k < 20; ++k) {
      const uint64_t stamp = oldest + random() % (tsc + 50'000'000 - oldest);
      ASSERT_EQ(reader_ns(stamp), clock.ToNs(stamp)) << round << " " << stamp;
    }
  }
}

}  // namespace
}  // namespace teller::capture
