// The memory trend in parts (oom_report.h, oom_trend_wire.h): a part's samples and the site
// survive the round trip, every cut is an error naming the offset, a flipped byte never
// crashes the decoder; and the trend merged from parts split anywhere is the whole's.
#include "cause/oom_trend_wire.h"

#include <gtest/gtest.h>

#include "base/byte_io_testing.h"

namespace teller::cause {
namespace {

constexpr int64_t kSecondNs = 1'000'000'000;

// Two GPUs' samples over 90 s: GPU 1 every 10 s (allocated growing, reserved given every
// other), GPU 0 three times; some at the same time on both.
MemoryTrendPart Samples() {
  DeviceSamples gpu0{0, 3, {{0, 5, -1}, {50 * kSecondNs, 7, 9}, {80 * kSecondNs, 6, 9}}};
  DeviceSamples gpu1{1, 10, {}};
  for (int64_t i = 0; i < 10; ++i) {
    gpu1.recent.push_back({i * 10 * kSecondNs, 100 + i, i % 2 == 0 ? 200 + i : -1});
  }
  return {gpu0, gpu1};
}

TEST(OomTrendWireTest, ASiteAndAPartSurviveTheRoundTrip) {
  const OomSite site{true, 3, 1234};
  const OomSite back = base::Decoded(DecodeOomSite(EncodeOomSite(site)));
  EXPECT_TRUE(back.found);
  EXPECT_EQ(back.device, 3);
  EXPECT_EQ(back.before_ns, 1234);
  const MemoryTrendPart part = Samples();
  const MemoryTrendPart decoded = base::Decoded(DecodeMemoryTrendPart(EncodeMemoryTrendPart(part)));
  ASSERT_EQ(decoded.size(), 2u);
  EXPECT_EQ(MemoryTrendDifference(MergeMemoryTrends({decoded}, 1), MergeMemoryTrends({part}, 1)),
            "");
  EXPECT_EQ(decoded[1].count, 10u);
  EXPECT_EQ(decoded[1].recent[3].reserved, -1);
}

TEST(OomTrendWireTest, EveryTruncationIsAnErrorAndFlippedBytesNeverCrash) {
  const std::string site = EncodeOomSite({true, 1, 99});
  const std::string part = EncodeMemoryTrendPart(Samples());
  base::ExpectDamageRefused(site, [](std::string_view b) { return DecodeOomSite(b); });
  base::ExpectDamageRefused(part, [](std::string_view b) { return DecodeMemoryTrendPart(b); });
  std::string flag = site;
  flag[8] = 7;  // the found flag, after the magic and the version
  base::ExpectError(DecodeOomSite(flag).status(), "9", "found flag is 7");
  std::string many = part;
  many[15] = 1;  // the GPU count's last byte: 2^56 + 2
  base::ExpectError(DecodeMemoryTrendPart(many).status(), "16", "72057594037927938 GPUs");
}

// The samples of one trace dealt into parts, each summarized as SummarizeMemoryTrend
// would (its own window), merge to the whole trace's trend: the window is the run's last
// minute, ties keep plan order, the GPU with the most samples when none is named.
TEST(OomTrendWireTest, TheTrendMergedFromPartsIsTheWholes) {
  const MemoryTrendPart whole = Samples();
  auto window_of = [](DeviceSamples samples) {
    const int64_t from = samples.recent.back().ts - 60 * kSecondNs;
    std::erase_if(samples.recent, [&](const MemorySample& s) { return s.ts < from; });
    return samples;
  };
  // Part A: GPU 1's first 4 samples and GPU 0's; part B: GPU 1's other 6.
  DeviceSamples a1{1, 4, {whole[1].recent.begin(), whole[1].recent.begin() + 4}};
  DeviceSamples b1{1, 6, {whole[1].recent.begin() + 4, whole[1].recent.end()}};
  const std::vector<MemoryTrendPart> parts = {{window_of(whole[0]), window_of(a1)},
                                              {window_of(b1)}};
  for (int32_t device : {-1, 0, 1, 5}) {
    SCOPED_TRACE(device);
    const MemoryTrend joined = MergeMemoryTrends({{window_of(whole[0]), window_of(whole[1])}},
                                                 device);
    EXPECT_EQ(MemoryTrendDifference(MergeMemoryTrends(parts, device), joined), "");
  }
  const MemoryTrend trend = MergeMemoryTrends(parts, -1);
  EXPECT_EQ(trend.device, 1);
  EXPECT_EQ(trend.samples, 7u);  // 30 s to 90 s
  EXPECT_EQ(trend.first_allocated, 103);
  EXPECT_EQ(trend.last_reserved, 208);
  EXPECT_FALSE(MergeMemoryTrends(parts, 5).found);
}

}  // namespace
}  // namespace teller::cause
