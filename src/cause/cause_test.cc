#include <gtest/gtest.h>

#include <string>

#include "base/testing.h"
#include "cause/baseline_fit.h"
#include "cause/deviation_map.h"
#include "cause/hypotheses.h"
#include "sim/fault_spec.h"
#include "sim/simulator.h"
#include "store/open_trace.h"

namespace teller::cause {
namespace {

struct Run {
  DeviationMap map;
  CauseAnalysis analysis;
};

Run Simulate(const std::string& fault, uint64_t seed) {
  sim::SimConfig config = sim::DefaultConfig(sim::EngineKind::kVllmV1Online);
  config.model.layers = 4;
  config.workload.num_requests = 12;
  config.seed = seed;
  if (!fault.empty()) {
    auto faults = sim::ParseFaults(fault);
    EXPECT_TRUE(faults.ok()) << faults.status().message();
    config.faults = faults.value();
  }
  const std::string dir = base::TempDir("cause_sim") + "/run.teller";
  auto summary = sim::RunSimulation(config, dir);
  EXPECT_TRUE(summary.ok()) << summary.status().message();
  auto opened = store::OpenTrace({dir}, {});
  EXPECT_TRUE(opened.ok()) << opened.status().message();
  Run run;
  run.map = BuildDeviationMap(*opened);
  run.analysis = AnalyzeCauses(run.map);
  return run;
}

void Print(const std::string& fault, const Run& run) {
  std::printf("== %s: ranks %zu steps %zu degraded %d\n", fault.c_str(), run.map.ranks.size(),
              run.map.steps.size(), run.analysis.degraded);
  for (size_t i = 0; i < run.analysis.ranked.size() && i < 4; ++i) {
    const Hypothesis& h = run.analysis.ranked[i];
    std::printf("  %zu %s score %.1f explained %.2f : %s\n", i, CauseLocation(h).c_str(), h.score,
                h.explained, CauseSentence(h).c_str());
  }
}

TEST(CauseProbe, Print) {
  for (const char* fault : {"", "gpu_throttle:rank=1", "kernel_slowdown", "straggler_rank:rank=1",
                            "engine_pause", "launch_latency:rank=0", "host_memory_pressure",
                            "allocator_slow_path", "sync_latency", "memcpy_latency",
                            "link_degradation", "operator_reorder"}) {
    Print(fault, Simulate(fault, 7));
  }
}

}  // namespace
}  // namespace teller::cause
namespace teller::cause {
TEST(CauseProbe, Gaps) {
  sim::SimConfig config = sim::DefaultConfig(sim::EngineKind::kVllmV1Online);
  config.model.layers = 4;
  config.workload.num_requests = 12;
  config.seed = 7;
  std::string dir;
  if (getenv("BUNDLE")) {
    dir = getenv("BUNDLE");
  } else {
    config.faults = sim::ParseFaults(getenv("FAULT")).value();
    dir = base::TempDir("cause_sim") + "/run.teller";
    ASSERT_TRUE(sim::RunSimulation(config, dir).ok());
  }
  auto t = store::OpenTrace({dir}, {});
  DeviationMap map = BuildDeviationMap(*t);
  const std::vector<StepShape> shapes = StepShapes(*t);
  std::printf("map steps %zu cells %zu skipped %ld trace steps %zu\n", map.steps.size(), map.cells.size(), (long)map.skipped_steps, t->steps.size());
  for (const MapStep& s : map.steps) {
    if (s.rank != 0) continue;
    std::printf("ctx %.0f size %.0f step %ld rank %d reqs %u", shapes[s.step.value()].context, shapes[s.step.value()].size, (long)s.number, s.rank, t->steps.requests_count[s.step.value()]);
    for (uint32_t c = s.cells_begin; c < s.cells_end; ++c) {
      const Cell& cell = map.cells[c];
      if (cell.channel == Channel::kCompute && cell.family == localize::OperatorFamily::kAttention)
        std::printf("  %s %.0f/%.0f/%.0f", std::string(ChannelName(cell.channel)).c_str(), cell.value, cell.expected, cell.sigma);
    }
    std::printf("\n");
  }
}
}
