// The step records of one part of one split of a dataset folder, for the verbs
// that train and measure on a split (`teller train`, `teller paper-tables`).
#pragma once

#include <string>

#include "base/progress.h"
#include "base/status.h"
#include "step_records/step_records.h"

namespace teller::step_records {

// Reads the manifest and the split keys, then the records of the bundles holding
// them (vertical: one record per rank, RecordOptions::vertical; operator_tokens:
// RecordOptions::operator_tokens). NotFound when the part has no step record.
base::StatusOr<RecordSet> LoadSplitPartRecords(const std::string& folder, const std::string& split,
                                               const std::string& part, bool vertical,
                                               bool operator_tokens, base::ProgressSink* progress);

}  // namespace teller::step_records
