// The deviation map: per scored engine step of a rank, what each channel (a compute
// family, the collectives, the host's launches, copies, syncs, allocations, ranges,
// the idle gap before the step) measured against what the run's comparable steps
// say it should be. Causes (hypotheses.h) are fitted to it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/tuning.h"
#include "localize/operator_family.h"
#include "localize/step_features.h"
#include "model/trace.h"

namespace teller::cause {

enum class Channel : uint8_t {
  kCompute,           // one compute family's kernels (Cell::family)
  kDeviceCopy,        // device memcpy and memset
  kCollective,        // one collective family's kernels (their time includes waiting for peers)
  kLaunch,            // launch calls of everything but collectives
  kCollectiveLaunch,  // launch calls of collective kernels (a late rank's delay)
  kHostCopy,          // host memcpy/memset calls
  kSync,              // stream/event/device synchronization calls
  kAlloc,             // cudaMalloc/cudaFree and host allocations
  kRuntimeOther,      // other runtime and driver calls
  kFrontend,          // framework and engine ranges: their own time, without the calls in them
  kBackend,           // backend ops (aten, library calls): their own time
  kStepGap,           // idle time on the rank before the step began
  kStepTime,          // the step's duration (not fitted: the cost)
  kOrderBreaks,       // compute kernels out of their usual order
  kFailedCalls,       // runtime and driver calls that returned an error (retried launches)
  // One collective family's time after its last member arrived (collectives matched
  // across ranks): the transfer, without the wait for late peers.
  kCollectiveTransfer,
  // The step's longest stretch with no work recorded: no kernel, copy or collective on
  // the device, no backend op or runtime call on the host (a GC pause, a stalled loop).
  kStall,
};
inline constexpr int kChannelCount = static_cast<int>(Channel::kStall) + 1;
std::string_view ChannelName(Channel channel);
bool IsCountChannel(Channel channel);

// One (step, channel) cell. z = (value - expected) / sigma.
struct Cell {
  uint32_t step_row = 0;  // into DeviationMap::steps
  Channel channel = Channel::kCompute;
  // Compute and collective cells: their family; kUnnamed otherwise.
  localize::OperatorFamily family = localize::OperatorFamily::kUnnamed;
  double value = 0.0;     // ns, or a count
  double expected = 0.0;  // robust baseline median of comparable steps
  double sigma = 1.0;     // robust spread, floored at the channel's resolution
  int64_t count = 0;      // instances
  double z() const { return (value - expected) / sigma; }
};

// A scored step: one rank's engine step with a baseline.
struct MapStep {
  model::StepIndex step;
  int32_t rank = -1;
  int32_t node = -1;    // the host the rank runs on, -1 unknown
  int64_t number = -1;  // the rank's step number
  int64_t group = -1;   // the global step when ranks share one, else number
  model::StepPhase phase = model::StepPhase::kUnknown;  // its baseline context's
  model::TimeNs start_ns = 0;
  uint32_t cells_begin = 0;  // [cells_begin, cells_end) of DeviationMap::cells
  uint32_t cells_end = 0;
};

struct DeviationOptions {
  // Baseline sizes and resolution floors (base/tuning_list.h, docs/tuning.md).
  TELLER_TUNED_DEVIATION(TELLER_TUNED_FIELD)
  bool operator==(const DeviationOptions&) const = default;
};

struct DeviationMap {
  std::vector<MapStep> steps;  // by rank, then step number
  std::vector<Cell> cells;
  std::vector<int32_t> ranks;  // distinct, ascending
  // Host name of each node index (MapStep::node), "" where the trace names none.
  std::vector<std::string> node_names;
  // Steps of the trace that served before the first scored one (warm-up) or have no
  // baseline: not scored.
  int64_t skipped_steps = 0;
  // Whether any scored step ran device work (kernels, copies, collectives on a GPU). A job
  // without (a CPU job: gloo, host ops) has its host ranges as its compute.
  bool device_work = false;
};

// The cell each node of a trace counts in: its channel and, for compute and collective
// kernels, its family. Host ranges count their own time (kFrontend, kBackend); nodes no
// cell counts (step ranges) have kStepTime.
struct NodeCell {
  Channel channel = Channel::kStepTime;
  localize::OperatorFamily family = localize::OperatorFamily::kUnnamed;
};
std::vector<NodeCell> NodeCells(const model::Trace& trace, const localize::StepFeatures& features);

// Per event of the trace, the collective match it stands for, else -1: a device event
// matched across ranks, or a host call of a match without device members (a CPU job's
// hooked all_reduce, which blocks until every rank has arrived). A host record beside its
// kernel (PyTorch's record_param_comms) only launches the collective: -1.
std::vector<int32_t> CollectiveMatchOfEvents(const model::Trace& trace);

// A step's longest stretch without work (Channel::kStall), [start, end) on the trace
// clock: no kernel, copy or collective on its rank's device, no backend op or runtime call
// on its host; start == end when the step has none.
std::pair<model::TimeNs, model::TimeNs> LongestStall(const model::Trace& trace, uint32_t step);

// Needs a reconstructed trace. The second form reads step features the caller already
// has (localize::ComputeStepFeatures of the same trace).
// A step's group: its global step when ranks share one, else its number on its rank (the
// step numbers causes and their windows are told in).
int64_t GroupOf(const model::Trace& trace, size_t s);

DeviationMap BuildDeviationMap(const model::Trace& trace, const DeviationOptions& options = {});
DeviationMap BuildDeviationMap(const model::Trace& trace, const localize::StepFeatures& features,
                               const DeviationOptions& options);

// The node of each process: as the trace says, else one per distinct host name
// (numbered in order of first appearance).
std::vector<int32_t> NodeOfProcesses(const model::Trace& trace);

}  // namespace teller::cause
