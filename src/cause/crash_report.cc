#include "cause/crash_report.h"

#include <algorithm>
#include <array>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/median.h"

namespace teller::cause {
namespace {

using model::FaultCategory;
using model::Layer;

struct StickyError {
  int64_t code;
  std::string_view name;
  FaultCategory category;
};

// Errors that leave the CUDA context unusable: every later call fails with them.
constexpr std::array<StickyError, 9> kStickyErrors = {{
    {700, "illegal address", FaultCategory::kCudaKernel},
    {710, "device-side assert triggered", FaultCategory::kCudaKernel},
    {714, "hardware stack error", FaultCategory::kCudaKernel},
    {715, "illegal instruction", FaultCategory::kCudaKernel},
    {716, "misaligned address", FaultCategory::kCudaKernel},
    {717, "invalid address space", FaultCategory::kCudaKernel},
    {718, "invalid program counter", FaultCategory::kCudaKernel},
    {719, "unspecified launch failure", FaultCategory::kRuntimeDriver},
    {999, "unknown error", FaultCategory::kRuntimeDriver},
}};

const StickyError* Sticky(int64_t code) {
  for (const StickyError& error : kStickyErrors) {
    if (error.code == code) return &error;
  }
  return nullptr;
}

int32_t RankOf(const model::Trace& trace, uint32_t event) {
  const model::ProcessIndex process = trace.events.process[event];
  return process.valid() ? trace.processes.rank[process.value()] : -1;
}

bool OnDevice(const model::Trace& trace, uint32_t event) {
  const model::ThreadIndex thread = trace.events.thread[event];
  return thread.valid() && trace.threads.is_device[thread.value()] != 0;
}

bool IsKernel(Layer layer) { return layer == Layer::kK || layer == Layer::kComm; }

// The host call that launched kernel `event` (for a graph node, the replay's
// cudaGraphLaunch: its nodes share the launch's correlation); -1 when none is found.
int64_t LaunchOf(const model::Trace& trace, uint32_t event) {
  const model::CorrelationId correlation = trace.events.correlation[event];
  if (!correlation.valid()) return -1;
  for (uint32_t e = 0; e < trace.events.size(); ++e) {
    if (e != event && trace.events.correlation[e] == correlation &&
        trace.events.process[e] == trace.events.process[event] && !OnDevice(trace, e)) {
      return e;
    }
  }
  return -1;
}

// The innermost host range of the launch's thread around the launch call `launch`.
std::string LaunchSite(const model::Trace& trace, int64_t launch) {
  if (launch < 0) return "";
  const model::TimeNs at = trace.events.start_ns[launch];
  std::string site;
  model::TimeNs site_start = INT64_MIN;
  for (uint32_t e = 0; e < trace.events.size(); ++e) {
    const Layer layer = trace.events.layer[e];
    if ((layer != Layer::kFe && layer != Layer::kBe) ||
        trace.events.thread[e] != trace.events.thread[launch]) {
      continue;
    }
    const model::TimeNs start = trace.events.start_ns[e];
    if (start <= at && start + trace.events.dur_ns[e] >= at && start >= site_start) {
      site = std::string(trace.str(trace.events.name[e]));
      site_start = start;
    }
  }
  return site;
}

CrashKernel KernelOf(const model::Trace& trace, uint32_t event,
                     const std::map<base::StringId, model::DurationNs>& normals) {
  CrashKernel kernel;
  kernel.name = std::string(trace.str(trace.events.name[event]));
  kernel.start_ns = trace.events.start_ns[event];
  kernel.dur_ns = trace.events.dur_ns[event];
  auto it = normals.find(trace.events.name[event]);
  if (it != normals.end()) kernel.normal_ns = it->second;
  kernel.in_graph = (trace.events.flags[event] & model::kFlagGraphNode) != 0;
  return kernel;
}

// Where kernel `event` was launched from: the launch call and the host range around it.
void AddLaunch(const model::Trace& trace, uint32_t event, CrashKernel* kernel) {
  const int64_t launch = LaunchOf(trace, event);
  if (launch >= 0) kernel->launch_call = std::string(trace.str(trace.events.name[launch]));
  kernel->launched_from = LaunchSite(trace, launch);
}

void FindStepAndRequests(const model::Trace& trace, CrashReport* report) {
  for (uint32_t s = 0; s < trace.steps.size(); ++s) {
    if (trace.steps.rank[s] != report->rank || trace.steps.start_ns[s] > report->at_ns ||
        trace.steps.end_ns[s] < report->at_ns) {
      continue;
    }
    report->step = trace.steps.number[s];
    report->requests = StepRequestIds(trace, model::StepIndex(s));
    return;
  }
}

}  // namespace

std::vector<std::string> StepRequestIds(const model::Trace& trace, model::StepIndex step) {
  std::vector<std::string> ids;
  const uint32_t s = step.value();
  for (uint32_t i = 0; i < trace.steps.requests_count[s]; ++i) {
    const model::RequestIndex request = trace.step_requests[trace.steps.requests_begin[s] + i];
    ids.push_back(std::string(trace.str(trace.requests.id[request.value()])));
  }
  return ids;
}

CrashReport FindCrash(const model::Trace& trace) {
  CrashReport report;
  const base::StringId result_key = trace.FindArgKey("result");
  if (!result_key.valid()) return report;
  int64_t first = -1;
  for (uint32_t e = 0; e < trace.events.size(); ++e) {
    // A synchronizing call (cudaStreamSynchronize, cudaEventQuery: the sync layer) returns
    // the error of the fault it waited for, often the first call to see it.
    const Layer layer = trace.events.layer[e];
    if (layer != Layer::kRt && layer != Layer::kDrv && layer != Layer::kSync) continue;
    int64_t result = 0;
    if (!trace.FindIntArg(model::EventRow(e), result_key, &result) || Sticky(result) == nullptr) {
      continue;
    }
    if (first < 0 || trace.events.start_ns[e] < trace.events.start_ns[first]) first = e;
  }
  if (first < 0) return report;
  const uint32_t call = static_cast<uint32_t>(first);
  int64_t result = 0;
  trace.FindIntArg(model::EventRow(call), result_key, &result);
  const StickyError& error = *Sticky(result);
  report.found = true;
  report.rank = RankOf(trace, call);
  report.call = std::string(trace.str(trace.events.name[call]));
  report.error = result;
  report.error_name = std::string(error.name);
  report.category = error.category;
  report.at_ns = trace.events.start_ns[call];
  // When the error came back: the call's end. A synchronization waits for the fault, which
  // can happen after the call began (a faulting node of a graph replayed behind it).
  const model::TimeNs returned_ns = report.at_ns + trace.events.dur_ns[call];
  FindStepAndRequests(trace, &report);
  // Kernels of that process on the GPU: their normal durations, then the ones of the
  // error's step (or the last 50 ms) that began before the error came back.
  const model::ProcessIndex process = trace.events.process[call];
  std::map<base::StringId, std::vector<double>> durations;
  std::vector<uint32_t> before;
  model::TimeNs window_start = report.at_ns - 50'000'000;
  for (uint32_t s = 0; s < trace.steps.size(); ++s) {
    if (trace.steps.rank[s] == report.rank && trace.steps.number[s] == report.step) {
      window_start = trace.steps.start_ns[s];
    }
  }
  for (uint32_t e = 0; e < trace.events.size(); ++e) {
    if (trace.events.process[e] != process || !IsKernel(trace.events.layer[e]) ||
        !OnDevice(trace, e)) {
      continue;
    }
    const model::TimeNs start = trace.events.start_ns[e];
    if (start < window_start) durations[trace.events.name[e]].push_back(trace.events.dur_ns[e]);
    if (start >= window_start && start <= returned_ns) before.push_back(e);
  }
  std::map<base::StringId, model::DurationNs> normals;
  for (auto& [name, values] : durations) {
    normals[name] = static_cast<model::DurationNs>(base::MedianInPlace(&values));
  }
  // Most likely at fault: the last compute kernel to start on that GPU before the error.
  // A fault stops the device: the kernels queued behind the faulting one never run, so
  // it is the last to start. Collectives are left out: a NCCL kernel's length is its wait.
  // Still running: began before the error and ended after it.
  int64_t suspect = -1, running = -1;
  for (uint32_t e : before) {
    const CrashKernel kernel = KernelOf(trace, e, normals);
    if (kernel.start_ns + kernel.dur_ns >= returned_ns && running < 0) {
      report.running = kernel;
      running = e;
    }
    if (trace.events.layer[e] == Layer::kComm) continue;
    if (suspect < 0 || kernel.start_ns >= report.suspect.start_ns) {
      report.suspect = kernel;
      suspect = e;
    }
  }
  report.has_suspect = suspect >= 0;
  report.has_running = running >= 0;
  if (report.has_suspect) AddLaunch(trace, static_cast<uint32_t>(suspect), &report.suspect);
  if (report.has_running) AddLaunch(trace, static_cast<uint32_t>(running), &report.running);
  return report;
}

CrashReport MergeCrashReports(const std::vector<CrashReport>& parts) {
  const CrashReport* first = nullptr;
  for (const CrashReport& part : parts) {
    if (part.found && (first == nullptr || part.at_ns < first->at_ns)) first = &part;
  }
  return first != nullptr ? *first : CrashReport{};
}

namespace {

std::string KernelDifference(std::string_view which, const CrashKernel& a, const CrashKernel& b) {
  if (a.name != b.name) return fmt::format("{} kernel {} against {}", which, a.name, b.name);
  if (a.start_ns != b.start_ns || a.dur_ns != b.dur_ns || a.normal_ns != b.normal_ns) {
    return fmt::format("{} kernel {}'s times", which, a.name);
  }
  if (a.launched_from != b.launched_from || a.in_graph != b.in_graph ||
      a.launch_call != b.launch_call) {
    return fmt::format("{} kernel {}'s launch", which, a.name);
  }
  return "";
}

}  // namespace

std::string CrashDifference(const CrashReport& a, const CrashReport& b) {
  if (a.found != b.found) return fmt::format("found {} against {}", a.found, b.found);
  if (a.rank != b.rank) return fmt::format("rank {} against {}", a.rank, b.rank);
  if (a.call != b.call || a.error != b.error || a.error_name != b.error_name ||
      a.category != b.category) {
    return fmt::format("call {} ({}) against {} ({})", a.call, a.error, b.call, b.error);
  }
  if (a.at_ns != b.at_ns) return fmt::format("at {} ns against {} ns", a.at_ns, b.at_ns);
  if (a.step != b.step || a.requests != b.requests) {
    return fmt::format("step {} against {}, or its requests", a.step, b.step);
  }
  if (a.has_suspect != b.has_suspect) return "one has a suspect kernel, the other not";
  if (a.has_running != b.has_running) return "one has a running kernel, the other not";
  std::string kernel = KernelDifference("suspect", a.suspect, b.suspect);
  if (kernel.empty()) kernel = KernelDifference("running", a.running, b.running);
  return kernel;
}

}  // namespace teller::cause
