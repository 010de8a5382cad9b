#include "report/perfetto_export.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "base/json_text.h"

namespace teller::report {
namespace {

using model::Trace;

struct FileCloser {
  void operator()(FILE* file) const { if (file) std::fclose(file); }
};

void AppendMicros(std::string* out, int64_t ns) {
  if (ns < 0) {
    out->push_back('-');
    ns = -ns;
  }
  fmt::format_to(std::back_inserter(*out), "{}.{:03}", ns / 1000, ns % 1000);
}

// Perfetto pids/tids: host processes keep their index; device tracks get their own
// process per (process, device) so GPUs show as separate groups.
int64_t PerfettoPid(const Trace& trace, model::ThreadIndex thread) {
  uint32_t t = thread.value();
  int64_t process = trace.threads.process[t].value();
  if (!trace.threads.is_device[t]) return process + 1;
  return 1000000 + process * 1000 + trace.threads.device[t] + 1;
}

}  // namespace

base::Status ExportPerfetto(const Trace& trace, const std::string& path,
                            const PerfettoOptions& options) {
  std::string tmp = path + ".tmp";
  std::unique_ptr<FILE, FileCloser> file(std::fopen(tmp.c_str(), "wb"));
  if (!file) return base::IoError("{}: cannot create: {}", tmp, std::strerror(errno));
  const model::EventTable& events = trace.events;
  int64_t origin = INT64_MAX;
  for (size_t i = 0; i < events.size(); ++i) {
    if (events.phase[i] != model::EventPhase::kEnd) origin = std::min(origin, events.start_ns[i]);
  }
  if (origin == INT64_MAX) origin = 0;

  std::string out;
  out.reserve(1 << 20);
  bool write_failed = false;
  auto flush = [&](bool force) {
    if (out.size() < (1 << 20) && !force) return;
    if (std::fwrite(out.data(), 1, out.size(), file.get()) != out.size()) write_failed = true;
    out.clear();
  };
  out += "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"teller_origin_ns\":";
  out += std::to_string(origin);
  out += "},\"traceEvents\":[\n";
  bool first = true;
  auto begin_event = [&]() {
    if (!first) out += ",\n";
    first = false;
  };

  // Track names.
  for (size_t p = 0; p < trace.processes.size(); ++p) {
    begin_event();
    std::string name = fmt::format("{} pid {} rank {}", trace.str(trace.processes.name[p]),
                                   trace.processes.os_pid[p], trace.processes.rank[p]);
    fmt::format_to(std::back_inserter(out),
                   "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{},\"tid\":0,\"args\":{{\"name\":",
                   p + 1);
    base::AppendJsonString(name, &out);
    out += "}}";
  }
  for (size_t t = 0; t < trace.threads.size(); ++t) {
    model::ThreadIndex thread(static_cast<uint32_t>(t));
    int64_t pid = PerfettoPid(trace, thread);
    std::string name = trace.threads.is_device[t]
                           ? fmt::format("stream {}", trace.threads.os_tid[t])
                           : std::string(trace.str(trace.threads.name[t]));
    if (name.empty()) name = fmt::format("thread {}", trace.threads.os_tid[t]);
    begin_event();
    fmt::format_to(std::back_inserter(out),
                   "{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":",
                   pid, t + 1);
    base::AppendJsonString(name, &out);
    out += "}}";
    if (trace.threads.is_device[t]) {
      begin_event();
      fmt::format_to(std::back_inserter(out),
                     "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{},\"tid\":0,\"args\":{{"
                     "\"name\":\"GPU {} of process {}\"}}}}",
                     pid, trace.threads.device[t], trace.threads.process[t].value() + 1);
    }
  }

  // Step of each event, for request ids in args.
  std::vector<int32_t> step_of_event(events.size(), -1);
  for (size_t n = 0; n < trace.nodes.size(); ++n) {
    step_of_event[trace.nodes.event[n].value()] = static_cast<int32_t>(trace.nodes.step[n].value());
  }

  for (size_t i = 0; i < events.size(); ++i) {
    if (events.phase[i] == model::EventPhase::kEnd) continue;
    int64_t start = events.start_ns[i], dur = std::max<int64_t>(events.dur_ns[i], 0);
    if (start + dur < options.window_start_ns || start >= options.window_end_ns) continue;
    model::ThreadIndex thread = events.thread[i];
    begin_event();
    out += "{\"ph\":";
    out += events.phase[i] == model::EventPhase::kInstant ? "\"i\",\"s\":\"t\"" : "\"X\"";
    out += ",\"name\":";
    base::AppendJsonString(trace.str(events.name[i]), &out);
    out += ",\"cat\":\"";
    out += model::LayerName(events.layer[i]);
    fmt::format_to(std::back_inserter(out), "\",\"pid\":{},\"tid\":{},\"ts\":",
                   PerfettoPid(trace, thread), thread.value() + 1);
    AppendMicros(&out, start - origin);
    if (events.phase[i] != model::EventPhase::kInstant) {
      out += ",\"dur\":";
      AppendMicros(&out, dur);
    }
    out += ",\"args\":{\"layer\":\"";
    out += model::LayerName(events.layer[i]);
    out += "\"";
    if (events.correlation[i].valid()) {
      fmt::format_to(std::back_inserter(out), ",\"correlation\":{}", events.correlation[i].value());
    }
    int32_t step = step_of_event[i];
    if (step >= 0) {
      fmt::format_to(std::back_inserter(out), ",\"step\":{}", trace.steps.number[step]);
      if (trace.steps.event[step].value() == i) {
        std::string ids;
        uint32_t begin = trace.steps.requests_begin[step];
        for (uint32_t r = 0; r < trace.steps.requests_count[step]; ++r) {
          if (!ids.empty()) ids += ",";
          ids += trace.str(trace.requests.id[trace.step_requests[begin + r].value()]);
        }
        out += ",\"requests\":";
        base::AppendJsonString(ids, &out);
        out += ",\"phase\":";
        base::AppendJsonString(model::StepPhaseName(trace.steps.phase[step]), &out);
      }
    }
    out += "}}";
    flush(false);
  }

  // Flows from a launch to the device work it started (parent -> child across tracks).
  for (size_t n = 0; n < trace.nodes.size(); ++n) {
    model::NodeIndex parent = trace.nodes.parent[n];
    if (!parent.valid()) continue;
    uint32_t child_row = trace.nodes.event[n].value();
    uint32_t parent_row = trace.nodes.event[parent.value()].value();
    model::ThreadIndex child_thread = events.thread[child_row];
    model::ThreadIndex parent_thread = events.thread[parent_row];
    if (!trace.threads.is_device[child_thread.value()] ||
        trace.threads.is_device[parent_thread.value()]) {
      continue;
    }
    int64_t start = events.start_ns[child_row];
    if (start < options.window_start_ns || start >= options.window_end_ns) continue;
    begin_event();
    fmt::format_to(std::back_inserter(out),
                   "{{\"ph\":\"s\",\"id\":{},\"name\":\"launch\",\"cat\":\"launch\",\"pid\":{},"
                   "\"tid\":{},\"ts\":",
                   n, PerfettoPid(trace, parent_thread), parent_thread.value() + 1);
    AppendMicros(&out, events.start_ns[parent_row] - origin);
    out += "},\n";
    fmt::format_to(std::back_inserter(out),
                   "{{\"ph\":\"f\",\"bp\":\"e\",\"id\":{},\"name\":\"launch\",\"cat\":\"launch\","
                   "\"pid\":{},\"tid\":{},\"ts\":",
                   n, PerfettoPid(trace, child_thread), child_thread.value() + 1);
    AppendMicros(&out, start - origin);
    out += "}";
    flush(false);
  }
  out += "\n]}\n";
  flush(true);
  if (std::fflush(file.get()) != 0 || write_failed) {
    return base::IoError("{}: write failed: {}", tmp, std::strerror(errno));
  }
  file.reset();
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return base::IoError("{}: cannot rename from {}: {}", path, tmp, std::strerror(errno));
  }
  return base::OkStatus();
}

}  // namespace teller::report
