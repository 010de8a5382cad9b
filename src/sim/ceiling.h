// The ceiling of a dataset: what an oracle that knows where each fault's effects are
// could score without the twin (labels.h StepTruth says what it sees), and what a
// detector of step durations alone could; beside it, each mechanism's measured effect.
// Both dataset builders (sim/dataset.cc, perturb/real_dataset.cc) count through it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sim/labels.h"

namespace teller::sim {

struct CeilingResult {
  int64_t abnormal_steps = 0;
  int64_t visible_steps = 0;   // oracle: changed cells beyond their noise
  int64_t duration_steps = 0;  // abnormal steps whose duration moved
  int64_t duration_false = 0;  // normal steps whose duration moved (none expected)
  double oracle_step_f1 = 0;
  double duration_step_f1 = 0;
  double oracle_operator_f1 = 0;        // macro over abnormal steps with scored instances
  double oracle_category_accuracy = 0;  // over runs: a faulty one needs a visible effect
};

// A mechanism's measured effect over its runs (at the preset's magnitudes).
struct MechanismEffect {
  int32_t runs = 0;
  int64_t abnormal_steps = 0;
  int64_t visible_steps = 0;
  int64_t moved_steps = 0;
  std::vector<double> step_deltas;  // relative change of each abnormal step
  int64_t culprits = 0;
  int64_t victims = 0;
  int64_t faulty_requests = 0;
};

class CeilingCounter {
 public:
  // One run's steps; mechanism "none" for a fault-free run. A run whose fault changed
  // no step but made requests faulty (a starved request) counts as seen.
  void AddRun(const std::vector<StepTruth>& steps, const std::string& mechanism,
              int32_t faulty_requests);
  CeilingResult Result() const;
  const std::map<std::string, MechanismEffect>& effects() const { return effects_; }

 private:
  CeilingResult counts_;
  std::map<std::string, MechanismEffect> effects_;
  double operator_f1_sum_ = 0;
  int64_t operator_steps_ = 0;
  int32_t runs_ = 0;
  int32_t runs_seen_ = 0;
};

// The middle value (the upper one of an even count); 0 when empty.
double MedianOf(std::vector<double> values);

// The ceiling table and the per-mechanism effects table, as markdown.
std::string FormatCeiling(const CeilingResult& ceiling,
                          const std::map<std::string, MechanismEffect>& effects);

}  // namespace teller::sim
