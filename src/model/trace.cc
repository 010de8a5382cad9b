#include "model/trace.h"

#include <algorithm>
#include <cstring>

namespace teller::model {

ProcessIndex ProcessTable::Append(int64_t pid, StringId host_name, StringId process_name,
                                  int32_t global_rank, StringId source_file) {
  ProcessIndex index(static_cast<uint32_t>(size()));
  os_pid.push_back(pid);
  host.push_back(host_name);
  name.push_back(process_name);
  rank.push_back(global_rank);
  node.push_back(-1);
  source.push_back(source_file);
  clock_offset_ns.push_back(0);
  clock_uncertainty_ns.push_back(0);
  return index;
}

ThreadIndex ThreadTable::Append(ProcessIndex owner, int64_t tid, StringId thread_name,
                                bool device_track, int32_t device_index) {
  ThreadIndex index(static_cast<uint32_t>(size()));
  process.push_back(owner);
  os_tid.push_back(tid);
  name.push_back(thread_name);
  is_device.push_back(device_track ? 1 : 0);
  device.push_back(device_index);
  return index;
}

void EventTable::Reserve(size_t n) {
#define TELLER_RESERVE_COLUMN(sql_name, field, Type, Kind, Target, Base) field.reserve(n);
  TELLER_EVENT_COLUMNS(TELLER_RESERVE_COLUMN, TELLER_MODEL_DERIVED)
#undef TELLER_RESERVE_COLUMN
}

EventRow EventTable::Append(Layer event_layer, EventPhase event_phase, StringId event_name,
                            ProcessIndex event_process, ThreadIndex event_thread, TimeNs start,
                            DurationNs duration, EventId event_id, CorrelationId event_correlation,
                            uint8_t event_flags) {
  EventRow row(static_cast<uint32_t>(size()));
  layer.push_back(event_layer);
  phase.push_back(event_phase);
  flags.push_back(event_flags);
  name.push_back(event_name);
  process.push_back(event_process);
  thread.push_back(event_thread);
  start_ns.push_back(start);
  dur_ns.push_back(duration);
  id.push_back(event_id);
  correlation.push_back(event_correlation);
  args_begin.push_back(0);
  args_count.push_back(0);
  return row;
}

namespace {
void AddArgRow(Trace* trace, EventRow row, StringId key, ArgType type, int64_t int_value,
               StringId string_value) {
  uint32_t r = row.value();
  uint16_t& count = trace->events.args_count[r];
  if (count == 0) trace->events.args_begin[r] = static_cast<uint32_t>(trace->args.size());
  if (count == UINT16_MAX) {
    trace->stats.Increment(model::stat::kModelEventArgsOverLimit);
    return;
  }
  ++count;
  trace->args.key.push_back(key);
  trace->args.type.push_back(type);
  trace->args.int_value.push_back(int_value);
  trace->args.string_value.push_back(string_value);
}
}  // namespace

void Trace::AddIntArg(EventRow row, StringId key, int64_t value) {
  AddArgRow(this, row, key, ArgType::kInt, value, base::StringPool::kEmpty);
}

void Trace::AddStringArg(EventRow row, StringId key, StringId value) {
  AddArgRow(this, row, key, ArgType::kString, 0, value);
}

void Trace::AddDoubleArg(EventRow row, StringId key, double value) {
  int64_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  AddArgRow(this, row, key, ArgType::kDouble, bits, base::StringPool::kEmpty);
}

bool Trace::FindIntArg(EventRow row, StringId key, int64_t* value) const {
  uint32_t begin = events.args_begin[row.value()];
  uint32_t end = begin + events.args_count[row.value()];
  for (uint32_t i = begin; i < end; ++i) {
    if (args.key[i] == key && args.type[i] == ArgType::kInt) {
      *value = args.int_value[i];
      return true;
    }
  }
  return false;
}

bool Trace::FindStringArg(EventRow row, StringId key, StringId* value) const {
  uint32_t begin = events.args_begin[row.value()];
  uint32_t end = begin + events.args_count[row.value()];
  for (uint32_t i = begin; i < end; ++i) {
    if (args.key[i] == key && args.type[i] == ArgType::kString) {
      *value = args.string_value[i];
      return true;
    }
  }
  return false;
}

StringId Trace::FindArgKey(std::string_view name) const {
  const StringId key = strings.Find(name);
  if (!key.valid()) return key;
  return std::find(args.key.begin(), args.key.end(), key) != args.key.end() ? key
                                                                            : StringId::Invalid();
}

size_t Trace::AppendLog(TimeNs ts, ProcessIndex log_process, int64_t pid, int32_t log_rank,
                        LogLevel log_level, LogStream log_stream, StringId request_id,
                        TemplateId template_index, StringId log_text, StringId source_file,
                        int64_t line) {
  size_t row = logs.size();
  logs.ts_ns.push_back(ts);
  logs.process.push_back(log_process);
  logs.os_pid.push_back(pid);
  logs.rank.push_back(log_rank);
  logs.level.push_back(log_level);
  logs.stream.push_back(log_stream);
  logs.request.push_back(request_id);
  logs.template_id.push_back(template_index);
  logs.text.push_back(log_text);
  logs.source.push_back(source_file);
  logs.line_number.push_back(line);
  logs.step.push_back(StepIndex::Invalid());
  logs.alignment.push_back(LogAlignment::kNone);
  return row;
}

size_t Trace::ColumnBytes() const {
  auto bytes = [](const auto& v) { return v.capacity() * sizeof(v[0]); };
  const EventTable& e = events;
  size_t total = bytes(e.layer) + bytes(e.phase) + bytes(e.flags) + bytes(e.name) +
                 bytes(e.process) + bytes(e.thread) + bytes(e.start_ns) + bytes(e.dur_ns) +
                 bytes(e.id) + bytes(e.correlation) + bytes(e.args_begin) + bytes(e.args_count);
  total += bytes(args.key) + bytes(args.type) + bytes(args.int_value) + bytes(args.string_value);
  total += bytes(collectives.event) * 8;
  total += bytes(nodes.event) + bytes(nodes.parent) + bytes(nodes.depth) + bytes(nodes.step);
  return total;
}

std::string_view LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kUnknown:
      return "UNKNOWN";
    case LogLevel::kDebug:
      return "DEBUG";
    case LogLevel::kInfo:
      return "INFO";
    case LogLevel::kWarning:
      return "WARNING";
    case LogLevel::kError:
      return "ERROR";
    case LogLevel::kCritical:
      return "CRITICAL";
  }
  return "UNKNOWN";
}

std::string_view StepPhaseName(StepPhase phase) {
  switch (phase) {
    case StepPhase::kUnknown:
      return "unknown";
    case StepPhase::kPrefill:
      return "prefill";
    case StepPhase::kDecode:
      return "decode";
    case StepPhase::kMixed:
      return "mixed";
  }
  return "unknown";
}

std::string_view StepSourceName(StepSource source) {
  switch (source) {
    case StepSource::kEngineStep:
      return "engine_step";
    case StepSource::kEngineAnnotation:
      return "engine_annotation";
    case StepSource::kProfilerStep:
      return "profiler_step";
    case StepSource::kTopLevelRange:
      return "top_level_range";
  }
  return "unknown";
}

void TraceMeta::AddInputFormat(TraceFormat input) {
  if (input == TraceFormat::kUnknown) return;  // a part that holds no input of its own
  if (format == TraceFormat::kUnknown || format == TraceFormat::kLogs) {
    format = input;
  } else if (input != TraceFormat::kLogs && input != format) {
    format = TraceFormat::kMixed;
  }
}

std::string_view TraceFormatName(TraceFormat format) {
  switch (format) {
    case TraceFormat::kUnknown:
      return "unknown";
    case TraceFormat::kBundle:
      return "bundle";
    case TraceFormat::kKineto:
      return "kineto";
    case TraceFormat::kNsys:
      return "nsys";
    case TraceFormat::kLogs:
      return "logs";
    case TraceFormat::kMixed:
      return "mixed";
  }
  return "unknown";
}

}  // namespace teller::model
