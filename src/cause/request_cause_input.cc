#include "cause/request_cause_input.h"

#include <string>
#include <unordered_map>

#include "cause/log_numbers.h"

namespace teller::cause {
namespace {

// The log lines that name a request or count an engine's queue; a request id no step
// serves becomes a request of its own after the scheduled ones.
void AddLogLines(const model::LogTable& logs, const base::StringPool& strings,
                 RequestCauseInput* in) {
  std::unordered_map<std::string_view, uint32_t> index_of;
  index_of.reserve(in->id.size());
  for (uint32_t q = 0; q < in->id.size(); ++q) index_of.emplace(in->id[q], q);
  for (size_t i = 0; i < logs.size(); ++i) {
    uint32_t request = RequestCauseInput::kNoRequest;
    if (logs.request[i] != base::StringPool::kEmpty) {
      const std::string_view id = strings.Get(logs.request[i]);
      const auto [it, fresh] = index_of.try_emplace(id, static_cast<uint32_t>(in->id.size()));
      if (fresh) in->id.push_back(id);
      request = it->second;
    }
    const std::string_view text = strings.Get(logs.text[i]);
    const bool counts_queue = NumberAfter(text, "#queue-req: ") >= 0;
    if (request == RequestCauseInput::kNoRequest && !counts_queue) continue;
    in->line_ts_ns.push_back(logs.ts_ns[i]);
    in->line_rank.push_back(logs.rank[i]);
    in->line_request.push_back(request);
    in->line_step.push_back(logs.step[i]);
    in->line_text.push_back(counts_queue ? text : std::string_view());
  }
}

}  // namespace

RequestCauseInput RequestCauseInputOfTrace(const model::Trace& trace) {
  RequestCauseInput in;
  const model::StepTable& steps = trace.steps;
  in.rank = steps.rank;
  in.phase = steps.phase;
  in.start_ns = steps.start_ns;
  in.end_ns = steps.end_ns;
  in.group.reserve(steps.size());
  in.requests_begin.reserve(steps.size() + 1);
  in.requests_begin.push_back(0);
  for (size_t s = 0; s < steps.size(); ++s) {
    in.group.push_back(steps.global_step[s] >= 0 ? steps.global_step[s] : steps.number[s]);
    for (uint32_t i = 0; i < steps.requests_count[s]; ++i) {
      in.step_requests.push_back(trace.step_requests[steps.requests_begin[s] + i].value());
    }
    in.requests_begin.push_back(static_cast<uint32_t>(in.step_requests.size()));
  }
  for (size_t q = 0; q < trace.requests.size(); ++q)
    in.id.push_back(trace.str(trace.requests.id[q]));
  in.first_ns = trace.requests.first_ns;
  AddLogLines(trace.logs, trace.strings, &in);
  return in;
}

base::StatusOr<RequestCauseInput> RequestCauseInputOfRows(const reconstruct::RequestRows& requests,
                                                          const localize::FeatureRows& steps,
                                                          const model::LogTable& logs,
                                                          const base::StringPool& strings) {
  if (requests.steps() != steps.steps()) {
    return base::InvalidArgument(
        "request causes: {} steps in the request rows, {} in the findings' rows", requests.steps(),
        steps.steps());
  }
  RequestCauseInput in;
  for (size_t s = 0; s < steps.steps(); ++s) {
    if (requests.rank[s] != steps.rank[s] || requests.start_ns[s] != steps.start_ns[s]) {
      return base::InvalidArgument(
          "request causes: step {} is rank {} at {} ns in the request rows, rank {} at {} ns in "
          "the findings' rows",
          s, requests.rank[s], requests.start_ns[s], steps.rank[s], steps.start_ns[s]);
    }
    in.group.push_back(steps.global_step[s] >= 0 ? steps.global_step[s] : steps.number[s]);
  }
  in.rank = requests.rank;
  in.phase = steps.phase;
  in.start_ns = requests.start_ns;
  in.end_ns = requests.end_ns;
  in.requests_begin = requests.requests_begin;
  in.step_requests = requests.step_requests;
  in.id.assign(requests.id.begin(), requests.id.end());
  in.first_ns = requests.first_ns;
  AddLogLines(logs, strings, &in);
  return in;
}

}  // namespace teller::cause
