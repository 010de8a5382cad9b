// The bytes of the split reconstruction's exchange (cross_rank.h): a part's
// CollectiveRecords to the place that matches them, each part's CrossRankPlan::Part
// back, and the run's counters and notes to the part that reports the run; then a built
// part's StepOrderRecords to the place that matches them by step order, and each part's
// StepOrderPlan::Part back.
// Columnar and little-endian (base/byte_io.h): a 4-byte magic and a u32 version, then
// each column as a u64 row count and its values, strings as a u64 length and their
// bytes. Decoding checks every length against the bytes left; a short, oversized or
// foreign buffer is an error naming what was expected and the byte offset.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "reconstruct/cross_rank.h"

namespace teller::reconstruct {

inline constexpr uint32_t kCrossRankWireVersion = 2;

std::string EncodeCollectiveRecords(const CollectiveRecords& records);
// The records, checked by CheckCollectiveRecords.
base::StatusOr<CollectiveRecords> DecodeCollectiveRecords(std::string_view bytes);

std::string EncodeCrossRankPart(const CrossRankPlan::Part& part);
// The part's share, its columns of matching lengths.
base::StatusOr<CrossRankPlan::Part> DecodeCrossRankPart(std::string_view bytes);

// The run's counters and notes; the parts are not encoded.
std::string EncodeCrossRankRun(const CrossRankPlan& plan);
// A plan with those counters and notes and no parts (for RecordCrossRankCounters).
base::StatusOr<CrossRankPlan> DecodeCrossRankRun(std::string_view bytes);

std::string EncodeStepOrderRecords(const StepOrderRecords& records);
// The records, checked by CheckStepOrderRecords.
base::StatusOr<StepOrderRecords> DecodeStepOrderRecords(std::string_view bytes);

std::string EncodeStepOrderPart(const StepOrderPlan::Part& part);
// The part's share, its columns of one length (ApplyStepOrderMatches checks its rows).
base::StatusOr<StepOrderPlan::Part> DecodeStepOrderPart(std::string_view bytes);

}  // namespace teller::reconstruct
