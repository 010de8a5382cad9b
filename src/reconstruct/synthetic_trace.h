// Synthetic traces for reconstruction tests and the timing harness: engine steps
// (STEP ranges with request ids) over FE modules, BE ops, runtime launches and
// kernels, CUDA-graph launches, a background thread, device-side annotations,
// one collective per step and log lines. All ranks share one clock.
#pragma once

#include <cstdint>

#include "model/trace.h"

namespace teller::reconstruct {

struct SyntheticOptions {
  int processes = 2;  // one rank each
  int hosts = 1;      // process p runs on host p % hosts
  int steps_per_process = 8;
  int requests_per_step = 3;   // each request lives for 4 consecutive steps
  int modules_per_step = 4;    // FE ranges
  int ops_per_module = 3;      // BE ops, each one runtime launch + one kernel
  int graph_every = 3;         // every n-th module ends in a graph launch (0: never)
  int graph_kernels = 20;      // kernels per graph launch
  int log_lines_per_step = 2;  // one with a request id, one without
  bool shuffle_rows = false;   // append events in random order
  uint64_t seed = 1;
};

model::Trace MakeSyntheticTrace(const SyntheticOptions& options);

}  // namespace teller::reconstruct
