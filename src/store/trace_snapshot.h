// teller's snapshot of an opened trace: the columns of model::Trace as they lie in
// memory (model/trace_columns.h, one length-prefixed block per column), its strings,
// meta and stats. It is the cache behind `teller diagnose FILE` run twice (store/
// open_trace.h): written and read at memory speed, where the SQLite store (the format
// to query and to keep) writes about a million rows a second. Not an interchange
// format: a snapshot carries a hash of this build's column layout and any other is
// refused. Little-endian:
//   "TLSNAP01", u64 layout hash, u8 reconstructed, strings (u64 count, then u64 length
//   + bytes each), meta, stats, step_requests, then every column (u64 rows + values).
// A snapshot that reads is checked like a loaded store (store/trace_check.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "model/trace.h"

namespace teller::store {

inline constexpr std::string_view kSnapshotMagic = "TLSNAP01";

// A hash of every table's column names and value sizes in this build.
uint64_t SnapshotLayoutHash();

std::string SerializeTraceSnapshot(const model::Trace& trace);
// `path` names the source in errors.
base::StatusOr<model::Trace> ParseTraceSnapshot(std::string_view bytes, const std::string& path);

base::Status WriteTraceSnapshot(const model::Trace& trace, const std::string& path);
base::StatusOr<model::Trace> ReadTraceSnapshot(const std::string& path);

}  // namespace teller::store
