// The PyTorch profiler / Kineto chrome-trace importer (ImportKineto in importer.h),
// with the knobs tests need: the chunk size, an in-memory reader, the import in parts.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
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
  // Opens the input again from its start. With it, traceEvents is parsed in parts on
  // ImportOptions::threads threads (batches of whole elements, parsed side by side and
  // handled in order: the trace is the one a single thread makes). Where a batch's end
  // turns out not to be an element's end (a cut inside a string), the import opens
  // the input anew, goes to that element and goes on on one thread. Without it the
  // import runs on one thread.
  std::function<base::StatusOr<std::unique_ptr<base::ChunkReader>>()> reopen;
  // When set, counts the times the input was opened anew (tests).
  int* reopened = nullptr;
};

// Imports from an open reader; source_name names the input in errors and in the model.
// (ImportKineto opens the file with a read-ahead inflate and reopens it by path.)
base::Status ImportKinetoFromReader(base::ChunkReader* reader, const std::string& source_name,
                                    const ImportOptions& options, const KinetoReadConfig& config,
                                    model::Trace* trace);

}  // namespace teller::import
