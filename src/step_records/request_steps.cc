#include "step_records/request_steps.h"

#include <algorithm>
#include <map>

#include "reconstruct/request_projection.h"

namespace teller::step_records {

namespace {

std::vector<RequestStep> Group(const model::Trace& trace,
                               std::map<int64_t, std::vector<model::StepIndex>> by_step,
                               bool vertical) {
  std::vector<RequestStep> groups;
  for (auto& [number, steps] : by_step) {
    std::stable_sort(steps.begin(), steps.end(), [&](model::StepIndex a, model::StepIndex b) {
      return trace.steps.rank[a.value()] < trace.steps.rank[b.value()];
    });
    if (!vertical) {
      groups.push_back({number, steps});
      continue;
    }
    for (model::StepIndex step : steps) groups.push_back({number, {step}});
  }
  return groups;
}

}  // namespace

std::vector<RequestStep> GroupRequestSteps(const model::Trace& trace, model::RequestIndex request,
                                           bool vertical) {
  std::map<int64_t, std::vector<model::StepIndex>> by_step;
  for (model::StepIndex step : reconstruct::StepsOfRequest(trace, request)) {
    by_step[trace.steps.global_step[step.value()]].push_back(step);
  }
  return Group(trace, std::move(by_step), vertical);
}

std::vector<RequestStep> GroupEngineSteps(const model::Trace& trace, bool vertical) {
  std::map<int64_t, std::vector<model::StepIndex>> by_step;
  for (size_t s = 0; s < trace.steps.size(); ++s) {
    by_step[trace.steps.global_step[s]].push_back(model::StepIndex(static_cast<uint32_t>(s)));
  }
  return Group(trace, std::move(by_step), vertical);
}

}  // namespace teller::step_records
