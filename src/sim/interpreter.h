// The interpreter: runs the op list of one pipeline stage over the ranks of its group in
// lock step, so that collectives see every member's arrival. It appends each rank's events
// (ranges, API calls, kernels, copies, syncs, collectives) to the rank's buffer, with the
// duration model, noise and the timing faults of the rank's RankState.
#pragma once

#include <vector>

#include "sim/rng.h"
#include "sim/step_emitter.h"
#include "sim/step_ops.h"

namespace teller::sim {

// A pipeline send waiting for its receive on the next stage.
struct PendingSend {
  RankState* r = nullptr;
  size_t kernel = 0;
  size_t coll = 0;
  int64_t ready = -1;
  int64_t sequence = 0;
};

// One stage's run: its op list, ranks and the step's link conditions.
struct StageRun {
  const std::vector<Op>* ops = nullptr;
  std::vector<RankState*> group;
  std::vector<const StepContext*> ctx;  // parallel to group
  ForwardMode mode = ForwardMode::kEager;
  double link_factor = 1.0;
  double link_loss_p = 0.0;
  std::vector<PendingSend>* pp_in = nullptr;   // by tp rank: the previous stage's sends
  std::vector<PendingSend>* pp_out = nullptr;  // by tp rank: this stage's sends
  int32_t communicator = 0;  // index of the group's communicator (the stage's TP group)
};

// Runs one stage; crashes and retries land in result. rng: the step's draws;
// fault_rng: the draws only faults make (a run without them draws the same from rng).
void InterpretStage(const SimConfig& config, Rng* rng, Rng* fault_rng, EmitterState* state,
                    const StageRun& run, StepResult* result);

}  // namespace teller::sim
