// `teller synth dataset --preset real`: perturbed replays of every usable real trace
// of a folder (Kineto JSON, nsys SQLite), some fault-free and the rest one mechanism
// each, with the simulator's dataset files (manifest.json, splits.json, stats.md).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "sim/ceiling.h"

namespace teller::perturb {

struct RealDatasetOptions {
  std::string traces;  // folder of real traces
  std::string output;  // dataset folder; created
  uint64_t seed = 20260301;
  int32_t fault_free_runs = 2;       // per trace
  int32_t faulty_runs = 4;           // per trace, one mechanism each
  int32_t max_steps = 24;            // per run
  int64_t max_run_events = 120'000;  // fewer steps for traces with big steps
  std::function<void(const std::string& bundle, int done)> on_bundle;
};

struct RealTraceStats {
  std::string file;
  std::string engine;
  int32_t templates = 0;
  int64_t template_events = 0;  // events of one template, mean
  std::string step_source;
  double device_sigma = 0;
  std::string sigma_method;
  int32_t bundles = 0;
  int32_t steps_per_run = 0;
  int64_t events = 0;
};

struct RealDatasetSummary {
  std::vector<RealTraceStats> traces;
  std::map<std::string, std::string> skipped;           // file -> why
  sim::CeilingResult ceiling;                           // sim/ceiling.h
  std::map<std::string, sim::MechanismEffect> effects;  // by mechanism, "none" included
  int32_t bundles = 0;
  double seconds = 0;
};

base::StatusOr<RealDatasetSummary> BuildRealDataset(const RealDatasetOptions& options);

// stats.md of the dataset.
std::string FormatRealDatasetSummary(const RealDatasetOptions& options,
                                     const RealDatasetSummary& summary);

}  // namespace teller::perturb
