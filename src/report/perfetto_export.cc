#include "report/perfetto_export.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "base/json_text.h"
#include "cause/cause_text.h"
#include "cause/deviation_map.h"

namespace teller::report {
namespace {

using model::Trace;

struct FileCloser {
  void operator()(FILE* file) const {
    if (file) std::fclose(file);
  }
};

void AppendMicros(std::string* out, int64_t ns) {
  if (ns < 0) {
    out->push_back('-');
    ns = -ns;
  }
  fmt::format_to(std::back_inserter(*out), "{}.{:03}", ns / 1000, ns % 1000);
}

// The pid of the track holding the diagnosis's abnormal-step slices.
constexpr int64_t kDiagnosisPid = 999999;

// A double as JSON: finite numbers with up to 6 significant digits, else null.
void AppendNumber(std::string* out, double value) {
  if (!std::isfinite(value)) {
    *out += "null";
    return;
  }
  fmt::format_to(std::back_inserter(*out), "{:.6g}", value);
}

void AppendSuspectArgs(const PerfettoSuspectMark& mark, std::string* out) {
  fmt::format_to(std::back_inserter(*out), ",\"teller_suspect\":true,\"teller_finding_rank\":{}",
                 mark.finding_rank);
  *out += ",\"teller_family\":";
  base::AppendJsonString(mark.family, out);
  *out += ",\"teller_feature\":";
  base::AppendJsonString(mark.feature, out);
  *out += ",\"teller_z\":";
  AppendNumber(out, mark.z);
  *out += ",\"teller_value\":";
  AppendNumber(out, mark.value);
  *out += ",\"teller_baseline\":";
  AppendNumber(out, mark.baseline);
}

void AppendStepMarkArgs(const PerfettoStepMark& mark, std::string* out) {
  fmt::format_to(std::back_inserter(*out), ",\"teller_abnormal_step\":true,\"teller_step_rank\":{}",
                 mark.step_rank);
  *out += ",\"teller_family\":";
  base::AppendJsonString(mark.family, out);
  *out += ",\"teller_z\":";
  AppendNumber(out, mark.z);
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

void MarkDiagnosis(const diagnose::Diagnosis& diagnosis, PerfettoOptions* options) {
  for (size_t f = 0; f < diagnosis.findings.size(); ++f) {
    const diagnose::Finding& finding = diagnosis.findings[f];
    for (model::NodeIndex node : finding.suspects) {
      if (!node.valid()) continue;
      PerfettoSuspectMark mark;
      mark.finding_rank = f + 1;
      mark.family = std::string(localize::OperatorFamilyName(finding.family));
      mark.feature = std::string(localize::FeatureName(finding.feature));
      mark.z = finding.peak_z;
      mark.value = finding.value;
      mark.baseline = finding.median;
      options->suspects.emplace(node.value(), std::move(mark));  // keeps the first
    }
  }
  if (!diagnosis.causes.empty()) {
    const cause::Hypothesis& h = diagnosis.causes.front().hypothesis;
    PerfettoCauseMark& mark = options->cause;
    mark.present = true;
    mark.title = fmt::format(
        "{} {}: {}",
        diagnose::RunVerdictName(diagnose::VerdictOf(diagnosis)) == "failed" ? "FAILED"
                                                                             : "DEGRADED",
        diagnose::FaultCategoryName(diagnosis.category), cause::CauseLocation(h));
    mark.sentence = cause::CauseSentence(h);
    mark.decided_by = diagnosis.decider;
    if (diagnose::DecidedByLearned(diagnosis)) mark.probability = diagnosis.degraded_probability;
    mark.first_step = h.first_group;
    mark.last_step = h.last_group;
  }
  for (size_t s = 0; s < diagnosis.steps.size(); ++s) {
    const diagnose::AbnormalStep& step = diagnosis.steps[s];
    if (!step.step.valid()) continue;
    PerfettoStepMark mark;
    mark.step_rank = s + 1;
    mark.family = std::string(localize::OperatorFamilyName(step.family));
    mark.z = step.score;
    options->abnormal_steps.emplace(step.step.value(), std::move(mark));
  }
}

int64_t PerfettoOriginNs(const model::Trace& trace) {
  const model::EventTable& events = trace.events;
  int64_t origin = INT64_MAX;
  for (size_t i = 0; i < events.size(); ++i) {
    if (events.phase[i] != model::EventPhase::kEnd) origin = std::min(origin, events.start_ns[i]);
  }
  return origin == INT64_MAX ? 0 : origin;
}

std::string FormatPerfettoMicros(int64_t ns) {
  std::string out;
  AppendMicros(&out, ns);
  return out;
}

PerfettoWindow PerfettoStepWindow(const model::Trace& trace, model::StepIndex step,
                                  int64_t origin_ns) {
  const size_t s = step.value();
  return {trace.steps.start_ns[s] - origin_ns,
          std::max(trace.steps.end_ns[s], trace.steps.start_ns[s]) - origin_ns};
}

namespace {

// The JSON text being written, flushed to the file in pieces of about 1 MiB.
class EventWriter {
 public:
  explicit EventWriter(FILE* file) : file_(file) { out.reserve(1 << 20); }
  // Separates an event from the one before it.
  void BeginEvent() {
    if (!first_) out += ",\n";
    first_ = false;
  }
  void Flush(bool force) {
    if (out.size() < (1 << 20) && !force) return;
    if (std::fwrite(out.data(), 1, out.size(), file_) != out.size()) write_failed_ = true;
    out.clear();
  }
  bool write_failed() const { return write_failed_; }

  std::string out;

 private:
  FILE* file_;
  bool first_ = true;
  bool write_failed_ = false;
};

// Process and thread names: host processes, their threads and one group per GPU.
void AppendTrackNames(const Trace& trace, EventWriter* writer) {
  std::string& out = writer->out;
  for (size_t p = 0; p < trace.processes.size(); ++p) {
    writer->BeginEvent();
    std::string name = fmt::format("{} pid {} rank {}", trace.str(trace.processes.name[p]),
                                   trace.processes.os_pid[p], trace.processes.rank[p]);
    fmt::format_to(
        std::back_inserter(out),
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
    writer->BeginEvent();
    fmt::format_to(
        std::back_inserter(out),
        "{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":", pid,
        t + 1);
    base::AppendJsonString(name, &out);
    out += "}}";
    if (trace.threads.is_device[t]) {
      writer->BeginEvent();
      fmt::format_to(std::back_inserter(out),
                     "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{},\"tid\":0,\"args\":{{"
                     "\"name\":\"GPU {} of process {}\"}}}}",
                     pid, trace.threads.device[t], trace.threads.process[t].value() + 1);
    }
  }
}

// One slice (or instant) per event in the window, with its step, requests and marks.
void AppendEvents(const Trace& trace, const PerfettoOptions& options, int64_t origin,
                  EventWriter* writer) {
  const model::EventTable& events = trace.events;
  std::string& out = writer->out;
  // Step of each event, for request ids in args.
  std::vector<int32_t> step_of_event(events.size(), -1);
  for (size_t n = 0; n < trace.nodes.size(); ++n) {
    step_of_event[trace.nodes.event[n].value()] = static_cast<int32_t>(trace.nodes.step[n].value());
  }
  // Marks by event row.
  std::unordered_map<uint32_t, const PerfettoSuspectMark*> suspect_of_event;
  for (const auto& [node, mark] : options.suspects) {
    if (node < trace.nodes.size()) suspect_of_event[trace.nodes.event[node].value()] = &mark;
  }
  std::unordered_map<uint32_t, const PerfettoStepMark*> step_mark_of_event;
  for (const auto& [step, mark] : options.abnormal_steps) {
    if (step < trace.steps.size()) step_mark_of_event[trace.steps.event[step].value()] = &mark;
  }

  for (size_t i = 0; i < events.size(); ++i) {
    if (events.phase[i] == model::EventPhase::kEnd) continue;
    int64_t start = events.start_ns[i], dur = std::max<int64_t>(events.dur_ns[i], 0);
    if (start + dur < options.window_start_ns || start >= options.window_end_ns) continue;
    model::ThreadIndex thread = events.thread[i];
    writer->BeginEvent();
    out += "{\"ph\":";
    out += events.phase[i] == model::EventPhase::kInstant ? "\"i\",\"s\":\"t\"" : "\"X\"";
    const auto suspect = suspect_of_event.find(static_cast<uint32_t>(i));
    const auto step_mark = step_mark_of_event.find(static_cast<uint32_t>(i));
    if (suspect != suspect_of_event.end()) {
      fmt::format_to(std::back_inserter(out), ",\"cname\":\"{}\"", kSuspectColor);
    } else if (step_mark != step_mark_of_event.end()) {
      fmt::format_to(std::back_inserter(out), ",\"cname\":\"{}\"", kAbnormalStepColor);
    }
    out += ",\"name\":";
    base::AppendJsonString(trace.str(events.name[i]), &out);
    out += ",\"cat\":\"";
    out += model::LayerName(events.layer[i]);
    fmt::format_to(std::back_inserter(out),
                   "\",\"pid\":{},\"tid\":{},\"ts\":", PerfettoPid(trace, thread),
                   thread.value() + 1);
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
    if (suspect != suspect_of_event.end()) AppendSuspectArgs(*suspect->second, &out);
    if (step_mark != step_mark_of_event.end()) AppendStepMarkArgs(*step_mark->second, &out);
    out += "}}";
    writer->Flush(false);
  }
}

// Flows from a launch to the device work it started (parent -> child across tracks).
void AppendLaunchFlows(const Trace& trace, const PerfettoOptions& options, int64_t origin,
                       EventWriter* writer) {
  const model::EventTable& events = trace.events;
  std::string& out = writer->out;
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
    writer->BeginEvent();
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
    writer->Flush(false);
  }
}

// The verdict's cause as one slice over its window (tid 2 of the diagnosis track).
void AppendCauseSlice(const Trace& trace, const PerfettoCauseMark& cause, int64_t origin,
                      EventWriter* writer) {
  int64_t start = INT64_MAX, end = INT64_MIN;
  for (size_t s = 0; s < trace.steps.size(); ++s) {
    const int64_t group = cause::GroupOf(trace, s);
    if (group < cause.first_step || group > cause.last_step) continue;
    start = std::min(start, trace.steps.start_ns[s]);
    end = std::max(end, std::max(trace.steps.end_ns[s], trace.steps.start_ns[s]));
  }
  if (start > end) return;
  std::string& out = writer->out;
  writer->BeginEvent();
  fmt::format_to(std::back_inserter(out),
                 "{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{},\"tid\":2,\"args\":{{"
                 "\"name\":\"cause\"}}}}",
                 kDiagnosisPid);
  writer->BeginEvent();
  fmt::format_to(std::back_inserter(out),
                 "{{\"ph\":\"X\",\"cname\":\"{}\",\"name\":", kSuspectColor);
  base::AppendJsonString(cause.title, &out);
  fmt::format_to(std::back_inserter(out),
                 ",\"cat\":\"teller\",\"pid\":{},\"tid\":2,\"ts\":", kDiagnosisPid);
  AppendMicros(&out, start - origin);
  out += ",\"dur\":";
  AppendMicros(&out, end - start);
  out += ",\"args\":{\"teller_cause\":";
  base::AppendJsonString(cause.sentence, &out);
  out += ",\"teller_decided_by\":";
  base::AppendJsonString(cause.decided_by, &out);
  if (cause.probability >= 0.0) {
    out += ",\"teller_probability\":";
    AppendNumber(&out, cause.probability);
  }
  fmt::format_to(std::back_inserter(out), ",\"first_step\":{},\"last_step\":{}}}}}",
                 cause.first_step, cause.last_step);
}

// The diagnosis track: one slice per abnormal step over its window (device work
// included), ordered by start, so the incident shows at a glance.
void AppendDiagnosisTrack(const Trace& trace, const PerfettoOptions& options, int64_t origin,
                          EventWriter* writer) {
  std::string& out = writer->out;
  std::vector<std::pair<uint32_t, const PerfettoStepMark*>> marks;
  for (const auto& [step, mark] : options.abnormal_steps) {
    if (step < trace.steps.size()) marks.emplace_back(step, &mark);
  }
  std::sort(marks.begin(), marks.end(), [&](const auto& a, const auto& b) {
    return std::make_pair(trace.steps.start_ns[a.first], a.first) <
           std::make_pair(trace.steps.start_ns[b.first], b.first);
  });
  writer->BeginEvent();
  fmt::format_to(std::back_inserter(out),
                 "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{0},\"tid\":0,\"args\":{{"
                 "\"name\":\"teller diagnosis\"}}}},\n{{\"ph\":\"M\",\"name\":\"thread_name\","
                 "\"pid\":{0},\"tid\":1,\"args\":{{\"name\":\"abnormal steps\"}}}}",
                 kDiagnosisPid);
  for (const auto& [step, mark] : marks) {
    const PerfettoWindow window = PerfettoStepWindow(trace, model::StepIndex(step), origin);
    if (window.end_ns + origin < options.window_start_ns ||
        window.start_ns + origin >= options.window_end_ns) {
      continue;
    }
    writer->BeginEvent();
    fmt::format_to(std::back_inserter(out),
                   "{{\"ph\":\"X\",\"cname\":\"{}\",\"name\":", kSuspectColor);
    base::AppendJsonString(
        fmt::format("abnormal step {} rank {}: {} z {:.1f}", trace.steps.number[step],
                    trace.steps.rank[step], mark->family, mark->z),
        &out);
    fmt::format_to(std::back_inserter(out),
                   ",\"cat\":\"teller\",\"pid\":{},\"tid\":1,\"ts\":", kDiagnosisPid);
    AppendMicros(&out, window.start_ns);
    out += ",\"dur\":";
    AppendMicros(&out, window.end_ns - window.start_ns);
    fmt::format_to(std::back_inserter(out), ",\"args\":{{\"step\":{},\"rank\":{}",
                   trace.steps.number[step], trace.steps.rank[step]);
    AppendStepMarkArgs(*mark, &out);
    out += "}}";
  }
  if (options.cause.present) AppendCauseSlice(trace, options.cause, origin, writer);
}

}  // namespace

base::Status ExportPerfetto(const Trace& trace, const std::string& path,
                            const PerfettoOptions& options) {
  std::string tmp = path + ".tmp";
  std::unique_ptr<FILE, FileCloser> file(std::fopen(tmp.c_str(), "wb"));
  if (!file) return base::IoError("{}: cannot create: {}", tmp, std::strerror(errno));
  const int64_t origin = PerfettoOriginNs(trace);

  EventWriter writer(file.get());
  std::string& out = writer.out;
  out += "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"teller_origin_ns\":";
  out += std::to_string(origin);
  out += "},\"traceEvents\":[\n";
  AppendTrackNames(trace, &writer);
  AppendEvents(trace, options, origin, &writer);
  AppendLaunchFlows(trace, options, origin, &writer);
  if (!options.abnormal_steps.empty() || options.cause.present) {
    AppendDiagnosisTrack(trace, options, origin, &writer);
  }
  out += "\n]}\n";
  writer.Flush(true);
  if (std::fflush(file.get()) != 0 || writer.write_failed()) {
    return base::IoError("{}: write failed: {}", tmp, std::strerror(errno));
  }
  file.reset();
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return base::IoError("{}: cannot rename from {}: {}", path, tmp, std::strerror(errno));
  }
  return base::OkStatus();
}

}  // namespace teller::report
