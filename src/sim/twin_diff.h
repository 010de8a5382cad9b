// What a fault changed in one step: the faulty run's buffers against its twin's (the
// same step, the same plan and the same random draws, without the fault), event by
// event. Instances are named as the store names them (wire/store_names.h) and counted
// by ordinal among the events of that layer and name on that rank in that step.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/layer.h"
#include "sim/step_emitter.h"

namespace teller::sim {

// How an instance changed: its duration (timing), only its start within the step
// (moved), or it exists in one run only (new: the faulty run; missing: the twin).
enum class ChangeKind : uint8_t { kTiming, kMoved, kNew, kMissing };
std::string_view ChangeKindName(ChangeKind kind);

struct InstanceChange {
  int32_t rank = 0;
  model::Layer layer = model::Layer::kOther;
  std::string name;
  std::string family;
  int32_t ordinal = 0;   // in the faulty run (the twin's for missing instances)
  int64_t delta_ns = 0;  // duration minus the twin's
  double ratio = 0;      // duration over the twin's; 0 for new and missing
  ChangeKind kind = ChangeKind::kTiming;
  bool culprit = false;  // the fault acted on it (else a victim)
  bool visible = false;  // its cell (rank, layer, name) changed beyond the noise
};

struct RankStepChange {
  int32_t rank = 0;
  int64_t delta_ns = 0;  // the rank's step extent minus the twin's
  int64_t twin_ns = 0;
  bool changed = false;  // an instance of this rank changed
};

struct StepChange {
  std::vector<RankStepChange> ranks;
  std::vector<InstanceChange> instances;
  // What an oracle that knows where to look could see without the twin: a cell
  // (rank, layer, name) whose summed duration moved by more than max(5%, 3 sigma of
  // its noise over its n events), that gained or lost events, or whose order changed.
  bool visible = false;
  bool any() const { return !instances.empty(); }
};

// An instance changed when its duration or its start relative to the step moved by
// more than this fraction and kMinChangeNs.
inline constexpr double kChangeFraction = 0.10;
inline constexpr int64_t kMinChangeNs = 2000;

// Compares one step of both runs (both started at step_start_ns). faults: the faults
// active in the step, which decide who is a culprit besides the events' own flags.
StepChange DiffStep(const std::vector<RankBuffer>& faulty, const std::vector<RankBuffer>& twin,
                    int64_t step_start_ns, const std::vector<ActiveFault>& faults,
                    const ClusterSpec& cluster);

}  // namespace teller::sim
