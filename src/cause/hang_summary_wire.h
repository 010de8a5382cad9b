// The bytes of a part's collectives for the hang scan (hang_report.h, CollectiveSummary)
// on their way to the place that merges the parts' (MergeCollectiveSummary). Little-endian
// (base/byte_io.h): a 4-byte magic and a u32 version, then a u64 count of communicators,
// each its name, its durations (a u64 count, 8 bytes each) and its members (a u64 count,
// each rank, sequence, op, size, start and duration); strings as a u64 length and their
// bytes. Decoding checks every count against the bytes left and that members go by rank,
// from 0, with a sequence; a short, oversized or foreign buffer is an error naming what was
// expected and the offset.
//
// What the first process sends the owners to read the hang for (HangQuery): "TLHP", the
// pending launches' threshold (i64), the stalled steps' thresholds (min_stalled_ns i64,
// min_stalled_ratio f64, min_steps_before u32), a u64 count of culprits, each rank and
// since (i32, i64). A part's culprits' states (CulpritStatesPart): "TLHS", its events' last
// end, a u64 count, each rank, a flag byte and its last kernel (name, end), a flag and its
// last runtime call (name, start), a flag and its range (name, start, end), a flag (a
// process of that rank) and its pending launches (count, last call, time, before the end).
// Decoding checks the counts against the bytes left, flags 0 or 1, the culprits' ranks
// ascending and the thresholds not negative. Version 2: the query's stalled-step thresholds.
//
// A part's stalled steps (ReadStalledSteps): "TLST", a u64 count, each its rank (i32), pid
// (i64), name, start, open time, longest step before (i64 each), steps before (u32), its
// process's pending launches (count, last call, time, before the end), the collective it
// waits in and its innermost open range (strings). Decoding checks the count against the
// bytes left and that a step is open a time not negative.
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

inline constexpr uint32_t kCulpritStatesWireVersion = 2;

// What the owners read the hang for: the culprits and their `since` (ReadCulpritStates),
// the age of a pending launch, and when an open step is stalled (ReadStalledSteps); the
// diagnosis's HangOptions of them.
struct HangQuery {
  std::vector<CulpritProbe> probes;
  int64_t min_pending_launch_ns = 0;
  int64_t min_stalled_ns = 0;
  double min_stalled_ratio = 0;
  uint32_t min_steps_before = 0;
};

// The query of the culprits `probes` with the thresholds of `options`, and the options an
// owner reads with (the defaults but the query's thresholds).
HangQuery QueryWithOptions(std::vector<CulpritProbe> probes, const HangOptions& options);
HangOptions OptionsOfQuery(const HangQuery& query);

std::string EncodeHangQuery(const HangQuery& query);
base::StatusOr<HangQuery> DecodeHangQuery(std::string_view bytes);
std::string EncodeCulpritStatesPart(const CulpritStatesPart& part);
base::StatusOr<CulpritStatesPart> DecodeCulpritStatesPart(std::string_view bytes);

inline constexpr uint32_t kStalledStepsWireVersion = 1;

std::string EncodeStalledSteps(const std::vector<StalledStep>& steps);
base::StatusOr<std::vector<StalledStep>> DecodeStalledSteps(std::string_view bytes);

}  // namespace teller::cause
