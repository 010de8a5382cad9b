// The bytes of the cause operators' queries and answers (cause_operators.h) between the
// first process of a distributed diagnosis and the processes that hold the ranks
// (fleet/analysis_parts.h). Little-endian (base/byte_io.h): a 4-byte magic and a u32
// version, then a u64 count of causes and each cause's query (its window, then its cells:
// rank, channel, family, role and rows) or answer (its operators: layer, name, role,
// whether a holding range, groups). Decoding checks every length and enum against what
// it holds; a short, oversized or foreign buffer is an error naming the offset.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "diagnose/cause_operators.h"

namespace teller::diagnose {

inline constexpr uint32_t kCauseOperatorsWireVersion = 1;

std::string EncodeOperatorQueries(const std::vector<OperatorQuery>& queries);
base::StatusOr<std::vector<OperatorQuery>> DecodeOperatorQueries(std::string_view bytes);

std::string EncodeCauseOperators(const std::vector<std::vector<CauseOperator>>& answers);
base::StatusOr<std::vector<std::vector<CauseOperator>>> DecodeCauseOperators(
    std::string_view bytes);

}  // namespace teller::diagnose
