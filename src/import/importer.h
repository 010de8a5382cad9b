// Importers turn input files into the normalized trace model. Each appends to an
// existing Trace, so several inputs merge into one. A file that cannot be read is
// a Status naming the file and offset; a bad event inside a readable file is a
// named counter in trace->stats.
#pragma once

#include <string>
#include <vector>

#include "base/progress.h"
#include "base/status.h"
#include "model/trace.h"

namespace teller::import {

struct ImportOptions {
  base::ProgressSink* progress = nullptr;
  // Global rank to give the processes of this input when the file does not say.
  int32_t rank_hint = -1;
  // Year for log timestamps that carry none (vLLM prints "MM-DD hh:mm:ss");
  // 0 means: take it from the trace's time range, else the current year.
  int year_hint = 0;
  // Offset of the log's local wall clock from UTC (minutes east, +480 for UTC+8). Log
  // timestamps without a zone (vLLM, SGLang, Python logging) are local time; 0 = UTC.
  int utc_offset_minutes = 0;
  // Threads that import trace files (Kineto, nsys) side by side when several are given,
  // and a bundle's process folders; 0: one per core. The joined trace is the one a single
  // thread makes.
  int threads = 0;
};

enum class InputFormat { kUnknown, kBundle, kKineto, kNsys, kLog, kFlightRecorder };
std::string_view InputFormatName(InputFormat format);

// The trace clock is UTC epoch nanoseconds (CLOCK_REALTIME of the recording host).
// Importers convert every timestamp to it.
base::Status ImportBundle(const std::string& directory, const ImportOptions& options,
                          model::Trace* trace);
// One Kineto chrome-trace JSON file (plain or .gz).
base::Status ImportKineto(const std::string& path, const ImportOptions& options,
                          model::Trace* trace);
// One Nsight Systems SQLite export.
base::Status ImportNsys(const std::string& path, const ImportOptions& options, model::Trace* trace);
// One service log file (vLLM, SGLang, NCCL, Python tracebacks, plain timestamped lines).
base::Status ImportLogFile(const std::string& path, const ImportOptions& options,
                           model::Trace* trace);
// One PyTorch Flight Recorder dump in JSON (one rank's last collectives; the rank from the
// dump's "rank" or the file name, nccl_trace_rank_3).
base::Status ImportFlightRecorder(const std::string& path, const ImportOptions& options,
                                  model::Trace* trace);
// A JSON head with "entries" and "pg_status", "pg_config" or "nccl_comm_state".
bool LooksLikeFlightRecorderDump(std::string_view head);
// Fills level, pid/rank, request id and template id of log rows that were appended
// without parsing (template_id invalid), e.g. by the bundle importer. Keeps their ts.
void ParseLogsOfTrace(const ImportOptions& options, model::Trace* trace);

}  // namespace teller::import
