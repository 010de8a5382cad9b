// The bytes of a part's request rows (request_rows.h) on their way to the place that
// merges them. Columnar and little-endian (base/byte_io.h): a 4-byte magic and a u32
// version, then each column as a u64 row count and its values, the ids as strings.
// Decoding checks every length against the bytes left and the rows with CheckRequestRows;
// a short, oversized or foreign buffer is an error naming what was expected and the offset.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "reconstruct/request_rows.h"

namespace teller::reconstruct {

inline constexpr uint32_t kRequestRowsWireVersion = 1;

std::string EncodeRequestRows(const RequestRows& rows);
base::StatusOr<RequestRows> DecodeRequestRows(std::string_view bytes);

}  // namespace teller::reconstruct
