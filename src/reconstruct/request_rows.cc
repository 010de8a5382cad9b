#include "reconstruct/request_rows.h"

#include <algorithm>
#include <string_view>
#include <unordered_map>

namespace teller::reconstruct {

RequestRows RequestRowsOfPart(const model::Trace& part) {
  RequestRows rows;
  const model::StepTable& steps = part.steps;
  rows.processes = static_cast<uint32_t>(part.processes.size());
  rows.rank = steps.rank;
  rows.start_ns = steps.start_ns;
  rows.end_ns = steps.end_ns;
  rows.requests_begin.push_back(0);
  for (size_t s = 0; s < steps.size(); ++s) {
    rows.process.push_back(steps.process[s].value());
    const uint32_t begin = steps.requests_begin[s];
    for (uint32_t i = begin; i < begin + steps.requests_count[s]; ++i) {
      rows.step_requests.push_back(part.step_requests[i].value());
    }
    rows.requests_begin.push_back(static_cast<uint32_t>(rows.step_requests.size()));
  }
  const model::RequestTable& requests = part.requests;
  for (size_t q = 0; q < requests.size(); ++q) rows.id.emplace_back(part.str(requests.id[q]));
  rows.first_ns = requests.first_ns;
  rows.last_ns = requests.last_ns;
  rows.step_count = requests.step_count;
  return rows;
}

namespace {

// Appends a part's steps; its requests are renumbered by `run_request` (by the part's
// request index) and each step's list sorted again, as BuildRequests sorts it.
void AppendSteps(const RequestRows& part, const std::vector<uint32_t>& run_request,
                 RequestRows* run) {
  const uint32_t process_base = run->processes;
  for (size_t s = 0; s < part.steps(); ++s) {
    run->process.push_back(process_base + part.process[s]);
    run->rank.push_back(part.rank[s]);
    run->start_ns.push_back(part.start_ns[s]);
    run->end_ns.push_back(part.end_ns[s]);
    const size_t first = run->step_requests.size();
    for (uint32_t i = part.requests_begin[s]; i < part.requests_begin[s + 1]; ++i) {
      run->step_requests.push_back(run_request[part.step_requests[i]]);
    }
    std::sort(run->step_requests.begin() + static_cast<std::ptrdiff_t>(first),
              run->step_requests.end());
    run->requests_begin.push_back(static_cast<uint32_t>(run->step_requests.size()));
  }
  run->processes += part.processes;
}

}  // namespace

RequestRows MergeRequestRows(const std::vector<RequestRows>& parts) {
  RequestRows run;
  run.requests_begin.push_back(0);
  std::unordered_map<std::string_view, uint32_t> index_of;  // id text -> run request
  // Request ids of the parts are appended below; their text lives in `parts`.
  std::vector<uint32_t> run_request;
  for (const RequestRows& part : parts) {
    run_request.clear();
    for (size_t q = 0; q < part.requests(); ++q) {
      auto [it, added] = index_of.emplace(part.id[q], static_cast<uint32_t>(run.requests()));
      const uint32_t r = it->second;
      if (added) {
        run.id.push_back(part.id[q]);
        run.first_ns.push_back(part.first_ns[q]);
        run.last_ns.push_back(part.last_ns[q]);
        run.step_count.push_back(0);
      }
      run.first_ns[r] = std::min(run.first_ns[r], part.first_ns[q]);
      run.last_ns[r] = std::max(run.last_ns[r], part.last_ns[q]);
      run.step_count[r] += part.step_count[q];
      run_request.push_back(r);
    }
    AppendSteps(part, run_request, &run);
  }
  return run;
}

namespace {

base::Status CheckStepRequests(const RequestRows& rows) {
  const size_t steps = rows.steps();
  if (rows.requests_begin.size() != steps + 1 || rows.requests_begin[0] != 0 ||
      rows.requests_begin[steps] != rows.step_requests.size()) {
    return base::InvalidArgument(
        "request rows: {} request offsets for {} steps and {} step requests, {} from 0 to "
        "the last expected",
        rows.requests_begin.size(), steps, rows.step_requests.size(), steps + 1);
  }
  for (size_t s = 0; s < steps; ++s) {
    const uint32_t begin = rows.requests_begin[s], end = rows.requests_begin[s + 1];
    if (end < begin) return base::InvalidArgument("request rows: step {}: offsets descend", s);
    for (uint32_t i = begin; i < end; ++i) {
      if (rows.step_requests[i] >= rows.requests() ||
          (i > begin && rows.step_requests[i] <= rows.step_requests[i - 1])) {
        return base::InvalidArgument(
            "request rows: step {}: request {} out of range ({} requests) or not ascending", s,
            rows.step_requests[i], rows.requests());
      }
    }
    if (rows.process[s] >= rows.processes) {
      return base::InvalidArgument("request rows: step {}: process {} of {}", s, rows.process[s],
                                   rows.processes);
    }
  }
  return base::OkStatus();
}

}  // namespace

base::Status CheckRequestRows(const RequestRows& rows) {
  const size_t steps = rows.steps(), requests = rows.requests();
  if (rows.rank.size() != steps || rows.start_ns.size() != steps || rows.end_ns.size() != steps) {
    return base::InvalidArgument("request rows: step columns of {}, {}, {} and {} rows",
                                 rows.process.size(), rows.rank.size(), rows.start_ns.size(),
                                 rows.end_ns.size());
  }
  if (rows.first_ns.size() != requests || rows.last_ns.size() != requests ||
      rows.step_count.size() != requests) {
    return base::InvalidArgument("request rows: request columns of {}, {}, {} and {} rows",
                                 requests, rows.first_ns.size(), rows.last_ns.size(),
                                 rows.step_count.size());
  }
  return CheckStepRequests(rows);
}

namespace {

base::Status CheckSteps(const RequestRows& rows, const model::Trace& trace) {
  const model::StepTable& steps = trace.steps;
  if (rows.steps() != steps.size() || rows.processes != trace.processes.size()) {
    return base::Internal("the request rows have {} steps of {} processes, the trace {} of {}",
                          rows.steps(), rows.processes, steps.size(), trace.processes.size());
  }
  for (size_t s = 0; s < steps.size(); ++s) {
    bool same = rows.process[s] == steps.process[s].value() && rows.rank[s] == steps.rank[s] &&
                rows.start_ns[s] == steps.start_ns[s] && rows.end_ns[s] == steps.end_ns[s] &&
                rows.requests_begin[s] == steps.requests_begin[s] &&
                rows.requests_begin[s + 1] - rows.requests_begin[s] == steps.requests_count[s];
    for (uint32_t i = 0; same && i < steps.requests_count[s]; ++i) {
      same = rows.step_requests[steps.requests_begin[s] + i] ==
             trace.step_requests[steps.requests_begin[s] + i].value();
    }
    if (!same) {
      return base::Internal("the request rows and the trace differ at step {} (rank {}, rank {})",
                            s, rows.rank[s], steps.rank[s]);
    }
  }
  return base::OkStatus();
}

}  // namespace

base::Status CheckRequestRowsAreTheTrace(const RequestRows& rows, const model::Trace& trace) {
  TELLER_RETURN_IF_ERROR(CheckRequestRows(rows));
  TELLER_RETURN_IF_ERROR(CheckSteps(rows, trace));
  const model::RequestTable& requests = trace.requests;
  if (rows.requests() != requests.size()) {
    return base::Internal("the request rows have {} requests, the trace {}", rows.requests(),
                          requests.size());
  }
  for (size_t q = 0; q < requests.size(); ++q) {
    if (rows.id[q] != trace.str(requests.id[q]) || rows.first_ns[q] != requests.first_ns[q] ||
        rows.last_ns[q] != requests.last_ns[q] || rows.step_count[q] != requests.step_count[q]) {
      return base::Internal("the request rows and the trace differ at request {} (\"{}\", \"{}\")",
                            q, rows.id[q], trace.str(requests.id[q]));
    }
  }
  return base::OkStatus();
}

}  // namespace teller::reconstruct
