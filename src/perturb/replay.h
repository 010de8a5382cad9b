// Replays one step template with jitter and, optionally, a fault, on one rank or on
// several. The timing model: each host thread's timeline is mapped interval by interval
// (the innermost open event scales its own time by its jitter and the fault's factor,
// so annotations stretch to cover their children), a call that waits for the device
// ends no earlier than the device work it waited for, and device work starts at max(its
// launch, the end of the previous work on its stream) plus the idle gap it had in the
// source: kernels keep their stream order, never overlap on a stream and never start
// before their launch. On several ranks each collective kernel ends on every rank when
// the last rank's instance has started plus that one's duration.
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
  int32_t rank = -1;                             // the rank it acts on; -1: every rank
};

// Where a replayed step goes: its draws (seed and step), its start, and the offset of its
// correlation ids (so that they stay unique per step).
struct ReplayAt {
  uint64_t seed = 1;
  int32_t step = 0;
  int64_t start_ns = 0;
  uint64_t correlation_base = 0;
};

struct ReplayedStep {
  sim::RankBuffer buffer;  // rank 0: the STEP range first, then the template's events
  std::vector<wire::MemsetRecord> memsets;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t events = 0;
};

// Mechanisms perturb injects into a real trace's replay.
bool PerturbSupports(sim::Mechanism mechanism);
// Those among them that act between ranks (straggler_rank, link_degradation).
bool NeedsSeveralRanks(sim::Mechanism mechanism);

// Replays t from start_ns as step `step` (which picks its random draws from seed).
// fault: nullptr replays the step without a fault (the twin), with the same draws.
// Correlation ids are offset by correlation_base so that they stay unique per step.
void ReplayStep(const TraceTemplates& templates, const StepTemplate& t, uint64_t seed, int32_t step,
                int64_t start_ns, uint64_t correlation_base, const StepFault* fault,
                ReplayedStep* out);

// Replays t on `ranks` ranks (out[r] is rank r, whose draws come from its own streams;
// rank 0 draws what ReplayStep draws, and one rank replays exactly as ReplayStep). Every
// collective kernel (layer COMM) is synchronised across ranks: each rank's instance ends
// when the last rank's instance has started plus that one's own duration, so a rank that
// arrives early waits inside the kernel. fault: nullptr for the twin.
void ReplayRanks(const TraceTemplates& templates, const StepTemplate& t, const ReplayAt& at,
                 int32_t ranks, const StepFault* fault, std::vector<ReplayedStep>* out);

}  // namespace teller::perturb
