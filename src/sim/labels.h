// LabelBuilder: the ground truth of a synthetic run (labels.json, written by
// wire/labels_file; schema in docs/format.md): faults with mechanism, parameters and reference
// explanations; per request is_fault / fault_type; per step is_anomaly and
// benign-anomaly kind; affected operator instances (step, rank, layer, name,
// ordinal) and families.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "sim/fault_spec.h"
#include "sim/scheduler.h"
#include "sim/sim_config.h"
#include "sim/step_emitter.h"
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
};

struct AffectedInstance {
  int32_t step = 0;
  int32_t rank = 0;
  std::string layer;  // STEP FE BE RT DRV K MEM COMM SYNC
  std::string name;
  std::string family;
  std::vector<int32_t> ordinals;
};

// Ordinals of the events flagged in buf: index among the same table and name on
// that rank in that step, in start-time order.
void CollectAffected(int32_t step, const RankBuffer& buf, std::vector<AffectedInstance>* out);

class LabelBuilder {
 public:
  explicit LabelBuilder(const SimConfig& config) : config_(config) {}

  void SetFaults(std::vector<ResolvedFault>* faults) { faults_ = faults; }
  void AddStep(const StepPlan& plan, const std::vector<Request>& requests, bool is_anomaly,
               int32_t fault_index, std::string_view benign, int64_t events);
  void AddAffected(std::vector<AffectedInstance> instances);
  // labels.json text.
  std::string Finalize(const std::vector<Request>& requests, int64_t start_realtime_ns) const;

  const std::vector<AffectedInstance>& affected() const { return affected_; }

 private:
  struct StepLabel {
    int32_t step;
    std::string phase;
    bool is_anomaly;
    int32_t fault;
    std::string benign;
    std::vector<std::string> requests;
    int64_t events;
  };
  SimConfig config_;
  std::vector<ResolvedFault>* faults_ = nullptr;
  std::vector<StepLabel> steps_;
  std::vector<AffectedInstance> affected_;

  std::vector<wire::LabelsRequest> RequestLabels(const std::vector<Request>& requests,
                                                 int64_t start_realtime_ns) const;
};

// Several phrasings of what failed, where, when, with what evidence, what to do.
std::vector<std::string> ExplainFault(const SimConfig& config, const ResolvedFault& fault,
                                      const std::vector<Request>& requests);

}  // namespace teller::sim
