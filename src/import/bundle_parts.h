// A raw bundle imported one process folder at a time, so that its folders can import
// apart (on other MPI processes, fleet/) and join in order with model::AppendTrace:
// ImportHead on the joined trace, ImportProcess of each folder (into the joined trace
// or a part of its own, appended next), then NumberUnrankedProcesses and ImportLogs.
// ImportBundle is the four in order on one trace; the joined parts are the same trace.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "import/importer.h"
#include "model/trace.h"
#include "wire/bundle_reader.h"

namespace teller::import {

class BundleParts {
 public:
  // Reads meta.json and lists the process folders (wire::BundleReader::Open).
  static base::StatusOr<BundleParts> Open(const std::string& directory);

  size_t process_count() const { return reader_.processes().size(); }
  const std::string& process_path(size_t process) const {
    return reader_.processes()[process].path;
  }
  // The global rank meta.json gives the folder's process; -1 when it names none.
  int32_t RankOf(size_t process) const;

  // The bundle's own facts: format, source, meta.json, labels, notes.
  void ImportHead(model::Trace* trace) const;
  // One process folder's records (and its read issues) as rows of trace.
  base::Status ImportProcess(size_t process, const ImportOptions& options,
                             model::Trace* trace) const;
  // Two processes are never one rank: when two or more of this bundle's processes
  // (first_process on) have events but no rank (no launcher variable, process group,
  // meta.json rank or rank hint said one), each gets its own, numbered in (host, pid)
  // order after the highest rank the trace holds (0 on when it holds none), with a
  // note saying so. A rank the trace carries is never changed; a lone unranked process
  // (an engine's scheduler beside ranked workers) stays -1. Before ImportLogs.
  void NumberUnrankedProcesses(model::ProcessIndex first_process, model::Trace* trace) const;
  // The log lines, matched to the processes from first_process on (this bundle's).
  base::Status ImportLogs(model::ProcessIndex first_process, model::Trace* trace) const;
  // The recorded command's own failure (meta.json's "command exit status N", N not 0 and
  // not a stop on purpose: 130 Ctrl-C, 143 SIGTERM): one log line at the bundle's last
  // moment, "teller record: the recorded command exited with status N" (or "was killed
  // by signal S (NAME)" for 128 + S), which the catalog reads (teller.record.command_failed).
  void AppendCommandExit(model::ProcessIndex first_process, model::Trace* trace) const;

 private:
  explicit BundleParts(wire::BundleReader reader) : reader_(std::move(reader)) {}

  wire::BundleReader reader_;
  wire::BundleMeta meta_;     // its clock pairs from the last clock jump on
  model::Trace clock_notes_;  // what dropping clock pairs noted (stats, notes)
};

}  // namespace teller::import
