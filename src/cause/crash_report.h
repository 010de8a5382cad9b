// Crashes: a CUDA call that returned a sticky error (illegal address, device-side assert,
// misaligned address, launch failure, ...): the rank, the call, the kernels on that GPU
// before it, the one most likely at fault (cut short against its own normal duration, a
// faulting kernel ends early), the one still running when the error came back, where
// the faulting kernel was launched from (for a node of a CUDA graph: the replay's
// launch), and the requests in flight.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/fault_category.h"
#include "model/trace.h"

namespace teller::cause {

struct CrashKernel {
  std::string name;
  model::TimeNs start_ns = 0;
  model::DurationNs dur_ns = 0;
  model::DurationNs normal_ns = 0;  // median of the same kernel on that rank; 0: none
  std::string launched_from;        // innermost host range around its launch ("" if none)
  // A node of a CUDA graph: the replay's launch call (cudaGraphLaunch) is its launch, and
  // the error of a fault inside it comes back at a later call, often a synchronization.
  bool in_graph = false;
  std::string launch_call;  // the call that launched it ("" if not found)
};

struct CrashReport {
  bool found = false;
  int32_t rank = -1;
  std::string call;   // the CUDA call that returned the error
  int64_t error = 0;  // its result, a cudaError_t
  std::string error_name;
  model::TimeNs at_ns = 0;
  model::FaultCategory category = model::FaultCategory::kNone;
  bool has_suspect = false;
  CrashKernel suspect;  // most likely at fault
  bool has_running = false;
  CrashKernel running;                // still running when the error came back
  int64_t step = -1;                  // the step on that rank, -1 none
  std::vector<std::string> requests;  // in flight in that step
};

CrashReport FindCrash(const model::Trace& trace);

// The crash scan in parts (fleet/analysis_parts.h): FindCrash on each reconstructed part
// (some of a run's processes) reads only the faulting process's calls, kernels, steps and
// requests, so the run's crash is the earliest of the parts' (the first part's on a tie,
// as the joined trace holds the parts' events part after part); none found: not found.
CrashReport MergeCrashReports(const std::vector<CrashReport>& parts);

// Where two crash reports differ ("" when they are the same): the first field that does.
std::string CrashDifference(const CrashReport& a, const CrashReport& b);

// The ids of the requests a step served (the crash's and the OOM's requests in flight).
std::vector<std::string> StepRequestIds(const model::Trace& trace, model::StepIndex step);


}  // namespace teller::cause
