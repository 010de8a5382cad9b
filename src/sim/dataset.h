// BuildDataset: many simulated runs (bundles) with Table-1 shape, balanced fault
// categories, a manifest, request-disjoint and injection-disjoint splits, the
// statistics table and the difficulty check. Streams bundle by bundle.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "sim/ceiling.h"
#include "sim/sim_config.h"

namespace teller::sim {

struct EnginePlan {
  EngineKind engine;
  int32_t requests = 0;       // labeled requests
  int32_t faulty_target = 0;  // faulty requests wanted
  int32_t requests_per_bundle = 10;
};

struct DatasetPreset {
  std::string name;
  std::vector<EnginePlan> engines;
  int32_t model_layers = 36;
  uint64_t seed = 20260101;
  // The modern preset: each bundle's cluster, model and engine budgets come from
  // ModernBundleConfig instead of the engine's defaults.
  bool modern = false;
  // The fleet preset: every bundle a fleet of this many H100s (FleetConfig), its fault
  // on a rank or node the simulator draws.
  int32_t fleet_ranks = 0;
};

// "small" (seconds, used by tests), "paper" (Table 1 shape), "modern" (H100/H200/B200
// nodes with NVLink/NVSwitch, TP 8 inside a node, data and expert parallelism across 2-8
// nodes, a dense FP8 model and an MoE model) or "fleet" (64 H100s a run, FleetConfig,
// the fault on any rank or node).
base::StatusOr<DatasetPreset> GetPreset(std::string_view name);

// A fleet of `ranks` H100s (a multiple of 8; `synth run --ranks`, the fleet preset):
// 8 GPUs a node, TP 8 inside each node and one data-parallel replica per node, `layers`
// decoder layers. A degraded link needs traffic between nodes: its run serves the MoE
// model with its experts over every GPU (all-to-all across nodes).
base::Status FleetConfig(int32_t ranks, int32_t layers, SimConfig* config);

// The index-th bundle of a modern dataset (counted over every engine): the MoE model
// (even index: on Hopper FP8 experts with expert parallelism over 2 nodes, on Blackwell
// MXFP4 experts, tensor-parallel in each of 2 or 4 node replicas) or the dense FP8 model
// (odd index: data parallelism over 2, 4 or 8 nodes), GPUs
// H100, H200, B200 in turn, `layers` decoder layers, and the engine's budgets scaled by
// the data-parallel replicas. Keeps the engine, its modes, a hybrid model's Mamba layers
// and the faults (starting starvation and misrouting early, while requests still queue; a
// link degradation gets the expert-parallel MoE layout, the one with traffic between nodes).
void ModernBundleConfig(int32_t index, int32_t layers, SimConfig* config);

// The fleet preset with runs of `ranks` ranks (a multiple of 8); its name becomes
// "fleet-<ranks>" but for the default 64. Other presets refuse it.
base::Status SizeFleetPreset(int32_t ranks, DatasetPreset* preset);

// `factor` times the runs of every engine, same shares of faulty requests and
// categories; the name becomes "<name>-x<factor>". The paper's 30 runs cover each
// fault mechanism once or twice, so a run-disjoint test part would hold mostly
// mechanisms that training never saw (docs/benchmark.md).
base::Status ScalePreset(int32_t factor, DatasetPreset* preset);

struct EngineStats {
  int32_t bundles = 0;
  int32_t requests = 0;
  int32_t faulty = 0;
  int64_t request_steps = 0;  // the dataset's step records (request x step)
  int64_t nodes = 0;          // projected nodes over those step records
  int64_t engine_steps = 0;
  int64_t events = 0;  // records on disk
};

struct DifficultyResult {
  double zscore_step_f1 = 0;
  double zscore_precision = 0;
  double zscore_recall = 0;
  double keyword_macro_f1 = 0;
  double keyword_accuracy = 0;
  int64_t steps = 0;
  int64_t requests = 0;
};

struct DatasetSummary {
  std::map<EngineKind, EngineStats> engines;
  std::map<std::string, int32_t> category_requests;  // faulty requests per category
  std::map<std::string, int32_t> mechanism_bundles;  // bundles per mechanism
  DifficultyResult difficulty;
  CeilingResult ceiling;
  std::map<std::string, MechanismEffect> effects;  // by mechanism (sim/ceiling.h)
  double seconds = 0;
};

struct DatasetOptions {
  std::string output;  // directory; created
  std::function<void(const std::string& bundle, int done, int total)> on_bundle;
};

base::StatusOr<DatasetSummary> BuildDataset(const DatasetPreset& preset,
                                            const DatasetOptions& options);

// Markdown tables: Table-1 statistics, categories, difficulty check.
std::string FormatDatasetSummary(const DatasetPreset& preset, const DatasetSummary& summary);

}  // namespace teller::sim
