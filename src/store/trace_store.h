// The reconstructed-trace store: one SQLite file holding a whole model::Trace
// (imported tables and reconstruction tables), written once by `teller build` and
// reloaded by later commands without re-import. docs/store.md documents the schema
// and shows queries for the sqlite3 shell.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "model/trace.h"

namespace teller::store {

// Writes trace to path.tmp in one transaction and renames it over path, so a
// half-written store never replaces a good one. Fails with InvalidArgument when the
// trace is inconsistent (see trace_check.h) and IoError when the file cannot be written.
base::Status SaveTrace(const model::Trace& trace, const std::string& path);

// Writes a store window by window, for traces too big to hold whole (the windowed
// build, windowed_build.h). Append inserts one window's rows (events, args,
// collectives, call-chain nodes, steps, step requests, collective matches) with the
// window's own row numbers, which the writer offsets; the window's string, process,
// thread and request ids must already be the final trace's. Finish writes the final
// trace's other tables (meta, strings, processes, threads, templates, logs, stats,
// requests), builds the indexes and renames path.tmp over path. A writer dropped
// before Finish removes path.tmp.
class StoreWriter {
 public:
  static base::StatusOr<StoreWriter> Create(const std::string& path);
  StoreWriter(StoreWriter&&) noexcept;
  StoreWriter& operator=(StoreWriter&&) noexcept;
  ~StoreWriter();

  base::Status Append(const model::Trace& window);
  base::Status Finish(const model::Trace& shared);
  int64_t events_written() const;
  int64_t steps_written() const;
  int64_t nodes_written() const;

 private:
  StoreWriter();
  struct State;
  std::unique_ptr<State> state_;
};

// Reads a store written by SaveTrace. Every column of every table round-trips exactly,
// string ids included. A missing file is NotFound; a file that is not a teller store,
// one of another schema_version, or a corrupt or truncated one is a Status naming the
// file and what was expected.
base::StatusOr<model::Trace> LoadTrace(const std::string& path);

}  // namespace teller::store
