// The bytes of step 3a's exchange (step_measurements.h): each part's MeasurementSummary
// to the place that merges them, the MergedMeasurementSummary back, and each part's
// StepMeasurements to the place that fits the map. The layout of
// reconstruct/cross_rank_wire.h: a 4-byte magic and a u32 version, then each column as a
// u64 row count and its values (base/byte_io.h). Decoding checks every length against the
// bytes left; a short, oversized or foreign buffer is an error naming what was expected
// and the byte offset.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "cause/step_measurements.h"

namespace teller::cause {

inline constexpr uint32_t kStepMeasurementsWireVersion = 3;

std::string EncodeMeasurementSummary(const MeasurementSummary& summary);
// The summary, checked by CheckMeasurementSummary.
base::StatusOr<MeasurementSummary> DecodeMeasurementSummary(std::string_view bytes);

std::string EncodeMergedMeasurementSummary(const MergedMeasurementSummary& merged);
// The merge, its columns of matching lengths and its matches and global steps strictly
// ascending, so MeasureStepsOfPart can search it.
base::StatusOr<MergedMeasurementSummary> DecodeMergedMeasurementSummary(std::string_view bytes);

std::string EncodeStepMeasurements(const StepMeasurements& rows);
// The rows, checked so that every index ConcatMeasurements and FitDeviationMap follow is
// in range: a row per step in every step column, CSR offsets from 0 to the cells, each
// step's cells strictly ascending by (channel, family) and in range, phases known, names,
// processes and hosts in range. Node numbers are not bounded (-1 or more): a huge one
// costs FitDeviationMap memory, as in a trace.
base::StatusOr<StepMeasurements> DecodeStepMeasurements(std::string_view bytes);

}  // namespace teller::cause
