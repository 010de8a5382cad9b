// The bytes of a part's collectives for the hang scan (hang_report.h, CollectiveSummary)
// on their way to the place that merges the parts' (MergeCollectiveSummary). Little-endian
// (base/byte_io.h): a 4-byte magic and a u32 version, then a u64 count of communicators,
// each its name, its durations (a u64 count, 8 bytes each) and its members (a u64 count,
// each rank, sequence, op, size, start and duration); strings as a u64 length and their
// bytes. Decoding checks every count against the bytes left and that members go by rank,
// from 0, with a sequence; a short, oversized or foreign buffer is an error naming what was
// expected and the offset.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "cause/hang_report.h"

namespace teller::cause {

inline constexpr uint32_t kCollectiveSummaryWireVersion = 1;

std::string EncodeCollectiveSummary(const CollectiveSummary& summary);
base::StatusOr<CollectiveSummary> DecodeCollectiveSummary(std::string_view bytes);

}  // namespace teller::cause
