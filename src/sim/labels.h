// LabelBuilder: the ground truth of a synthetic run (labels.json, written by
// wire/labels_file; schema in docs/format.md), measured against the run's twin (the
// same steps without the faults, twin_diff.h): faults with mechanism, parameters, the
// effect they had and reference explanations; per request is_fault / fault_type and its
// latency change; per step and rank whether a fault changed it and by how much; the
// changed operator instances (step, rank, layer, name, ordinal) as culprits or victims.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "sim/fault_spec.h"
#include "sim/scheduler.h"
#include "sim/sim_config.h"
#include "sim/step_emitter.h"
#include "sim/twin_diff.h"
#include "wire/labels_file.h"

namespace teller::sim {

// A fault after the simulator filled in its defaults and targets.
struct ResolvedFault {
  FaultSpec spec;  // every field set
  int32_t crash_layer = -1;
  int32_t starved_request = -1;
  // Filled while running.
  std::set<int32_t> anomalous_steps;
  std::set<int32_t> faulty_requests;
  std::set<std::string> families;
  int64_t first_effect_ns = -1;  // true time
  int64_t last_effect_ns = -1;
  std::string evidence;   // a sentence of what the trace shows
  int32_t log_lines = 0;  // log lines the fault produced
  // Set when the fault crashed the run: the call that returned the illegal-access error,
  // whether the faulting kernel was a node of a CUDA-graph replay, and where the failed
  // allocation of an out-of-memory fault was made.
  std::string crash_call;
  bool crash_in_graph = false;
  AllocationSite oom_site = AllocationSite::kNone;
};

// One step as the labels see it: whether a fault changed it, and how long it took
// with the faults and in the twin.
struct StepOutcome {
  bool is_anomaly = false;
  int32_t fault = -1;  // the fault it is attributed to
  std::string_view benign;
  int64_t events = 0;
  int64_t duration_ns = 0;
  int64_t twin_ns = 0;  // the twin's (equal to duration_ns when the run has no faults)
  const StepChange* change = nullptr;
};

// A request's latency and time to first token, minus the run's without faults.
struct RequestDelta {
  std::optional<int64_t> latency_ns;
  std::optional<int64_t> first_token_ns;
};

// A step's ground truth beside what an oracle could see of it without the twin (the
// ceiling of any detector; twin_diff.h says what is visible).
struct StepTruth {
  bool abnormal = false;
  bool visible = false;         // a changed cell beyond its noise, or the duration moved
  bool duration_moved = false;  // what a detector of step durations alone could see
  int32_t scored = 0;           // scored instances (wire::IsScoredInstance)
  int32_t scored_visible = 0;   // of which in visible cells
  int32_t culprits = 0;         // changed instances the fault acted on
  int32_t victims = 0;          // changed instances that changed because of them
  double relative_delta = 0;    // step duration over the twin's, minus 1
};

class LabelBuilder {
 public:
  explicit LabelBuilder(const SimConfig& config) : config_(config) {}

  void SetFaults(std::vector<ResolvedFault>* faults) { faults_ = faults; }
  void AddStep(const StepPlan& plan, const std::vector<Request>& requests,
               const StepOutcome& outcome);
  void SetRequestDeltas(std::vector<RequestDelta> deltas) { request_deltas_ = std::move(deltas); }
  // Per step, in order; after the last AddStep.
  std::vector<StepTruth> StepTruths() const;
  // labels.json text.
  std::string Finalize(const std::vector<Request>& requests, int64_t start_realtime_ns) const;

  const std::vector<wire::LabelsOperator>& affected() const { return affected_; }

 private:
  struct StepLabel {
    int32_t step = 0;
    std::string phase;
    bool is_anomaly = false;
    int32_t fault = -1;
    std::string benign;
    std::vector<std::string> requests;
    int64_t events = 0;
    int64_t duration_ns = 0;
    int64_t twin_ns = 0;
    int32_t requests_count = 0;
    bool warmup = false;
    std::vector<wire::LabelsRankStep> ranks;
    std::vector<int64_t> rank_twin_ns;
    bool visible = false;
    int32_t scored = 0;
    int32_t scored_visible = 0;
    int32_t culprits = 0;
    int32_t victims = 0;
  };
  double StepNoise() const;
  void AddChanges(int32_t step, const StepChange& change);
  std::vector<wire::LabelsStep> StepLabels(wire::LabelsTwin* twin) const;
  wire::LabelsEffect EffectOf(int32_t index, const wire::Labels& labels) const;

  SimConfig config_;
  std::vector<ResolvedFault>* faults_ = nullptr;
  std::vector<StepLabel> steps_;
  std::vector<wire::LabelsOperator> affected_;
  std::vector<RequestDelta> request_deltas_;

  std::vector<wire::LabelsRequest> RequestLabels(const std::vector<Request>& requests,
                                                 int64_t start_realtime_ns) const;
};

// Several phrasings of what failed, where, when, with what evidence, what to do, each
// ending with what the run's fault-free twin measured it cost (`effect`).
std::vector<std::string> ExplainFault(const SimConfig& config, const ResolvedFault& fault,
                                      const std::vector<Request>& requests,
                                      const wire::LabelsEffect& effect);
// The phrasings without the measured cost.
std::vector<std::string> PhraseFault(const SimConfig& config, const ResolvedFault& fault,
                                     const std::vector<Request>& requests);

}  // namespace teller::sim
