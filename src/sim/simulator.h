// RunSimulation: one simulated run of an engine on a cluster, written as a raw
// bundle (wire::BundleWriter) with labels.json. Deterministic from config.seed:
// the same config gives byte-identical files. Streams step by step: memory does
// not grow with the number of steps except for the labels.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "sim/labels.h"
#include "sim/log_emitter.h"
#include "sim/scheduler.h"
#include "sim/sim_config.h"
#include "sim/step_emitter.h"

namespace teller::sim {

struct RequestSummary {
  std::string id;
  bool is_fault = false;
  std::string fault_type;  // category name or ""
  int32_t steps = 0;       // steps the request took part in
  int64_t nodes = 0;       // events of those steps on the ranks that served it
  int64_t arrival_ns = 0;  // true time
  int64_t first_token_ns = -1;
  int64_t finish_ns = -1;
};

struct RunSummary {
  std::string directory;
  EngineKind engine = EngineKind::kVllmV1Online;
  int32_t steps = 0;   // engine steps, warm-up included
  int64_t events = 0;  // records written, all ranks
  int64_t log_lines = 0;
  bool crashed = false;
  std::vector<RequestSummary> requests;
  std::vector<ResolvedFault> faults;
  std::vector<int64_t> step_events;  // events per step, all ranks
  std::vector<int64_t> step_ns;      // duration of each step
  std::vector<uint8_t> step_anomaly;
  std::vector<uint8_t> step_benign;   // a benign anomaly (cold start, GC, capture, ...)
  std::vector<StepTruth> step_truth;  // labels beside what an oracle could see
  std::vector<SimLogLine> logs;       // only with SimOptions::keep_logs
};

struct SimOptions {
  // Called after each step with the buffers (true times, before clock conversion).
  std::function<void(const StepPlan&, const std::vector<RankBuffer>&)> on_step;
  // Write nothing to disk (dry runs and speed tests).
  bool dry_run = false;
  // Keep the log lines in RunSummary::logs (for the difficulty check).
  bool keep_logs = false;
};

// Fills the unset parts of the faults (magnitude, onset, duration, targets)
// from the seed; onset is picked inside the run's expected step range.
std::vector<ResolvedFault> ResolveFaults(const SimConfig& config);
// The same, with the run without faults already at hand.
std::vector<ResolvedFault> ResolveFaults(const SimConfig& config, const RunSummary& clean);

base::StatusOr<RunSummary> RunSimulation(const SimConfig& config, const std::string& directory,
                                         const SimOptions& options = {});

}  // namespace teller::sim
