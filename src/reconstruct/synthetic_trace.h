// Synthetic traces for reconstruction tests and the timing harness: engine steps
// (STEP ranges with request ids) over FE modules, BE ops, runtime launches and
// kernels, CUDA-graph launches, a background thread, device-side annotations,
// collectives at the end of each step (with or without collective rows) and log lines.
// All ranks share one clock unless host_clock_skew_ns is set.
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
  // The last ops of each step's last module launch collectives ("ncclKernel"), at most
  // ops_per_module of them; collective_rows: whether they carry communicator/sequence rows
  // (false: like vLLM's custom all-reduce, matched by their order in the step).
  int comm_kernels_per_step = 1;
  bool collective_rows = true;
  // Whether the collective rows carry sequence numbers (false: -1, matched by their order).
  bool collective_sequence = true;
  // Collective k of a step runs on communicator k % communicators; the names count down
  // ("pg{n-1}" first), so that the string pool's order is not the names' order.
  int communicators = 1;
  // Step whose first collective has another name ("ncclKernel_other") on the last process
  // (-1: none): the ranks' sequences of collective names differ there.
  int odd_comm_step = -1;
  // Compute kernels of a module cycle through this many names of other families
  // ("gemm_kernel", "rms_norm_kernel", "flash_attn_kernel", "silu_kernel"; at most 4).
  int kernel_names = 1;
  // Step s of process p runs each module's compute kernels in reversed name order when
  // (s + p) % reorder_every == 0 (0: never): the same kernels in another order.
  int reorder_every = 0;
  // Step s of process p launches one more kernel in its first op when
  // (s + 2p + 1) % extra_kernel_every == 0 (0: never): a step of another composition.
  int extra_kernel_every = 0;
  // Clock of host h runs h * host_clock_skew_ns ahead of host 0 (events and log lines).
  int64_t host_clock_skew_ns = 0;
  uint64_t seed = 1;
};

model::Trace MakeSyntheticTrace(const SyntheticOptions& options);

}  // namespace teller::reconstruct
