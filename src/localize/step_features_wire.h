// The bytes of step 2's exchange (step_features_parts.h): each part's
// StepFeatureSummary to the place that merges them, the MergedStepFeatureSummary back.
// The layout of reconstruct/cross_rank_wire.h: a 4-byte magic and a u32 version, then
// each column as a u64 row count and its values (base/byte_io.h). Decoding checks every
// length against the bytes left; a short, oversized or foreign buffer is an error naming
// what was expected and the byte offset.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "localize/step_features_parts.h"

namespace teller::localize {

inline constexpr uint32_t kStepFeaturesWireVersion = 1;

std::string EncodeStepFeatureSummary(const StepFeatureSummary& summary);
// The summary, checked by CheckStepFeatureSummary.
base::StatusOr<StepFeatureSummary> DecodeStepFeatureSummary(std::string_view bytes);

std::string EncodeMergedStepFeatureSummary(const MergedStepFeatureSummary& merged);
// The merge, its columns of matching lengths, matches ascending and its CSR offsets in
// range, so FinishStepFeatures can read it.
base::StatusOr<MergedStepFeatureSummary> DecodeMergedStepFeatureSummary(std::string_view bytes);

}  // namespace teller::localize
