// `teller synth perturb`: a real trace's steps replayed N times with measured jitter,
// on one rank or on several (the same templates on every rank, collectives synchronised
// across them), one fault injected as in the simulator, and the run's twin (the same
// steps and draws without the fault) compared step by step with sim::DiffStep into
// teller-labels/2 labels. The output is a raw bundle (wire::BundleWriter), read by every
// verb.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "perturb/step_templates.h"
#include "sim/fault_spec.h"
#include "sim/labels.h"
#include "wire/labels_file.h"

namespace teller::perturb {

struct PerturbOptions {
  std::optional<sim::FaultSpec> fault;  // none: a fault-free replay
  int32_t steps = 32;
  // Ranks replayed, one process each (1: the trace's own rank alone, as before ranks
  // existed; more: every collective kernel synchronised across them).
  int32_t ranks = 1;
  uint64_t seed = 1;
  std::string run_id = "perturb";
  int64_t start_realtime_ns = 1767225600000000000;  // 2026-01-01T00:00:00Z
};

struct PerturbSummary {
  std::string directory;
  int32_t steps = 0;
  int32_t templates = 0;
  int64_t events = 0;
  std::vector<int32_t> abnormal_steps;
  int64_t labelled_instances = 0;       // ordinals over the affected operators
  std::optional<sim::FaultSpec> fault;  // as resolved (every field set)
  wire::LabelsEffect effect;            // the fault's, from labels.json
  bool manifested = false;
  std::string engine;
  double device_sigma = 0;
  std::string sigma_method;
  std::vector<sim::StepTruth> step_truth;  // labels beside what an oracle sees (ceiling)
};

// The fault with its defaults and targets filled in for these templates replayed on
// `ranks` ranks (a per-rank mechanism without a rank gets one picked from the seed), or
// an error naming what the replay cannot carry (straggler_rank and link_degradation need
// two ranks or more and a collective kernel).
base::StatusOr<sim::FaultSpec> ResolveFault(const sim::FaultSpec& spec,
                                            const TraceTemplates& templates, int32_t steps,
                                            uint64_t seed, int32_t ranks = 1);

// Replays the templates into a raw bundle at `directory` (created; must not hold a
// bundle) with labels.json.
base::StatusOr<PerturbSummary> RunPerturb(const TraceTemplates& templates,
                                          const PerturbOptions& options,
                                          const std::string& directory);

// The engine a trace came from, from its names: vllm, sglang, else pytorch.
std::string EngineOfTemplates(const TraceTemplates& templates);

}  // namespace teller::perturb
