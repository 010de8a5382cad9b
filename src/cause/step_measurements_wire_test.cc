// Step 3a's exchange as bytes: summaries, their merge and the parts' rows survive
// encoding, a part's measurements from a decoded merge equal those from the original, the
// map fitted from decoded rows equals the one from the originals, and broken buffers are
// errors that name the offset.
#include "cause/step_measurements_wire.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

#include "base/byte_io_testing.h"
#include "cause/step_measurements_testing.h"
#include "reconstruct/call_chain_builder.h"
#include "reconstruct/synthetic_trace.h"
#include "reconstruct/trace_parts_testing.h"

namespace teller::cause {
namespace {

using base::Decoded;
using base::ExpectError;
using base::ExpectEveryTruncationFails;

void ExpectSameSummary(const MeasurementSummary& a, const MeasurementSummary& b) {
  EXPECT_EQ(a.match, b.match);
  EXPECT_EQ(a.device_members, b.device_members);
  EXPECT_EQ(a.host_members, b.host_members);
  EXPECT_EQ(a.device_last_start_ns, b.device_last_start_ns);
  EXPECT_EQ(a.host_last_start_ns, b.host_last_start_ns);
  EXPECT_EQ(a.global_step, b.global_step);
  EXPECT_EQ(a.largest_size, b.largest_size);
  EXPECT_EQ(a.has_step_requests, b.has_step_requests);
}

void ExpectSameMerged(const MergedMeasurementSummary& a, const MergedMeasurementSummary& b) {
  EXPECT_EQ(a.match, b.match);
  EXPECT_EQ(a.members, b.members);
  EXPECT_EQ(a.has_device, b.has_device);
  EXPECT_EQ(a.last_arrival_ns, b.last_arrival_ns);
  EXPECT_EQ(a.global_step, b.global_step);
  EXPECT_EQ(a.largest_size, b.largest_size);
  EXPECT_EQ(a.any_step_requests, b.any_step_requests);
}

void ExpectSameRows(const StepMeasurements& a, const StepMeasurements& b) {
  ASSERT_EQ(a.steps(), b.steps());
  EXPECT_EQ(a.rank, b.rank);
  EXPECT_EQ(a.number, b.number);
  EXPECT_EQ(a.group, b.group);
  EXPECT_EQ(a.start_ns, b.start_ns);
  EXPECT_EQ(a.size, b.size);
  EXPECT_EQ(a.padded_size, b.padded_size);
  EXPECT_EQ(a.context_spread, b.context_spread);
  EXPECT_EQ(a.cells_begin, b.cells_begin);
  EXPECT_TRUE(a.channel == b.channel);
  EXPECT_TRUE(a.family == b.family);
  EXPECT_EQ(a.value, b.value);
  EXPECT_EQ(a.count, b.count);
}

// Besides ExpectSameRows: what chooses and groups the scored steps.
void ExpectSameGrouping(const StepMeasurements& a, const StepMeasurements& b) {
  EXPECT_EQ(a.process, b.process);
  EXPECT_EQ(a.context, b.context);
  EXPECT_EQ(a.requests, b.requests);
  EXPECT_EQ(a.serving, b.serving);
  EXPECT_EQ(a.name, b.name);
  EXPECT_TRUE(a.phase == b.phase);
  EXPECT_EQ(a.structure_bucket, b.structure_bucket);
  EXPECT_EQ(a.families, b.families);
  EXPECT_EQ(a.device_work, b.device_work);
  EXPECT_EQ(a.process_node, b.process_node);
  EXPECT_EQ(a.process_host, b.process_host);
  EXPECT_EQ(a.names, b.names);
  EXPECT_EQ(a.has_step_requests, b.has_step_requests);
  EXPECT_EQ(a.has_tokens_arg, b.has_tokens_arg);
}

// The reconstructed parts of a random split run by seed.
std::vector<model::Trace> RandomParts(uint64_t seed) {
  base::StatusOr<std::vector<model::Trace>> parts = reconstruct::RandomBuiltParts(seed);
  EXPECT_TRUE(parts.ok()) << parts.status().ToString();
  return parts.ok() ? std::move(*parts) : std::vector<model::Trace>{};
}

StepMeasurements Measured(const model::Trace& part, const MergedMeasurementSummary& merged) {
  return Decoded(MeasureStepsOfPart(part, localize::ComputeStepFeatures(part), merged));
}

TEST(StepMeasurementsWireTest, RowsFromTheDecodedMergeEqualThoseFromTheOriginal) {
  int64_t matches = 0, padded_rows = 0;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    const std::vector<model::Trace> parts = RandomParts(seed);
    std::vector<MeasurementSummary> sent, received;
    for (const model::Trace& part : parts) {
      sent.push_back(SummarizeMeasurementInputs(part));
      received.push_back(Decoded(DecodeMeasurementSummary(EncodeMeasurementSummary(sent.back()))));
      ExpectSameSummary(sent.back(), received.back());
    }
    const MergedMeasurementSummary merged = MergeMeasurementSummaries(sent);
    const MergedMeasurementSummary wired = Decoded(DecodeMergedMeasurementSummary(
        EncodeMergedMeasurementSummary(MergeMeasurementSummaries(received))));
    ExpectSameMerged(merged, wired);
    matches += static_cast<int64_t>(merged.match.size());
    for (const model::Trace& part : parts) {
      const StepMeasurements direct = Measured(part, merged);
      ExpectSameRows(direct, Measured(part, wired));
      for (double padded : direct.padded_size) padded_rows += padded > 0;
    }
  }
  EXPECT_GT(matches, 0);
  EXPECT_GT(padded_rows, 0);
}

TEST(StepMeasurementsWireTest, MapFromDecodedRowsEqualsTheOriginalsMap) {
  int64_t cells = 0;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    const std::vector<StepMeasurements> sent = MeasureParts(RandomParts(seed));
    std::vector<StepMeasurements> received;
    for (const StepMeasurements& rows : sent) {
      received.push_back(Decoded(DecodeStepMeasurements(EncodeStepMeasurements(rows))));
      ExpectSameRows(rows, received.back());
      ExpectSameGrouping(rows, received.back());
    }
    const DeviationMap map = FitDeviationMap(sent, DeviationOptions{});
    const DeviationMap from_received = FitDeviationMap(received, DeviationOptions{});
    ExpectSameMap(from_received, map);
    EXPECT_EQ(from_received.node_names, map.node_names);
    for (size_t i = 0; i < map.steps.size() && i < from_received.steps.size(); ++i) {
      EXPECT_EQ(from_received.steps[i].step, map.steps[i].step);
    }
    cells += static_cast<int64_t>(map.cells.size());
  }
  EXPECT_GT(cells, 0);
}

// A summary, a merge with matches and global steps, and a part's rows.
struct Buffers {
  std::string summary, merged, rows;
};

Buffers SomeBuffers() {
  const std::vector<model::Trace> parts = RandomParts(3);
  std::vector<MeasurementSummary> summaries;
  for (const model::Trace& part : parts) summaries.push_back(SummarizeMeasurementInputs(part));
  const MergedMeasurementSummary merged = MergeMeasurementSummaries(summaries);
  EXPECT_FALSE(summaries[0].match.empty());
  EXPECT_FALSE(summaries[0].global_step.empty());
  const StepMeasurements rows = Measured(parts[0], merged);
  EXPECT_GT(rows.cells(), 0u);
  EXPECT_FALSE(rows.names.empty());
  return {EncodeMeasurementSummary(summaries[0]), EncodeMergedMeasurementSummary(merged),
          EncodeStepMeasurements(rows)};
}

TEST(StepMeasurementsWireTest, EveryTruncationIsAnError) {
  const Buffers buffers = SomeBuffers();
  ExpectEveryTruncationFails(buffers.summary, DecodeMeasurementSummary);
  ExpectEveryTruncationFails(buffers.merged, DecodeMergedMeasurementSummary);
  ExpectEveryTruncationFails(buffers.rows, DecodeStepMeasurements);
}

// Any one byte flipped decodes or is an error, never a crash (run it under ASan); a
// merge that decodes is one MeasureStepsOfPart can read, rows that decode ones
// ConcatMeasurements can renumber.
TEST(StepMeasurementsWireTest, FlippedBytesNeverCrash) {
  const Buffers buffers = SomeBuffers();
  const std::vector<model::Trace> parts = RandomParts(3);
  const model::Trace& part = parts[0];
  const localize::StepFeatures features = localize::ComputeStepFeatures(part);
  base::ExpectFlippedBytesDecodeOrFail(
      {&buffers.summary, &buffers.merged, &buffers.rows}, [&](const std::string& bytes) {
        const auto merged = DecodeMergedMeasurementSummary(bytes);
        if (merged.ok()) (void)MeasureStepsOfPart(part, features, *merged);
        const auto rows = DecodeStepMeasurements(bytes);
        if (rows.ok()) (void)ConcatMeasurements({*rows, *rows});
        return !DecodeMeasurementSummary(bytes).ok() + !merged.ok() + !rows.ok();
      });
}

TEST(StepMeasurementsWireTest, ForeignOrOversizedBuffersNameTheOffset) {
  const Buffers buffers = SomeBuffers();
  ExpectError(DecodeMeasurementSummary(buffers.merged).status(), "0", "magic \"TLMS\"");
  ExpectError(DecodeMergedMeasurementSummary(buffers.summary).status(), "0", "magic \"TLMM\"");
  ExpectError(DecodeStepMeasurements(buffers.merged).status(), "0", "magic \"TLMR\"");
  std::string bytes = buffers.summary;
  bytes[4] = 9;
  ExpectError(DecodeMeasurementSummary(bytes).status(), "4",
              "expected version " + std::to_string(kStepMeasurementsWireVersion) + ", found 9");
  bytes = buffers.merged;
  const uint64_t huge = uint64_t{1} << 61;
  std::memcpy(bytes.data() + 8, &huge, sizeof(huge));  // match's row count
  ExpectError(DecodeMergedMeasurementSummary(bytes).status(), "16", "match");
}

TEST(StepMeasurementsWireTest, MergesOfBrokenShapeAreAnError) {
  const std::vector<model::Trace> parts = RandomParts(3);
  std::vector<MeasurementSummary> summaries;
  for (const model::Trace& part : parts) summaries.push_back(SummarizeMeasurementInputs(part));
  const MergedMeasurementSummary merged = MergeMeasurementSummaries(summaries);
  ASSERT_GE(merged.match.size(), 2u);
  ASSERT_GE(merged.global_step.size(), 2u);
  const auto decode = [](const MergedMeasurementSummary& m) {
    return DecodeMergedMeasurementSummary(EncodeMergedMeasurementSummary(m)).status();
  };
  EXPECT_TRUE(decode(merged).ok());
  MergedMeasurementSummary broken = merged;
  broken.members.pop_back();
  EXPECT_NE(decode(broken).message().find("rows of match but"), std::string::npos);
  broken = merged;
  broken.has_device.pop_back();
  EXPECT_NE(decode(broken).message().find("has_device"), std::string::npos);
  broken = merged;
  broken.last_arrival_ns.push_back(0);
  EXPECT_NE(decode(broken).message().find("last_arrival_ns"), std::string::npos);
  broken = merged;
  broken.largest_size.pop_back();
  EXPECT_NE(decode(broken).message().find("largest_size"), std::string::npos);
  broken = merged;
  std::swap(broken.match[0], broken.match[1]);
  EXPECT_NE(decode(broken).message().find("match ids"), std::string::npos);
  broken = merged;
  broken.global_step[1] = broken.global_step[0];
  EXPECT_NE(decode(broken).message().find("global steps"), std::string::npos);
}

TEST(StepMeasurementsWireTest, RowsOfBrokenShapeAreAnError) {
  const std::vector<StepMeasurements> parts = MeasureParts(RandomParts(3));
  const StepMeasurements& rows = parts[0];
  ASSERT_GE(rows.steps(), 2u);
  ASSERT_GE(rows.cells_begin[1], 2u);  // the first step has two cells
  const auto decode = [](const StepMeasurements& r) {
    return DecodeStepMeasurements(EncodeStepMeasurements(r)).status();
  };
  EXPECT_TRUE(decode(rows).ok());
  StepMeasurements broken = rows;
  broken.structure_bucket.pop_back();
  EXPECT_NE(decode(broken).message().find("structure_bucket"), std::string::npos);
  broken = rows;
  broken.cells_begin.back() += 1;
  EXPECT_NE(decode(broken).message().find("cells_begin"), std::string::npos);
  broken = rows;
  std::swap(broken.channel[0], broken.channel[1]);
  std::swap(broken.family[0], broken.family[1]);
  EXPECT_NE(decode(broken).message().find("not ascending"), std::string::npos);
  broken = rows;
  broken.channel[0] = static_cast<Channel>(kChannelCount);
  EXPECT_NE(decode(broken).message().find("out of range"), std::string::npos);
  broken = rows;
  broken.name[0] = static_cast<uint32_t>(rows.names.size());
  EXPECT_NE(decode(broken).message().find("step 0"), std::string::npos);
  broken = rows;
  broken.process_host[0] = static_cast<uint32_t>(rows.names.size());
  EXPECT_NE(decode(broken).message().find("process 0"), std::string::npos);
}

}  // namespace
}  // namespace teller::cause
