// Replays one step template with jitter and, optionally, a fault. The timing model:
// each host thread's timeline is mapped interval by interval (the innermost open event
// scales its own time by its jitter and the fault's factor, so annotations stretch to
// cover their children), a call that waits for the device ends no earlier than the
// device work it waited for, and device work starts at max(its launch, the end of the
// previous work on its stream) plus the idle gap it had in the source: kernels keep
// their stream order, never overlap on a stream and never start before their launch.
#pragma once

#include <cstdint>
#include <vector>

#include "perturb/step_templates.h"
#include "sim/fault_spec.h"
#include "sim/step_emitter.h"
#include "wire/records.h"

namespace teller::perturb {

// A fault as it acts on one replayed step.
struct StepFault {
  sim::Mechanism mechanism = sim::Mechanism::kGpuThrottle;
  double magnitude = 0;
  sim::Family family = sim::Family::kAttention;  // kernel_slowdown
};

struct ReplayedStep {
  sim::RankBuffer buffer;  // rank 0: the STEP range first, then the template's events
  std::vector<wire::MemsetRecord> memsets;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t events = 0;
};

// Mechanisms perturb injects into a single-rank trace.
bool PerturbSupports(sim::Mechanism mechanism);

// Replays t from start_ns as step `step` (which picks its random draws from seed).
// fault: nullptr replays the step without a fault (the twin), with the same draws.
// Correlation ids are offset by correlation_base so that they stay unique per step.
void ReplayStep(const TraceTemplates& templates, const StepTemplate& t, uint64_t seed, int32_t step,
                int64_t start_ns, uint64_t correlation_base, const StepFault* fault,
                ReplayedStep* out);

}  // namespace teller::perturb
