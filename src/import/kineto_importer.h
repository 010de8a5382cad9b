// The PyTorch profiler / Kineto chrome-trace importer (ImportKineto in importer.h),
// with the knobs tests need: the chunk size, an in-memory reader, the import in parts.
#pragma once

#include <cstddef>
#include <string>

#include "base/file_util.h"
#include "base/status.h"
#include "import/importer.h"
#include "model/trace.h"

namespace teller::import {

struct KinetoReadConfig {
  // Bytes read and parsed per batch. 1 MB keeps the read buffer and simdjson's
  // buffers in cache and touches few pages: measured against 16 MB on the real
  // V100 trace (scripts/bench.sh), 2.3x faster with 40% of the peak RSS.
  size_t chunk_bytes = 1 << 20;
  // When set, counts the times the import in parts went back to an element (tests).
  int* rewinds = nullptr;
};

// Imports from an open reader; source_name names the input in errors and in the model.
// traceEvents is parsed in parts on options.threads threads (batches of whole elements
// parsed side by side and dispatched in order): the trace is the one a single thread
// makes. Where a batch's end turns out not to be an element's end (a cut inside a
// string), the scan goes back to that element in the bytes it keeps, as the import on
// one thread does.
base::Status ImportKinetoFromReader(base::ChunkReader* reader, const std::string& source_name,
                                    const ImportOptions& options, const KinetoReadConfig& config,
                                    model::Trace* trace);

}  // namespace teller::import
