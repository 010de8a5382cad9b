// Request rows (request_rows.h): every part's rows merged by request id are the joined
// trace's requests and step requests, log lines aligned on them land where reconstruction
// puts them on the joined trace, and their bytes survive the wire or fail with an offset.
#include "reconstruct/request_rows.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "base/byte_io_testing.h"
#include "reconstruct/call_chain_builder.h"
#include "reconstruct/request_rows_wire.h"
#include "reconstruct/synthetic_trace.h"
#include "reconstruct/trace_parts_testing.h"

namespace teller::reconstruct {
namespace {

using base::ExpectError;
using base::ExpectEveryTruncationFails;

void ExpectSameRows(const RequestRows& a, const RequestRows& b) {
  EXPECT_EQ(a.process, b.process);
  EXPECT_EQ(a.rank, b.rank);
  EXPECT_EQ(a.start_ns, b.start_ns);
  EXPECT_EQ(a.end_ns, b.end_ns);
  EXPECT_EQ(a.requests_begin, b.requests_begin);
  EXPECT_EQ(a.step_requests, b.step_requests);
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.first_ns, b.first_ns);
  EXPECT_EQ(a.last_ns, b.last_ns);
  EXPECT_EQ(a.step_count, b.step_count);
  EXPECT_EQ(a.processes, b.processes);
}

// A random run by seed as the split path sees it: its parts built apart and, joined, the
// trace one process reconstructs.
struct SplitRun {
  std::vector<model::Trace> parts;
  CrossRankPlan plan;
  model::Trace joined;
  model::LogTable joined_logs;  // before the joined trace's reconstruction
};

// RandomBuiltParts' run; with rank_only_logs, every third log line names only its rank,
// and the first part holds them (orphan logs).
SplitRun RandomSplitRun(uint64_t seed, bool rank_only_logs) {
  SplitRun run;
  model::Trace whole = MakeSyntheticTrace(RandomSplitOptions(seed, 6, /*compositions=*/true));
  for (size_t i = 0; rank_only_logs && i < whole.logs.size(); i += 3) {
    whole.logs.process[i] = model::ProcessIndex::Invalid();
  }
  run.parts = SplitIntoParts(whole, seed, rank_only_logs);
  std::vector<PartBase> bases;
  auto joined = JoinParts(run.parts, &bases);
  EXPECT_TRUE(joined.ok()) << joined.status().ToString();
  if (joined.ok()) run.joined = std::move(*joined);
  run.joined_logs = run.joined.logs;
  EXPECT_TRUE(BuildCallChains(&run.joined).ok());
  auto plan = BuildParts(&run.parts, run.parts.size());
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  if (plan.ok()) run.plan = std::move(*plan);
  return run;
}

RequestRows MergedRows(const std::vector<model::Trace>& parts) {
  std::vector<RequestRows> rows;
  for (const model::Trace& part : parts) {
    rows.push_back(RequestRowsOfPart(part));
    EXPECT_TRUE(CheckRequestRowsAreTheTrace(rows.back(), part).ok());
  }
  return MergeRequestRows(rows);
}

TEST(RequestRowsTest, RandomBuiltPartsMergedByIdAreTheJoinedTracesRequests) {
  int64_t shared = 0;
  for (uint64_t seed = 1; seed <= 16; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    auto built = RandomBuiltParts(seed);
    ASSERT_TRUE(built.ok()) << built.status().ToString();
    const SplitRun run = RandomSplitRun(seed, /*rank_only_logs=*/false);
    const RequestRows merged = MergedRows(*built);
    ASSERT_GT(merged.requests(), 0u);
    const base::Status same = CheckRequestRowsAreTheTrace(merged, run.joined);
    EXPECT_TRUE(same.ok()) << same.ToString();
    ExpectSameRows(merged, RequestRowsOfPart(run.joined));
    size_t per_part = 0;
    for (const model::Trace& part : *built) per_part += part.requests.size();
    shared += per_part > merged.requests();
  }
  EXPECT_GT(shared, 0) << "some draw must serve a request on two parts";
}

// The joined trace's log lines as imported, shifted by the parts' plan and aligned on the
// merged rows, as a first process that holds no joined steps would align them.
model::LogTable AlignedOnRows(const SplitRun& run, const RequestRows& rows,
                              LogAlignmentCounts* counts) {
  model::LogTable logs = run.joined_logs;
  ShiftLogLines(JoinedShare(run.plan), &logs);
  *counts = AlignLogsToRows(rows, run.joined.strings, BuildOptions{}.log_window_ns, &logs);
  return logs;
}

TEST(RequestRowsTest, LogsAlignedOnMergedRowsAlignAsOnTheJoinedTrace) {
  int64_t by_request = 0, by_window = 0, rank_only = 0, shifted = 0;
  for (uint64_t seed = 1; seed <= 16; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    const SplitRun run = RandomSplitRun(seed, /*rank_only_logs=*/seed % 2 == 0);
    const RequestRows merged = MergedRows(run.parts);
    ASSERT_TRUE(CheckRequestRowsAreTheTrace(merged, run.joined).ok());
    LogAlignmentCounts counts;
    const model::LogTable logs = AlignedOnRows(run, merged, &counts);
    ASSERT_GT(logs.size(), 0u);
    EXPECT_EQ(logs.ts_ns, run.joined.logs.ts_ns);
    EXPECT_EQ(logs.step, run.joined.logs.step);
    EXPECT_EQ(logs.alignment, run.joined.logs.alignment);
    const model::Stats& stats = run.joined.stats;
    EXPECT_EQ(counts.by_request, stats.Get(model::stat::kReconstructLogsAlignedRequestId));
    EXPECT_EQ(counts.by_window, stats.Get(model::stat::kReconstructLogsAlignedTimeWindow));
    EXPECT_EQ(counts.unaligned, stats.Get(model::stat::kReconstructLogsUnaligned));
    by_request += counts.by_request;
    by_window += counts.by_window;
    for (size_t i = 0; i < logs.size(); ++i) {
      rank_only += !logs.process[i].valid();
      shifted += !logs.process[i].valid() && logs.ts_ns[i] != run.joined_logs.ts_ns[i];
    }
  }
  EXPECT_GT(by_request, 0);
  EXPECT_GT(by_window, 0);
  EXPECT_GT(rank_only, 0);
  EXPECT_GT(shifted, 0) << "some line of no process must shift by its rank's offset";
}

TEST(RequestRowsTest, BrokenRowsAreAnError) {
  auto built = RandomBuiltParts(3);
  ASSERT_TRUE(built.ok());
  const RequestRows rows = RequestRowsOfPart((*built)[0]);
  ASSERT_TRUE(CheckRequestRows(rows).ok());
  ASSERT_GT(rows.step_requests.size(), 1u);
  RequestRows broken = rows;
  broken.step_requests[0] = static_cast<uint32_t>(rows.requests());
  EXPECT_FALSE(CheckRequestRows(broken).ok());
  broken = rows;
  broken.process[0] = rows.processes;
  EXPECT_FALSE(CheckRequestRows(broken).ok());
  broken = rows;
  broken.requests_begin.back() += 1;
  EXPECT_FALSE(CheckRequestRows(broken).ok());
  broken = rows;
  broken.end_ns.pop_back();
  EXPECT_FALSE(CheckRequestRows(broken).ok());
  broken = rows;
  broken.first_ns.pop_back();
  EXPECT_FALSE(CheckRequestRows(broken).ok());
  broken = rows;
  const uint32_t begin = rows.requests_begin[0];
  ASSERT_GT(rows.requests_begin[1] - begin, 1u) << "the first step serves two requests";
  std::swap(broken.step_requests[begin], broken.step_requests[begin + 1]);
  EXPECT_FALSE(CheckRequestRows(broken).ok()) << "a step's requests out of order";
  broken = rows;
  broken.rank[0] += 1;
  EXPECT_FALSE(CheckRequestRowsAreTheTrace(broken, (*built)[0]).ok());
  broken = rows;
  broken.id[0] += "x";
  EXPECT_FALSE(CheckRequestRowsAreTheTrace(broken, (*built)[0]).ok());
}

std::string SomeRowBytes() {
  auto built = RandomBuiltParts(5);
  EXPECT_TRUE(built.ok());
  return built.ok() ? EncodeRequestRows(MergedRows(*built)) : std::string();
}

TEST(RequestRowsWireTest, RowsSurviveTheirBytes) {
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    auto built = RandomBuiltParts(seed);
    ASSERT_TRUE(built.ok());
    for (const model::Trace& part : *built) {
      const RequestRows rows = RequestRowsOfPart(part);
      ExpectSameRows(base::Decoded(DecodeRequestRows(EncodeRequestRows(rows))), rows);
    }
  }
  RequestRows none;
  none.requests_begin = {0};
  ExpectSameRows(base::Decoded(DecodeRequestRows(EncodeRequestRows(none))), none);
}

TEST(RequestRowsWireTest, EveryTruncationIsAnError) {
  const std::string bytes = SomeRowBytes();
  ASSERT_GT(bytes.size(), 100u);
  ExpectEveryTruncationFails(bytes, DecodeRequestRows);
}

// Any one byte flipped decodes or is an error, never a crash (run it under ASan); what
// decodes is whole.
TEST(RequestRowsWireTest, FlippedBytesNeverCrash) {
  const std::string bytes = SomeRowBytes();
  base::ExpectFlippedBytesDecodeOrFail({&bytes}, [](const std::string& flipped) {
    auto rows = DecodeRequestRows(flipped);
    if (rows.ok()) {
      EXPECT_TRUE(CheckRequestRows(*rows).ok());
    }
    return !rows.ok();
  });
}

void OverwriteU64(std::string* bytes, size_t at, uint64_t value) {
  std::memcpy(bytes->data() + at, &value, sizeof(value));
}

TEST(RequestRowsWireTest, ForeignOversizedOrBrokenBuffersNameTheOffset) {
  const std::string good = SomeRowBytes();
  std::string bytes = good;
  bytes[2] ^= 0x20;
  ExpectError(DecodeRequestRows(bytes).status(), "0", "magic \"TLRQ\"");
  bytes = good;
  bytes[4] = 9;
  ExpectError(DecodeRequestRows(bytes).status(), "4", "expected version 1, found 9");
  bytes = good;
  OverwriteU64(&bytes, 8, uint64_t{1} << 60);  // the process column's row count
  ExpectError(DecodeRequestRows(bytes).status(), "16", "process");

  // A step's first request out of range: whole bytes, broken rows.
  auto built = RandomBuiltParts(5);
  ASSERT_TRUE(built.ok());
  RequestRows rows = RequestRowsOfPart((*built)[0]);
  ASSERT_GT(rows.step_requests.size(), 0u);
  rows.step_requests[0] = 1'000'000;
  bytes = EncodeRequestRows(rows);
  ExpectError(DecodeRequestRows(bytes).status(), std::to_string(bytes.size()),
              "request 1000000 out of range");
}

}  // namespace
}  // namespace teller::reconstruct
