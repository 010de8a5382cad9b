// The reconstructed-trace store: one SQLite file holding a whole model::Trace
// (imported tables and reconstruction tables), written once by `teller build` and
// reloaded by later commands without re-import. docs/store.md documents the schema
// and shows queries for the sqlite3 shell.
#pragma once

#include <string>

#include "base/status.h"
#include "model/trace.h"

namespace teller::store {

// Writes trace to path.tmp in one transaction and renames it over path, so a
// half-written store never replaces a good one. Fails with InvalidArgument when the
// trace is inconsistent (see trace_check.h) and IoError when the file cannot be written.
base::Status SaveTrace(const model::Trace& trace, const std::string& path);

// Reads a store written by SaveTrace. Every column of every table round-trips exactly,
// string ids included. A missing file is NotFound; a file that is not a teller store,
// one of another schema_version, or a corrupt or truncated one is a Status naming the
// file and what was expected.
base::StatusOr<model::Trace> LoadTrace(const std::string& path);

}  // namespace teller::store
