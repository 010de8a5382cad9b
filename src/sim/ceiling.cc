#include "sim/ceiling.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/metrics.h"

namespace teller::sim {
namespace {}  // namespace

double MedianOf(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

void CeilingCounter::AddRun(const std::vector<StepTruth>& steps, const std::string& mechanism,
                            int32_t faulty_requests) {
  MechanismEffect& effect = effects_[mechanism];
  ++effect.runs;
  effect.faulty_requests += faulty_requests;
  bool seen = mechanism == "none";
  int64_t abnormal = 0;
  for (const StepTruth& t : steps) {
    counts_.duration_false += !t.abnormal && t.duration_moved;
    if (!t.abnormal) continue;
    ++abnormal;
    ++counts_.abnormal_steps;
    counts_.visible_steps += t.visible;
    counts_.duration_steps += t.duration_moved;
    seen |= t.visible;
    ++effect.abnormal_steps;
    effect.visible_steps += t.visible;
    effect.moved_steps += t.duration_moved;
    effect.step_deltas.push_back(t.relative_delta);
    effect.culprits += t.culprits;
    effect.victims += t.victims;
    if (t.scored > 0) {
      const double recall = static_cast<double>(t.scored_visible) / t.scored;
      operator_f1_sum_ += 2 * recall / (1 + recall);
      ++operator_steps_;
    }
  }
  seen |= faulty_requests > 0 && abnormal == 0;
  ++runs_;
  runs_seen_ += seen;
}

CeilingResult CeilingCounter::Result() const {
  CeilingResult c = counts_;
  c.oracle_step_f1 = base::F1FromCounts(c.visible_steps, 0, c.abnormal_steps - c.visible_steps);
  c.duration_step_f1 =
      base::F1FromCounts(c.duration_steps, c.duration_false, c.abnormal_steps - c.duration_steps);
  c.oracle_operator_f1 = operator_steps_ > 0 ? operator_f1_sum_ / operator_steps_ : 0;
  c.oracle_category_accuracy = runs_ > 0 ? static_cast<double>(runs_seen_) / runs_ : 0;
  return c;
}

std::string FormatCeiling(const CeilingResult& c,
                          const std::map<std::string, MechanismEffect>& effects) {
  std::string out = fmt::format(
      "\nCeiling ({} abnormal engine steps; labels by twin difference):\n\n"
      "| Detector | Step F1 | Operator-set macro F1 | Category accuracy (runs) |\n"
      "| --- | --- | --- | --- |\n"
      "| oracle (knows where to look; sees a cell beyond its noise) | {:.3f} | {:.3f} | {:.3f} "
      "|\n| step durations only (knows the twin's; moved > max(5%, 2 sigma)) | {:.3f} | - | - "
      "|\n",
      c.abnormal_steps, c.oracle_step_f1, c.oracle_operator_f1, c.oracle_category_accuracy,
      c.duration_step_f1);
  out +=
      "\n| Mechanism | Runs | Abnormal steps | Visible | Duration moved | Median step delta | "
      "Culprit instances | Victim instances | Faulty requests |\n| --- | --- | --- | --- | --- | "
      "--- | --- | --- | --- |\n";
  for (const auto& [m, e] : effects) {
    if (m == "none") continue;
    out += fmt::format("| {} | {} | {} | {} | {} | {:+.1f}% | {} | {} | {} |\n", m, e.runs,
                       e.abnormal_steps, e.visible_steps, e.moved_steps,
                       100 * MedianOf(e.step_deltas), e.culprits, e.victims, e.faulty_requests);
  }
  return out;
}

}  // namespace teller::sim
