// Every instance the labels name (teller-labels/2, kind != missing) is an event of the
// store: for every fault mechanism, a small simulated run is imported and reconstructed,
// and each labelled (step, rank, layer, name, ordinal) is looked up among the nodes of
// that rank's step, with the ordinal the step_records stage gives them.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <tuple>

#include "sim/fault_spec.h"
#include "sim/simulated_trace_testing.h"
#include "step_records/step_records.h"
#include "wire/labels_file.h"

namespace teller {
namespace {

using Instance = std::tuple<int32_t, int64_t, std::string, std::string, int32_t>;

// (rank, step, layer, name, ordinal) of every node of every step of the trace.
std::set<Instance> StoreInstances(const model::Trace& trace) {
  std::set<Instance> out;
  for (size_t s = 0; s < trace.steps.size(); ++s) {
    const model::StepIndex step(static_cast<uint32_t>(s));
    const std::vector<int32_t> ordinals = step_records::InstanceOrdinals(trace, step);
    const uint32_t begin = trace.steps.node_begin[s].value();
    for (uint32_t n = begin; n < trace.steps.node_end[s].value(); ++n) {
      const model::EventRow event = trace.nodes.event[n];
      out.emplace(trace.steps.rank[s], trace.steps.number[s],
                  std::string(model::LayerName(trace.events.layer[event.value()])),
                  std::string(trace.str(trace.events.name[event.value()])), ordinals[n - begin]);
    }
  }
  return out;
}

class LabelsResolveTest : public ::testing::TestWithParam<sim::MechanismInfo> {};

TEST_P(LabelsResolveTest, EveryLabelledInstanceIsAnEventOfTheStore) {
  const sim::Mechanism m = GetParam().mechanism;
  sim::SimConfig config = sim::SmallConfig(sim::EngineKind::kVllmV1Online, 4, 8, 21);
  if (m == sim::Mechanism::kKvCachePressure) config.engine = sim::EngineKind::kVllmV0;
  if (m == sim::Mechanism::kDecodeMisroute) {
    config = sim::SmallConfig(sim::EngineKind::kSglang, 8, 8, 21);
    config.model.mamba_period = 4;
  }
  const std::string name(GetParam().name);
  const model::Trace trace = sim::SimulatedTrace(config, name, "labels_resolve_" + name);
  auto labels = wire::ParseLabels(trace.meta.labels_json, name);
  ASSERT_TRUE(labels.ok()) << labels.status().ToString();
  const std::set<Instance> store = StoreInstances(trace);
  int64_t labelled = 0, missing_from_store = 0;
  std::string first_missing;
  for (const wire::LabelsOperator& op : labels->affected_operators) {
    if (op.kind == "missing") continue;
    for (int32_t ordinal : op.ordinals) {
      ++labelled;
      if (store.count({op.rank, op.step, op.layer, op.name, ordinal})) continue;
      if (missing_from_store++ == 0) {
        first_missing =
            fmt::format("step {} rank {} {} {} #{}", op.step, op.rank, op.layer, op.name, ordinal);
      }
    }
  }
  EXPECT_EQ(missing_from_store, 0) << "of " << labelled << "; first: " << first_missing;
  // Scheduling faults act on requests; every other mechanism names instances.
  if (m != sim::Mechanism::kKvCachePressure && m != sim::Mechanism::kStarvedRequest) {
    EXPECT_GT(labelled, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(AllMechanisms, LabelsResolveTest,
                         ::testing::ValuesIn(sim::AllMechanisms().begin(),
                                             sim::AllMechanisms().end()),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace teller
