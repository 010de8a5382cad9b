// Step templates of a real trace: what `teller synth perturb` replays. Each template is
// one step of the imported, reconstructed trace (its call-chain nodes): host ranges,
// runtime/driver calls, kernels, copies, memsets and synchronizations with their times
// relative to the step start, thread or stream, correlation and launching call.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/layer.h"
#include "model/trace.h"
#include "sim/step_emitter.h"
#include "wire/records.h"

namespace teller::perturb {

// Which wire record an event is written as.
enum class EventKind : uint8_t { kRange, kApi, kKernel, kMemcpy, kMemset, kSync };

struct TemplateEvent {
  EventKind kind = EventKind::kRange;
  model::Layer layer = model::Layer::kFe;  // ranges: their layer (STEP written as FE)
  std::string_view name;                   // owned by TraceTemplates::names
  int64_t start_ns = 0;                    // from the step start
  int64_t dur_ns = 0;
  int64_t tid = 0;         // host events: OS thread id
  int64_t stream = -1;     // device events
  int32_t device = 0;      // device events
  int32_t launch = -1;     // device events: index of the launching call in the template
  int32_t waits_for = -1;  // copy calls that returned after their own copy ended: the copy
  uint64_t correlation = 0;
  bool driver = false;      // API calls: driver API
  bool waits = false;       // API calls that wait for the device (synchronize, blocking copy)
  bool graph_node = false;  // device work that ran as a CUDA/HIP graph node
  sim::Family family = sim::Family::kElementwise;  // kernels and copies
  wire::Dim3 grid, block;  // kernels: their launch shape as the trace has it (0 without)
  wire::CopyKind copy_kind = wire::CopyKind::kUnknown;
  wire::SyncType sync_type = wire::SyncType::kUnknown;
};

struct StepTemplate {
  int64_t source_step = 0;  // the step's number in the source trace
  std::string phase;        // prefill, decode or mixed
  int64_t duration_ns = 0;
  int64_t main_tid = 0;               // thread of the step's range
  std::vector<TemplateEvent> events;  // by start time
};

struct HostThread {
  int64_t tid = 0;
  std::string name;
};

struct TraceTemplates {
  std::vector<StepTemplate> steps;
  std::vector<HostThread> threads;
  int64_t pid = 0;
  int32_t rank = 0;
  std::string source;       // input paths, joined
  std::string step_source;  // how the source trace's steps were found
  double device_sigma = 0;  // log-normal jitter of device events
  double host_sigma = 0;    // of host events
  bool sigma_measured = false;
  // step_to_step (the same event in consecutive steps), same_name (events of one name
  // within the trace, capped) or fallback (2%).
  std::string sigma_method;
  std::vector<std::string> notes;
  std::deque<std::string> names;  // storage of the events' names
};

// Imports and reconstructs the inputs and takes the steps of its busiest process as
// templates. Errors name the inputs and what was missing.
base::StatusOr<TraceTemplates> LoadTemplates(const std::vector<std::string>& paths);

// The templates of an already reconstructed trace.
base::StatusOr<TraceTemplates> TemplatesOf(const model::Trace& trace, const std::string& source);

// The family of a kernel or copy in the simulator's families (labels' names).
sim::Family FamilyOfDevice(model::Layer layer, std::string_view name);

}  // namespace teller::perturb
