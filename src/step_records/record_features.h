// Fixed-width feature rows of step records for the classical comparison methods (paper
// Table 4): statistical step features, and the "w/ struct" variant that adds
// flattened operator-count and parent/child-name features.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "step_records/step_records.h"

namespace teller::step_records {

struct FeatureRows {
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<float> values;       // row-major
  std::vector<std::string> names;  // one per column
};

// Step duration, node count, ranks, phase, per-layer and per-operator-family
// count and log time, launch queueing, log lines by level.
FeatureRows StatisticalFeatures(const std::vector<StepRecord>& records);

// Statistical features plus operator-name counts and parent>child name-pair
// counts, hashed into `buckets` columns each (log1p counts).
FeatureRows StructuralFeatures(const std::vector<StepRecord>& records,
                               const tpe::SymbolTable& symbols, int32_t buckets = 256);

}  // namespace teller::step_records
