// Tests only: a small simulated run (vLLM v1 online, 4 layers, 6 requests) with the
// given faults, written under a temp folder and opened reconstructed; the steps of a run
// that replay a CUDA graph.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/testing.h"
#include "sim/fault_spec.h"
#include "sim/sim_config.h"
#include "sim/simulator.h"
#include "store/open_trace.h"

namespace teller::sim {

// An engine's default configuration made small: layers, requests and seed as given.
inline SimConfig SmallConfig(EngineKind engine, int32_t layers, int32_t requests,
                             uint64_t seed = 7) {
  SimConfig config = DefaultConfig(engine);
  config.model.layers = layers;
  config.workload.num_requests = requests;
  config.seed = seed;
  return config;
}

// The same from a given configuration (engine, cluster, workload): faults and seed
// as given.
inline model::Trace SimulatedTrace(SimConfig config, const std::string& faults,
                                   const std::string& name) {
  auto parsed = ParseFaults(faults);
  EXPECT_TRUE(parsed.ok());
  config.faults = parsed.value();
  const std::string dir = base::TempDir(name) + "/run.teller";
  auto summary = RunSimulation(config, dir);
  EXPECT_TRUE(summary.ok()) << summary.status().message();
  auto trace = store::OpenTrace({dir}, {});
  EXPECT_TRUE(trace.ok()) << trace.status().message();
  return std::move(trace).value();
}

inline model::Trace SimulatedTrace(const std::string& faults, const std::string& name,
                                   uint64_t seed = 7) {
  return SimulatedTrace(SmallConfig(EngineKind::kVllmV1Online, 4, 6, seed), faults, name);
}

// The steps in which `rank` of the run without faults replayed a CUDA graph (warm-up left
// out): where a test places a fault that must fire inside a replay.
inline std::vector<int32_t> GraphReplaySteps(SimConfig config, int32_t rank) {
  config.faults.clear();
  std::vector<int32_t> steps;
  SimOptions options;
  options.dry_run = true;
  options.on_step = [&](const StepPlan& plan, const std::vector<RankBuffer>& buffers) {
    if (plan.warmup) return;
    for (const wire::ApiCallRecord& a : buffers[static_cast<size_t>(rank)].api_calls) {
      if (a.name == "cudaGraphLaunch") {
        steps.push_back(plan.step);
        return;
      }
    }
  };
  EXPECT_TRUE(RunSimulation(config, "", options).ok());
  return steps;
}

}  // namespace teller::sim
