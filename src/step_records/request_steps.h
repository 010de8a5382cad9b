// The paper's step records C_q(s) as step lists: request q's engine steps grouped by
// global step, the ranks in order. The one grouping behind both readers of step
// records: AddTraceRecords (step_records.h, the model's records with labels and logs)
// and LoadCorpora (corpus.h, the serializations `teller tpe` trains on).
#pragma once

#include <cstdint>
#include <vector>

#include "model/trace.h"

namespace teller::step_records {

struct RequestStep {
  int64_t global_step = -1;
  std::vector<model::StepIndex> steps;  // one per rank serving the request, by rank
};

// Request q's step records in global step order: one per global step over every rank
// (horizontal), or one per (global step, rank) (vertical).
std::vector<RequestStep> GroupRequestSteps(const model::Trace& trace, model::RequestIndex request,
                                           bool vertical);

// The same over every step of the trace (plain captures, whose steps serve no known
// request): one group per global step over its ranks, or per (global step, rank).
std::vector<RequestStep> GroupEngineSteps(const model::Trace& trace, bool vertical);

}  // namespace teller::step_records
