// Every column of the trace's tables, declared once. model/trace.h declares the
// tables' vectors from these lists, and the store generates its SQL schema, its insert,
// its load and its consistency checks from them (store/store_tables.h). Adding a
// column is one line here plus the code that fills and uses it; the store follows.
//
// A list is TELLER_<TABLE>_COLUMNS(COL, DERIVED), in store column order:
//   COL(sql_name, field, Type, Kind, Target, Base)
//     sql_name  the store column; field  the member (std::vector<Type>) of the table
//     Kind      Value: an integer, NOT NULL (read back narrowed to Type)
//               Ref:   a strong id, NULL when invalid, checked against Target's rows
//               Enum:  an enum stored as its text, NOT NULL (store_schema.h's names)
//     Target    the table a Ref points into (strings, processes, threads, events,
//               nodes, node_ends (a node index or one past the last node), steps,
//               templates, requests), or none
//     Base      for the windowed store writer: which window row base the stored value
//               is offset by (event, arg, node, step, step_request, match), or none
//   DERIVED(sql_name, sql_type)
//     a store column computed from other tables when writing and not read back.
// Each table's first store column is its row index; TELLER_TRACE_TABLES names it.
#pragma once

// ProcessTable: a process (or a Kineto/nsys trace of one) on some host.
//   name: command or label; rank: global rank, -1 when unknown; node: node (host)
//   index, -1 when unknown; source: file it came from; clock_offset_ns: added to
//   this process's raw times to reach the trace clock; clock_uncertainty_ns: the
//   residual uncertainty of that alignment (0 when exact or single-clock).
#define TELLER_PROCESS_COLUMNS(COL, DERIVED)                        \
  COL(os_pid, os_pid, int64_t, Value, none, none)                   \
  COL(host, host, StringId, Ref, strings, none)                     \
  COL(name, name, StringId, Ref, strings, none)                     \
  COL(rank, rank, int32_t, Value, none, none)                       \
  COL(node, node, int32_t, Value, none, none)                       \
  COL(source, source, StringId, Ref, strings, none)                 \
  COL(clock_offset_ns, clock_offset_ns, int64_t, Value, none, none) \
  COL(clock_uncertainty_ns, clock_uncertainty_ns, int64_t, Value, none, none)

// ThreadTable: a host thread, or a device stream (is_device) on which kernels run.
//   os_tid: OS thread id, or the stream id for device tracks; device: GPU index, -1
//   for host threads.
#define TELLER_THREAD_COLUMNS(COL, DERIVED)                 \
  COL(process, process, ProcessIndex, Ref, processes, none) \
  COL(os_tid, os_tid, int64_t, Value, none, none)           \
  COL(name, name, StringId, Ref, strings, none)             \
  COL(is_device, is_device, uint8_t, Value, none, none)     \
  COL(device, device, int32_t, Value, none, none)

// EventTable: normalized events e = (type, name, pid, tid, id, cid, fields).
//   layer: type; flags: EventFlags; process: pid; thread: tid, or device stream;
//   id: range id / external id; correlation: cid; args_begin, args_count: the
//   event's fields are args rows [args_begin, args_begin + args_count).
#define TELLER_EVENT_COLUMNS(COL, DERIVED)                      \
  COL(layer, layer, Layer, Enum, none, none)                    \
  COL(phase, phase, EventPhase, Enum, none, none)               \
  COL(flags, flags, uint8_t, Value, none, none)                 \
  COL(name, name, StringId, Ref, strings, none)                 \
  COL(process, process, ProcessIndex, Ref, processes, none)     \
  COL(thread, thread, ThreadIndex, Ref, threads, none)          \
  COL(start_ns, start_ns, TimeNs, Value, none, none)            \
  COL(dur_ns, dur_ns, DurationNs, Value, none, none)            \
  COL(id, id, EventId, Ref, none, none)                         \
  COL(correlation, correlation, CorrelationId, Ref, none, none) \
  COL(args_begin, args_begin, uint32_t, Value, none, arg)       \
  COL(args_count, args_count, uint16_t, Value, none, none)

// ArgTable: extra fields of events. int_value also holds a double's bits; the store
// adds the owning event and the double's value (for queries).
#define TELLER_ARG_COLUMNS(COL, DERIVED)                        \
  DERIVED(event, "INTEGER")                                     \
  COL(key, key, StringId, Ref, strings, none)                   \
  COL(type, type, ArgType, Enum, none, none)                    \
  COL(int_value, int_value, int64_t, Value, none, none)         \
  COL(string_value, string_value, StringId, Ref, strings, none) \
  DERIVED(double_value, "REAL")

// CollectiveTable: collective metadata of a communication event.
//   communicator: process group name or NCCL comm id; sequence: per-communicator
//   sequence number, -1 unknown; op: all_reduce, all_gather, ...; size_bytes: -1
//   unknown; group_size, group_rank: -1 unknown.
#define TELLER_COLLECTIVE_COLUMNS(COL, DERIVED)                 \
  COL(event, event, EventRow, Ref, events, event)               \
  COL(communicator, communicator, StringId, Ref, strings, none) \
  COL(sequence, sequence, int64_t, Value, none, none)           \
  COL(op, op, StringId, Ref, strings, none)                     \
  COL(size_bytes, size_bytes, int64_t, Value, none, none)       \
  COL(dtype, dtype, StringId, Ref, strings, none)               \
  COL(group_size, group_size, int32_t, Value, none, none)       \
  COL(group_rank, group_rank, int32_t, Value, none, none)

// TemplateTable: log templates; pattern: tokens with <*> for parameters.
#define TELLER_TEMPLATE_COLUMNS(COL, DERIVED)         \
  COL(pattern, pattern, StringId, Ref, strings, none) \
  COL(count, count, int64_t, Value, none, none)

// LogTable: ell = (ts, rid, level, msg), plus where it came from and where it aligned.
//   ts_ns: on the trace clock, INT64_MIN when the line had none; process: invalid
//   when unknown; os_pid, rank: -1 when unknown; request: request id text, kEmpty
//   when none; source: file; line_number: 1-based within source; step and
//   alignment are filled by reconstruction.
#define TELLER_LOG_COLUMNS(COL, DERIVED)                       \
  COL(ts_ns, ts_ns, TimeNs, Value, none, none)                 \
  COL(process, process, ProcessIndex, Ref, processes, none)    \
  COL(os_pid, os_pid, int64_t, Value, none, none)              \
  COL(rank, rank, int32_t, Value, none, none)                  \
  COL(level, level, LogLevel, Enum, none, none)                \
  COL(stream, stream, LogStream, Enum, none, none)             \
  COL(request, request, StringId, Ref, strings, none)          \
  COL(template, template_id, TemplateId, Ref, templates, none) \
  COL(text, text, StringId, Ref, strings, none)                \
  COL(source, source, StringId, Ref, strings, none)            \
  COL(line_number, line_number, int64_t, Value, none, none)    \
  COL(step, step, StepIndex, Ref, steps, none)                 \
  COL(alignment, alignment, LogAlignment, Enum, none, none)

// NodeTable: call-chain nodes; parent is invalid for the step root.
#define TELLER_NODE_COLUMNS(COL, DERIVED)          \
  COL(event, event, EventRow, Ref, events, event)  \
  COL(parent, parent, NodeIndex, Ref, nodes, node) \
  COL(depth, depth, uint16_t, Value, none, none)   \
  COL(step, step, StepIndex, Ref, steps, step)

// StepTable: event is the range that defines the step; number: step number on its
//   rank; end_ns includes device work launched in the step; nodes [node_begin,
//   node_end); requests_begin, requests_count: rows of Trace::step_requests;
//   global_step: the same value for the same step across ranks, -1 none.
#define TELLER_STEP_COLUMNS(COL, DERIVED)                                  \
  COL(event, event, EventRow, Ref, events, event)                          \
  COL(process, process, ProcessIndex, Ref, processes, none)                \
  COL(thread, thread, ThreadIndex, Ref, threads, none)                     \
  COL(rank, rank, int32_t, Value, none, none)                              \
  COL(number, number, int64_t, Value, none, none)                          \
  COL(name, name, StringId, Ref, strings, none)                            \
  COL(phase, phase, StepPhase, Enum, none, none)                           \
  COL(source, source, StepSource, Enum, none, none)                        \
  COL(start_ns, start_ns, TimeNs, Value, none, none)                       \
  COL(end_ns, end_ns, TimeNs, Value, none, none)                           \
  COL(node_begin, node_begin, NodeIndex, Ref, node_ends, node)             \
  COL(node_end, node_end, NodeIndex, Ref, node_ends, node)                 \
  COL(requests_begin, requests_begin, uint32_t, Value, none, step_request) \
  COL(requests_count, requests_count, uint32_t, Value, none, none)         \
  COL(global_step, global_step, int64_t, Value, none, none)

// RequestTable: id is the request id text.
#define TELLER_REQUEST_COLUMNS(COL, DERIVED)         \
  COL(id, id, StringId, Ref, strings, none)          \
  COL(first_ns, first_ns, TimeNs, Value, none, none) \
  COL(last_ns, last_ns, TimeNs, Value, none, none)   \
  COL(step_count, step_count, uint32_t, Value, none, none)

// CollectiveMatchTable: collectives matched across ranks by communicator and sequence.
#define TELLER_COLLECTIVE_MATCH_COLUMNS(COL, DERIVED)       \
  COL(match_id, match, CollectiveMatchId, Ref, none, match) \
  COL(event, event, EventRow, Ref, events, event)           \
  COL(rank, rank, int32_t, Value, none, none)

// The column tables of model::Trace, in store order:
//   TABLE(sql_table, trace_member, ModelType, row_column, row_base, COLUMNS)
// row_column is the store's row-index column and row_base the window row base it is
// offset by. The store also has meta, strings, stats and step_requests, which are not
// column tables (store_schema.cc declares them).
#define TELLER_SHARED_TRACE_TABLES(TABLE)                                             \
  TABLE(processes, processes, ProcessTable, process, none, TELLER_PROCESS_COLUMNS)    \
  TABLE(threads, threads, ThreadTable, thread, none, TELLER_THREAD_COLUMNS)           \
  TABLE(templates, templates, TemplateTable, template, none, TELLER_TEMPLATE_COLUMNS) \
  TABLE(logs, logs, LogTable, log, none, TELLER_LOG_COLUMNS)                          \
  TABLE(requests, requests, RequestTable, request, none, TELLER_REQUEST_COLUMNS)

// Tables that grow with events (written window by window by the windowed build).
#define TELLER_ROW_TRACE_TABLES(TABLE)                                                             \
  TABLE(events, events, EventTable, event, event, TELLER_EVENT_COLUMNS)                            \
  TABLE(args, args, ArgTable, arg, arg, TELLER_ARG_COLUMNS)                                        \
  TABLE(collectives, collectives, CollectiveTable, collective, collective,                         \
        TELLER_COLLECTIVE_COLUMNS)                                                                 \
  TABLE(nodes, nodes, NodeTable, node, node, TELLER_NODE_COLUMNS)                                  \
  TABLE(steps, steps, StepTable, step, step, TELLER_STEP_COLUMNS)                                  \
  TABLE(collective_matches, collective_matches, CollectiveMatchTable, collective_match, match_row, \
        TELLER_COLLECTIVE_MATCH_COLUMNS)

// Declares a table's vectors (used by model/trace.h).
#define TELLER_MODEL_COLUMN(sql_name, field, Type, Kind, Target, Base) std::vector<Type> field;
#define TELLER_MODEL_DERIVED(sql_name, sql_type)

namespace teller::model {

// The tables a Ref column points into: the lists' Target names.
enum class ColumnTarget {
  none,
  strings,
  processes,
  threads,
  events,
  nodes,
  node_ends,
  steps,
  templates,
  requests
};

// The rows a column's value is offset by when tables are joined or windowed: the lists'
// Base names.
enum class ColumnBase { none, event, arg, collective, node, step, step_request, match, match_row };

}  // namespace teller::model
