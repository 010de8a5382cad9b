// The bytes of the findings' rows (feature_rows.h): each part's FeatureRows to the place
// that scores them. The layout of reconstruct/cross_rank_wire.h: a 4-byte magic and a u32
// version, then each column as a u64 row count and its values (base/byte_io.h). What the
// rows of FeatureRowsOfPart determine is left out and derived on decode: mean_ns and share
// (from count, total and the step's duration) and the examples' CSR offsets (a row lists
// min(count, examples) longest instances, and as many delayed ones or none: a flag a row);
// the examples' offsets are u16 when all fit, else u32 (a byte says which).
// Decoding checks every length against the bytes left and the rows with CheckFeatureRows;
// a short, oversized, foreign or inconsistent buffer is an error naming what was expected
// and the byte offset.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "localize/feature_rows.h"

namespace teller::localize {

inline constexpr uint32_t kFeatureRowsWireVersion = 1;

std::string EncodeFeatureRows(const FeatureRows& rows);
base::StatusOr<FeatureRows> DecodeFeatureRows(std::string_view bytes);

}  // namespace teller::localize
