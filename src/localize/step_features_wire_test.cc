// Step 2's exchange as bytes: summaries and their merge survive encoding, features
// finished from a decoded merge equal those from the original, and broken buffers are
// errors that name the offset.
#include "localize/step_features_wire.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

#include "base/byte_io_testing.h"
#include "reconstruct/call_chain_builder.h"
#include "reconstruct/synthetic_trace.h"
#include "reconstruct/trace_parts_testing.h"

namespace teller::localize {
namespace {

using base::Decoded;
using base::ExpectError;
using base::ExpectEveryTruncationFails;

void ExpectSameSummary(const StepFeatureSummary& a, const StepFeatureSummary& b) {
  EXPECT_EQ(a.match, b.match);
  EXPECT_EQ(a.match_min_end_ns, b.match_min_end_ns);
  EXPECT_EQ(a.match_max_end_ns, b.match_max_end_ns);
  EXPECT_EQ(a.composition_family_count, b.composition_family_count);
  EXPECT_EQ(a.composition_steps, b.composition_steps);
  EXPECT_EQ(a.histogram_composition, b.histogram_composition);
  EXPECT_EQ(a.histogram_bigram, b.histogram_bigram);
  EXPECT_EQ(a.histogram_times, b.histogram_times);
  EXPECT_EQ(a.histogram_steps, b.histogram_steps);
}

void ExpectSameMerged(const MergedStepFeatureSummary& a, const MergedStepFeatureSummary& b) {
  EXPECT_EQ(a.match, b.match);
  EXPECT_EQ(a.match_skew_ns, b.match_skew_ns);
  EXPECT_EQ(a.composition_family_count, b.composition_family_count);
  EXPECT_EQ(a.usual_begin, b.usual_begin);
  EXPECT_EQ(a.usual_bigram, b.usual_bigram);
  EXPECT_EQ(a.usual_times, b.usual_times);
}

void ExpectSameFeatures(const StepFeatures& a, const StepFeatures& b) {
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(a.family, b.family);
  EXPECT_EQ(a.count, b.count);
  EXPECT_EQ(a.total_ns, b.total_ns);
  EXPECT_EQ(a.skew_ns, b.skew_ns);
  EXPECT_EQ(a.order_breaks, b.order_breaks);
}

// The reconstructed parts of a random split run by seed.
std::vector<model::Trace> RandomParts(uint64_t seed) {
  base::StatusOr<std::vector<model::Trace>> parts = reconstruct::RandomBuiltParts(seed);
  EXPECT_TRUE(parts.ok()) << parts.status().ToString();
  return parts.ok() ? std::move(*parts) : std::vector<model::Trace>{};
}

TEST(StepFeaturesWireTest, FeaturesFromTheDecodedMergeEqualThoseFromTheOriginal) {
  int64_t skew_rows = 0, break_rows = 0;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    const std::vector<model::Trace> parts = RandomParts(seed);
    std::vector<StepFeatureSummary> sent, received;
    for (const model::Trace& part : parts) {
      sent.push_back(ComputeLocalStepFeatures(part).summary);
      received.push_back(Decoded(DecodeStepFeatureSummary(EncodeStepFeatureSummary(sent.back()))));
      ExpectSameSummary(sent.back(), received.back());
    }
    const MergedStepFeatureSummary merged = MergeStepFeatureSummaries(sent);
    const MergedStepFeatureSummary wired = Decoded(DecodeMergedStepFeatureSummary(
        EncodeMergedStepFeatureSummary(MergeStepFeatureSummaries(received))));
    ExpectSameMerged(merged, wired);
    for (const model::Trace& part : parts) {
      const auto direct = FinishStepFeatures(part, ComputeLocalStepFeatures(part), merged);
      const auto from_wire = FinishStepFeatures(part, ComputeLocalStepFeatures(part), wired);
      ASSERT_TRUE(direct.ok() && from_wire.ok());
      ExpectSameFeatures(*direct, *from_wire);
      for (size_t row = 0; row < direct->size(); ++row) {
        skew_rows += direct->skew_ns[row] > 0;
        break_rows += direct->order_breaks[row] > 0;
      }
    }
  }
  EXPECT_GT(skew_rows, 0);
  EXPECT_GT(break_rows, 0);
}

// A summary and a merge with matches, histogram rows and usual pairs.
struct Buffers {
  std::string summary, merged;
};

Buffers SomeBuffers() {
  const std::vector<model::Trace> parts = RandomParts(3);
  std::vector<StepFeatureSummary> summaries;
  for (const model::Trace& part : parts)
    summaries.push_back(ComputeLocalStepFeatures(part).summary);
  const MergedStepFeatureSummary merged = MergeStepFeatureSummaries(summaries);
  EXPECT_FALSE(summaries[0].match.empty());
  EXPECT_FALSE(summaries[0].histogram_bigram.empty());
  EXPECT_FALSE(merged.usual_bigram.empty());
  return {EncodeStepFeatureSummary(summaries[0]), EncodeMergedStepFeatureSummary(merged)};
}

TEST(StepFeaturesWireTest, EveryTruncationIsAnError) {
  const Buffers buffers = SomeBuffers();
  ExpectEveryTruncationFails(buffers.summary, DecodeStepFeatureSummary);
  ExpectEveryTruncationFails(buffers.merged, DecodeMergedStepFeatureSummary);
}

// Any one byte flipped decodes or is an error, never a crash (run it under ASan); a
// merge that decodes is one FinishStepFeatures can read.
TEST(StepFeaturesWireTest, FlippedBytesNeverCrash) {
  const Buffers buffers = SomeBuffers();
  const std::vector<model::Trace> parts = RandomParts(3);
  const model::Trace& part = parts[0];
  base::ExpectFlippedBytesDecodeOrFail(
      {&buffers.summary, &buffers.merged}, [&](const std::string& bytes) {
        const auto merged = DecodeMergedStepFeatureSummary(bytes);
        if (merged.ok()) (void)FinishStepFeatures(part, ComputeLocalStepFeatures(part), *merged);
        return !DecodeStepFeatureSummary(bytes).ok() + !merged.ok();
      });
}

TEST(StepFeaturesWireTest, ForeignOrOversizedBuffersNameTheOffset) {
  const Buffers buffers = SomeBuffers();
  ExpectError(DecodeStepFeatureSummary(buffers.merged).status(), "0", "magic \"TLFS\"");
  ExpectError(DecodeMergedStepFeatureSummary(buffers.summary).status(), "0", "magic \"TLFM\"");
  std::string bytes = buffers.summary;
  bytes[4] = 9;
  ExpectError(DecodeStepFeatureSummary(bytes).status(), "4", "expected version 1, found 9");
  bytes = buffers.merged;
  const uint64_t huge = uint64_t{1} << 61;
  std::memcpy(bytes.data() + 8, &huge, sizeof(huge));  // match's row count
  ExpectError(DecodeMergedStepFeatureSummary(bytes).status(), "16", "match");
}

TEST(StepFeaturesWireTest, MergesOfBrokenShapeAreAnError) {
  const std::vector<model::Trace> parts = RandomParts(3);
  std::vector<StepFeatureSummary> summaries;
  for (const model::Trace& part : parts)
    summaries.push_back(ComputeLocalStepFeatures(part).summary);
  const MergedStepFeatureSummary merged = MergeStepFeatureSummaries(summaries);
  ASSERT_GE(merged.compositions(), 2u);
  ASSERT_GE(merged.match.size(), 2u);
  const auto decode = [](const MergedStepFeatureSummary& m) {
    return DecodeMergedStepFeatureSummary(EncodeMergedStepFeatureSummary(m)).status();
  };
  EXPECT_TRUE(decode(merged).ok());
  MergedStepFeatureSummary broken = merged;
  broken.match_skew_ns.pop_back();
  EXPECT_NE(decode(broken).message().find("rows of match but"), std::string::npos);
  broken = merged;
  std::swap(broken.match[0], broken.match[1]);
  EXPECT_FALSE(decode(broken).ok());
  broken = merged;
  broken.usual_times.pop_back();
  EXPECT_FALSE(decode(broken).ok());
  broken = merged;
  broken.composition_family_count.pop_back();
  EXPECT_NE(decode(broken).message().find("composition_family_count"), std::string::npos);
  broken = merged;
  broken.usual_begin.back() += 1;
  EXPECT_NE(decode(broken).message().find("usual_begin"), std::string::npos);
  broken = merged;
  broken.usual_begin[1] = broken.usual_begin[2] + 1;  // descending
  EXPECT_FALSE(decode(broken).ok());
  broken = merged;
  broken.usual_bigram[0] = kOperatorFamilyCount * kOperatorFamilyCount;
  EXPECT_FALSE(decode(broken).ok());
}

}  // namespace
}  // namespace teller::localize
