#include "records/request_steps.h"

#include <algorithm>
#include <map>

#include "reconstruct/request_projection.h"

namespace teller::records {

std::vector<RequestStep> GroupRequestSteps(const model::Trace& trace, model::RequestIndex request,
                                           bool vertical) {
  std::map<int64_t, std::vector<model::StepIndex>> by_step;
  for (model::StepIndex step : reconstruct::StepsOfRequest(trace, request)) {
    by_step[trace.steps.global_step[step.value()]].push_back(step);
  }
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

}  // namespace teller::records
