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

namespace teller::model {

// A process (or a Kineto/nsys trace of one) on some host.
struct ProcessTable {
  std::vector<int64_t> os_pid;
  std::vector<StringId> host;
  std::vector<StringId> name;     // command or label
  std::vector<int32_t> rank;      // global rank, -1 when unknown
  std::vector<int32_t> node;      // node (host) index, -1 when unknown
  std::vector<StringId> source;   // file it came from
  // Offset added to this process's raw times to reach the trace clock, and the
  // residual uncertainty of that alignment (0 when exact or single-clock).
  std::vector<int64_t> clock_offset_ns;
  std::vector<int64_t> clock_uncertainty_ns;

  size_t size() const { return os_pid.size(); }
  ProcessIndex Append(int64_t pid, StringId host_name, StringId process_name, int32_t global_rank,
                      StringId source_file);
};

// A host thread, or a device stream (is_device) on which kernels run.
struct ThreadTable {
  std::vector<ProcessIndex> process;
  std::vector<int64_t> os_tid;    // OS thread id, or the stream id for device tracks
  std::vector<StringId> name;
  std::vector<uint8_t> is_device;
  std::vector<int32_t> device;    // GPU index, -1 for host threads

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
  kFlagGraphLaunch = 1 << 0,   // host call that launched a CUDA/HIP graph
  kFlagGraphNode = 1 << 1,     // device work that ran as a graph node
  kFlagTruncated = 1 << 2,     // range closed by reconstruction at the end of its thread
  kFlagSynthetic = 1 << 3,     // made by teller (a derived step), not read from input
  kFlagConsumed = 1 << 4,      // an end event already paired with its begin
};

// Normalized events, one row each.
struct EventTable {
  std::vector<Layer> layer;             // type
  std::vector<EventPhase> phase;
  std::vector<uint8_t> flags;           // EventFlags
  std::vector<StringId> name;
  std::vector<ProcessIndex> process;    // pid
  std::vector<ThreadIndex> thread;      // tid, or device stream
  std::vector<TimeNs> start_ns;
  std::vector<DurationNs> dur_ns;
  std::vector<EventId> id;              // range id / external id
  std::vector<CorrelationId> correlation;  // cid
  std::vector<uint32_t> args_begin;     // fields: rows [args_begin, args_begin + args_count)
  std::vector<uint16_t> args_count;

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
  std::vector<StringId> key;
  std::vector<ArgType> type;
  std::vector<int64_t> int_value;   // also a double's bits for kDouble
  std::vector<StringId> string_value;

  size_t size() const { return key.size(); }
};

// Collective metadata of a communication event (host record or device kernel).
struct CollectiveTable {
  std::vector<EventRow> event;
  std::vector<StringId> communicator;  // process group name or NCCL comm id
  std::vector<int64_t> sequence;       // per-communicator sequence number, -1 unknown
  std::vector<StringId> op;            // all_reduce, all_gather, ...
  std::vector<int64_t> size_bytes;     // message size, -1 unknown
  std::vector<StringId> dtype;
  std::vector<int32_t> group_size;     // -1 unknown
  std::vector<int32_t> group_rank;     // -1 unknown

  size_t size() const { return event.size(); }
};

enum class LogLevel : uint8_t { kUnknown, kDebug, kInfo, kWarning, kError, kCritical };
std::string_view LogLevelName(LogLevel level);

enum class LogStream : uint8_t { kUnknown, kStdout, kStderr, kFile };

enum class LogAlignment : uint8_t { kNone, kRequestId, kTimeWindow };

// ell = (ts, rid, level, msg), plus where it came from and where it aligned.
struct LogTable {
  std::vector<TimeNs> ts_ns;          // on the trace clock; INT64_MIN when the line had none
  std::vector<ProcessIndex> process;  // invalid when unknown
  std::vector<int64_t> os_pid;        // -1 when unknown
  std::vector<int32_t> rank;          // -1 when unknown
  std::vector<LogLevel> level;
  std::vector<LogStream> stream;
  std::vector<StringId> request;      // request id text, kEmpty when none
  std::vector<TemplateId> template_id;
  std::vector<StringId> text;
  std::vector<StringId> source;       // file
  std::vector<int64_t> line_number;   // 1-based within source
  // Filled by reconstruction.
  std::vector<StepIndex> step;
  std::vector<LogAlignment> alignment;

  size_t size() const { return ts_ns.size(); }
};

struct TemplateTable {
  std::vector<StringId> pattern;  // tokens with <*> for parameters
  std::vector<int64_t> count;

  size_t size() const { return pattern.size(); }
};

// Call-chain nodes. Nodes of one step are contiguous, in pre-order (children by
// start time), so parent < child and a step is [node_begin, node_end).
struct NodeTable {
  std::vector<EventRow> event;
  std::vector<NodeIndex> parent;  // invalid for the step root
  std::vector<uint16_t> depth;
  std::vector<StepIndex> step;

  size_t size() const { return event.size(); }
};

enum class StepPhase : uint8_t { kUnknown, kPrefill, kDecode, kMixed };
std::string_view StepPhaseName(StepPhase phase);

enum class StepSource : uint8_t {
  kEngineStep,      // a STEP range from the hooks or the simulator (has request ids)
  kEngineAnnotation,  // an engine's own annotation (vLLM execute_..., SGLang step[...])
  kProfilerStep,    // ProfilerStep#N
  kTopLevelRange,   // the outermost host range when nothing better exists
};
std::string_view StepSourceName(StepSource source);

struct StepTable {
  std::vector<EventRow> event;        // the range that defines the step
  std::vector<ProcessIndex> process;
  std::vector<ThreadIndex> thread;
  std::vector<int32_t> rank;
  std::vector<int64_t> number;        // step number on its rank
  std::vector<StringId> name;
  std::vector<StepPhase> phase;
  std::vector<StepSource> source;
  std::vector<TimeNs> start_ns;
  std::vector<TimeNs> end_ns;         // includes device work launched in the step
  std::vector<NodeIndex> node_begin;
  std::vector<NodeIndex> node_end;
  std::vector<uint32_t> requests_begin;  // into Trace::step_requests
  std::vector<uint32_t> requests_count;
  std::vector<int64_t> global_step;   // same value for the same step across ranks, -1 none

  size_t size() const { return event.size(); }
};

struct RequestTable {
  std::vector<StringId> id;
  std::vector<TimeNs> first_ns;
  std::vector<TimeNs> last_ns;
  std::vector<uint32_t> step_count;

  size_t size() const { return id.size(); }
};

// Collectives matched across ranks by communicator and sequence number.
struct CollectiveMatchTable {
  std::vector<CollectiveMatchId> match;
  std::vector<EventRow> event;
  std::vector<int32_t> rank;

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
  size_t AppendLog(TimeNs ts, ProcessIndex log_process, int64_t pid, int32_t log_rank,
                   LogLevel log_level, LogStream log_stream, StringId request_id,
                   TemplateId template_index, StringId log_text, StringId source_file,
                   int64_t line);
  std::string_view str(StringId id) const { return strings.Get(id); }
  // Bytes held by the columns (not the strings), for the benchmarks.
  size_t ColumnBytes() const;
};

}  // namespace teller::model
