// The trace model: columnar, interned tables of normalized events
// e = (type, name, pid, tid, id, cid, fields), log lines, and what reconstruction
// builds from them (call-chain trees, steps, requests, cross-rank matches).
// All times are integer nanoseconds on one trace clock.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/string_pool.h"
#include "model/ids.h"
#include "model/layer.h"
#include "model/stats.h"
#include "model/trace_columns.h"

namespace teller::model {

// A process (or a Kineto/nsys trace of one) on some host.
struct ProcessTable {
  // Columns: model/trace_columns.h.
  TELLER_PROCESS_COLUMNS(TELLER_MODEL_COLUMN, TELLER_MODEL_DERIVED)

  size_t size() const { return os_pid.size(); }
  ProcessIndex Append(int64_t pid, StringId host_name, StringId process_name, int32_t global_rank,
                      StringId source_file);
};

// A host thread, or a device stream (is_device) on which kernels run.
struct ThreadTable {
  // Columns: model/trace_columns.h.
  TELLER_THREAD_COLUMNS(TELLER_MODEL_COLUMN, TELLER_MODEL_DERIVED)

  size_t size() const { return process.size(); }
  ThreadIndex Append(ProcessIndex owner, int64_t tid, StringId thread_name, bool device_track,
                     int32_t device_index);
};

enum class EventPhase : uint8_t {
  kComplete,  // has start and duration
  kInstant,   // a mark, duration 0
  kBegin,     // push / range start, paired by reconstruction
  kEnd,       // pop / range end
};

enum EventFlags : uint8_t {
  kFlagNone = 0,
  kFlagGraphLaunch = 1 << 0,  // host call that launched a CUDA/HIP graph
  kFlagGraphNode = 1 << 1,    // device work that ran as a graph node
  kFlagTruncated = 1 << 2,    // range closed by reconstruction at the end of its thread
  kFlagSynthetic = 1 << 3,    // made by teller (a derived step), not read from input
  kFlagConsumed = 1 << 4,     // an end event already paired with its begin
};

// Normalized events, one row each.
struct EventTable {
  // Columns: model/trace_columns.h.
  TELLER_EVENT_COLUMNS(TELLER_MODEL_COLUMN, TELLER_MODEL_DERIVED)

  size_t size() const { return layer.size(); }
  void Reserve(size_t n);
  EventRow Append(Layer event_layer, EventPhase event_phase, StringId event_name,
                  ProcessIndex event_process, ThreadIndex event_thread, TimeNs start,
                  DurationNs duration, EventId event_id = EventId::Invalid(),
                  CorrelationId event_correlation = CorrelationId::Invalid(),
                  uint8_t event_flags = kFlagNone);
  TimeNs end_ns(EventRow row) const { return start_ns[row.value()] + dur_ns[row.value()]; }
};

enum class ArgType : uint8_t { kInt, kString, kDouble };

// Extra fields of events. Rows of one event are contiguous; add them right after
// the event with TraceBuilder-style AddArg so args_begin/args_count stay valid.
struct ArgTable {
  // Columns: model/trace_columns.h.
  TELLER_ARG_COLUMNS(TELLER_MODEL_COLUMN, TELLER_MODEL_DERIVED)

  size_t size() const { return key.size(); }
};

// Collective metadata of a communication event (host record or device kernel).
struct CollectiveTable {
  // Columns: model/trace_columns.h.
  TELLER_COLLECTIVE_COLUMNS(TELLER_MODEL_COLUMN, TELLER_MODEL_DERIVED)

  size_t size() const { return event.size(); }
};

enum class LogLevel : uint8_t { kUnknown, kDebug, kInfo, kWarning, kError, kCritical };
std::string_view LogLevelName(LogLevel level);

enum class LogStream : uint8_t { kUnknown, kStdout, kStderr, kFile };

enum class LogAlignment : uint8_t { kNone, kRequestId, kTimeWindow };

// ell = (ts, rid, level, msg), plus where it came from and where it aligned.
struct LogTable {
  // Columns: model/trace_columns.h.
  TELLER_LOG_COLUMNS(TELLER_MODEL_COLUMN, TELLER_MODEL_DERIVED)

  size_t size() const { return ts_ns.size(); }
};

struct TemplateTable {
  // Columns: model/trace_columns.h.
  TELLER_TEMPLATE_COLUMNS(TELLER_MODEL_COLUMN, TELLER_MODEL_DERIVED)

  size_t size() const { return pattern.size(); }
};

// Call-chain nodes. Nodes of one step are contiguous, in pre-order (children by
// start time), so parent < child and a step is [node_begin, node_end).
struct NodeTable {
  // Columns: model/trace_columns.h.
  TELLER_NODE_COLUMNS(TELLER_MODEL_COLUMN, TELLER_MODEL_DERIVED)

  size_t size() const { return event.size(); }
};

enum class StepPhase : uint8_t { kUnknown, kPrefill, kDecode, kMixed };
std::string_view StepPhaseName(StepPhase phase);

enum class StepSource : uint8_t {
  kEngineStep,        // a STEP range from the hooks or the simulator (has request ids)
  kEngineAnnotation,  // an engine's own annotation (vLLM execute_..., SGLang step[...])
  kProfilerStep,      // ProfilerStep#N
  kTopLevelRange,     // the outermost host range when nothing better exists
};
std::string_view StepSourceName(StepSource source);

struct StepTable {
  // Columns: model/trace_columns.h.
  TELLER_STEP_COLUMNS(TELLER_MODEL_COLUMN, TELLER_MODEL_DERIVED)

  size_t size() const { return event.size(); }
};

struct RequestTable {
  // Columns: model/trace_columns.h.
  TELLER_REQUEST_COLUMNS(TELLER_MODEL_COLUMN, TELLER_MODEL_DERIVED)

  size_t size() const { return id.size(); }
};

// Collectives matched across ranks by communicator and sequence number.
struct CollectiveMatchTable {
  // Columns: model/trace_columns.h.
  TELLER_COLLECTIVE_MATCH_COLUMNS(TELLER_MODEL_COLUMN, TELLER_MODEL_DERIVED)

  size_t size() const { return match.size(); }
};

enum class TraceFormat : uint8_t { kUnknown, kBundle, kKineto, kNsys, kLogs, kMixed };
std::string_view TraceFormatName(TraceFormat format);

struct TraceMeta {
  // What the trace was read from: one format, or kMixed when trace formats were
  // merged. Logs never make a trace mixed. Importers set it with AddInputFormat.
  TraceFormat format = TraceFormat::kUnknown;
  void AddInputFormat(TraceFormat input);
  std::vector<std::string> sources;  // input files
  std::vector<std::string> notes;    // facts a report must show ("steps derived from ...")
  std::string labels_json;           // ground truth of synthetic runs, verbatim
  std::string meta_json;             // the bundle's meta.json, verbatim
};

struct Trace {
  base::StringPool strings;
  TraceMeta meta;
  ProcessTable processes;
  ThreadTable threads;
  EventTable events;
  ArgTable args;
  CollectiveTable collectives;
  LogTable logs;
  TemplateTable templates;
  Stats stats;

  // Built by reconstruction.
  NodeTable nodes;
  StepTable steps;
  std::vector<RequestIndex> step_requests;
  RequestTable requests;
  CollectiveMatchTable collective_matches;
  bool reconstructed = false;

  // Adds a field to the event appended last.
  void AddIntArg(EventRow row, StringId key, int64_t value);
  void AddStringArg(EventRow row, StringId key, StringId value);
  void AddDoubleArg(EventRow row, StringId key, double value);
  // Looks up a field; returns false when absent.
  bool FindIntArg(EventRow row, StringId key, int64_t* value) const;
  bool FindStringArg(EventRow row, StringId key, StringId* value) const;
  // The key of a field some event has; invalid when none has it (one scan of the key
  // column, so a pass looking for the field in every event can end before it starts).
  StringId FindArgKey(std::string_view name) const;
  size_t AppendLog(TimeNs ts, ProcessIndex log_process, int64_t pid, int32_t log_rank,
                   LogLevel log_level, LogStream log_stream, StringId request_id,
                   TemplateId template_index, StringId log_text, StringId source_file,
                   int64_t line);
  std::string_view str(StringId id) const { return strings.Get(id); }
  // Bytes held by the columns (not the strings), for the benchmarks.
  size_t ColumnBytes() const;
};

}  // namespace teller::model
