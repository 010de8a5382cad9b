// Opening whatever the user points at as one trace: a store file, a bundle
// directory (imported or raw), a store set folder (store/store_set.h), or raw trace
// and log files.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "import/importer.h"
#include "model/trace.h"

namespace teller::store {

struct OpenOptions {
  import::ImportOptions import;
  // Reconstruct call chains when the input is not reconstructed yet.
  bool reconstruct = true;
  // Snapshots of opened raw inputs (store/trace_snapshot.h) live here; "" for none.
  // Inputs opened before, with the same sizes, modification times, first MiB and the
  // options that change what is read, are read from their snapshot instead.
  std::string cache_dir;
  bool rebuild = false;                          // import again and replace the snapshot
  double cache_min_seconds = 0.05;  // only inputs that took this long to open are kept
  uint64_t cache_max_bytes = uint64_t{4} << 30;  // the oldest snapshots go past this
};

// The cache folder a command uses unless told otherwise: $TELLER_CACHE_DIR ("none":
// no cache), else $XDG_CACHE_HOME/teller, else $HOME/.cache/teller ("" without HOME).
std::string DefaultCacheDir();

// The store file inside a bundle directory.
inline constexpr const char* kBundleStoreName = "trace.db";

base::StatusOr<model::Trace> OpenTrace(const std::vector<std::string>& inputs,
                                       const OpenOptions& options);
// True when path is a SQLite file written by SaveTrace.
bool IsTellerStore(const std::string& path);
// Writes an imported bundle: directory with meta.json and trace.db.
base::Status WriteImportedBundle(const model::Trace& trace, const std::string& directory);
// Writes DIRECTORY/meta.json of an imported bundle whose trace.db is written already.
base::Status WriteImportedBundleMeta(model::TraceFormat format,
                                     const std::vector<std::string>& sources,
                                     const std::string& directory);
// Where `teller build` writes by default.
base::StatusOr<std::string> DefaultStorePath(const std::vector<std::string>& inputs);

}  // namespace teller::store
