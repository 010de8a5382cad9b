// The bytes of a part's collectives for the hang scan (hang_report.h, CollectiveSummary)
// on their way to the place that merges the parts' (MergeCollectiveSummary). Little-endian
// (base/byte_io.h): a 4-byte magic and a u32 version, then a u64 count of communicators,
// each its name, its durations (a u64 count, 8 bytes each) and its members (a u64 count,
// each rank, sequence, op, size, start and duration); strings as a u64 length and their
// bytes. Decoding checks every count against the bytes left and that members go by rank,
// from 0, with a sequence; a short, oversized or foreign buffer is an error naming what was
// expected and the offset.
//
// The culprits the first process sends the owners (CulpritQuery): "TLHP", the pending
// launches' threshold (i64), a u64 count, each rank and since (i32, i64). A part's
// culprits' states (CulpritStatesPart): "TLHS", its events' last end, a u64 count, each
// rank, a flag byte and its last kernel (name, end), a flag and its last runtime call
// (name, start), a flag and its range (name, start, end), a flag (a process of that rank)
// and its pending launches (count, last call, time, before the end). Decoding checks the
// counts against the bytes left, flags 0 or 1, and the culprits' ranks ascending.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "cause/hang_report.h"

namespace teller::cause {

inline constexpr uint32_t kCollectiveSummaryWireVersion = 1;

std::string EncodeCollectiveSummary(const CollectiveSummary& summary);
base::StatusOr<CollectiveSummary> DecodeCollectiveSummary(std::string_view bytes);

inline constexpr uint32_t kCulpritStatesWireVersion = 1;

// What the owners read the culprits' states for (ReadCulpritStates): the culprits and
// their `since`, and the age of a pending launch (HangOptions::min_pending_launch_ns).
struct CulpritQuery {
  std::vector<CulpritProbe> probes;
  int64_t min_pending_launch_ns = 0;
};

std::string EncodeCulpritQuery(const CulpritQuery& query);
base::StatusOr<CulpritQuery> DecodeCulpritQuery(std::string_view bytes);
std::string EncodeCulpritStatesPart(const CulpritStatesPart& part);
base::StatusOr<CulpritStatesPart> DecodeCulpritStatesPart(std::string_view bytes);

}  // namespace teller::cause
