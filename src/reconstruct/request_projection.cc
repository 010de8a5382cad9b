// Stage 5: requests from the request ids that STEP ranges carry, and the
// per-request projection C_q(s).
#include "reconstruct/request_projection.h"

#include <algorithm>
#include <unordered_map>

#include "reconstruct/build_state.h"

namespace teller::reconstruct {
namespace internal {

namespace {

std::string_view Trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

}  // namespace

void BuildRequests(model::Trace* trace, const BuildState& state) {
  model::StepTable& steps = trace->steps;
  model::RequestTable& requests = trace->requests;
  std::unordered_map<uint32_t, uint32_t> index_of;  // request id text -> request row
  std::vector<uint32_t> ids;
  for (size_t s = 0; s < steps.size(); ++s) {
    steps.requests_begin[s] = static_cast<uint32_t>(trace->step_requests.size());
    model::StringId text_id = state.steps[s].requests;
    if (text_id == base::StringPool::kEmpty) continue;
    // The string pool may grow while interning, so copy the list text first.
    std::string text(trace->str(text_id));
    ids.clear();
    std::string_view rest = text;
    while (!rest.empty()) {
      size_t comma = rest.find(',');
      std::string_view part = Trim(rest.substr(0, comma));
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      if (part.empty()) continue;
      model::StringId id = trace->strings.Intern(part);
      auto [it, added] = index_of.emplace(id.value(), static_cast<uint32_t>(requests.size()));
      if (added) {
        requests.id.push_back(id);
        requests.first_ns.push_back(steps.start_ns[s]);
        requests.last_ns.push_back(steps.end_ns[s]);
        requests.step_count.push_back(0);
      }
      ids.push_back(it->second);
    }
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    for (uint32_t q : ids) {
      requests.first_ns[q] = std::min(requests.first_ns[q], steps.start_ns[s]);
      requests.last_ns[q] = std::max(requests.last_ns[q], steps.end_ns[s]);
      ++requests.step_count[q];
      trace->step_requests.push_back(model::RequestIndex(q));
    }
    steps.requests_count[s] = static_cast<uint32_t>(ids.size());
  }
  trace->stats.Set(model::stat::kReconstructRequests, static_cast<int64_t>(requests.size()));
}

}  // namespace internal

model::RequestIndex FindRequest(const model::Trace& trace, std::string_view request_id) {
  model::StringId id = trace.strings.Find(request_id);
  if (!id.valid()) return model::RequestIndex::Invalid();
  for (size_t q = 0; q < trace.requests.size(); ++q) {
    if (trace.requests.id[q] == id) return model::RequestIndex(static_cast<uint32_t>(q));
  }
  return model::RequestIndex::Invalid();
}

namespace {

bool StepCarries(const model::Trace& trace, model::StepIndex step, model::RequestIndex request) {
  uint32_t begin = trace.steps.requests_begin[step.value()];
  uint32_t end = begin + trace.steps.requests_count[step.value()];
  for (uint32_t i = begin; i < end; ++i) {
    if (trace.step_requests[i] == request) return true;
  }
  return false;
}

// False when the event names requests ("request" / "requests" args) and q is not one.
bool EventServes(const model::Trace& trace, model::EventRow row, model::StringId key_request,
                 model::StringId key_requests, std::string_view request_text) {
  if (trace.events.args_count[row.value()] == 0) return true;
  model::StringId value;
  if (trace.FindStringArg(row, key_request, &value)) {
    return trace.str(value) == request_text;
  }
  if (trace.FindStringArg(row, key_requests, &value)) {
    std::string_view rest = trace.str(value);
    while (!rest.empty()) {
      size_t comma = rest.find(',');
      std::string_view part = rest.substr(0, comma);
      while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
      while (!part.empty() && part.back() == ' ') part.remove_suffix(1);
      if (part == request_text) return true;
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
    return false;
  }
  return true;
}

}  // namespace

std::vector<model::StepIndex> StepsOfRequest(const model::Trace& trace,
                                             model::RequestIndex request) {
  std::vector<model::StepIndex> out;
  if (!request.valid()) return out;
  for (size_t s = 0; s < trace.steps.size(); ++s) {
    model::StepIndex step(static_cast<uint32_t>(s));
    if (StepCarries(trace, step, request)) out.push_back(step);
  }
  return out;
}

std::vector<model::NodeIndex> ProjectRequest(const model::Trace& trace, model::RequestIndex request,
                                             model::StepIndex step) {
  std::vector<model::NodeIndex> out;
  if (!request.valid() || request.value() >= trace.requests.size() || !step.valid() ||
      step.value() >= trace.steps.size() || !StepCarries(trace, step, request)) {
    return out;
  }
  std::string_view request_text = trace.str(trace.requests.id[request.value()]);
  model::StringId key_request = trace.strings.Find("request");
  model::StringId key_requests = trace.strings.Find("requests");
  uint32_t begin = trace.steps.node_begin[step.value()].value();
  uint32_t end = trace.steps.node_end[step.value()].value();
  out.reserve(end - begin);
  for (uint32_t node = begin; node < end;) {
    if (node > begin &&
        !EventServes(trace, trace.nodes.event[node], key_request, key_requests, request_text)) {
      // Skip this subtree: pre-order, so it ends at the next node at or above its depth.
      uint16_t depth = trace.nodes.depth[node];
      for (++node; node < end && trace.nodes.depth[node] > depth; ++node) {
      }
      continue;
    }
    out.push_back(model::NodeIndex(node));
    ++node;
  }
  return out;
}

}  // namespace teller::reconstruct
