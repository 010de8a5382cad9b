// Stage 6: each log line gets a step. A line with a request id goes to the step
// of that request nearest in time (same process, else same rank, else any); other
// lines go to the step whose [start - w, end + w] window holds them, nearest
// first, looked up on the same process, then the same rank, then any rank.
// The same pass aligns lines on a trace's steps (AlignLogs) and on request rows
// (request_rows.h: every part's steps, merged).
#include <algorithm>
#include <unordered_map>

#include "reconstruct/build_state.h"
#include "reconstruct/request_rows.h"

namespace teller::reconstruct {
namespace {

using internal::kNone;

// What alignment reads of the steps: per step its process (-1: none), rank, start and
// end, and per request its steps in step order (CSR).
struct AlignmentSteps {
  std::vector<int64_t> process;
  const std::vector<int32_t>& rank;
  const std::vector<int64_t>& start_ns;
  const std::vector<int64_t>& end_ns;
  std::vector<uint32_t> request_begin;  // requests + 1
  std::vector<uint32_t> request_steps;

  size_t size() const { return start_ns.size(); }
  int64_t Distance(uint32_t s, int64_t ts) const {
    if (ts < start_ns[s]) return start_ns[s] - ts;
    if (ts > end_ns[s]) return ts - end_ns[s];
    return 0;
  }
};

// Per request its steps, from each step's requests (`requests_of(s, visit)` visits them).
template <typename RequestsOf>
void InvertStepRequests(size_t requests, size_t step_requests, RequestsOf requests_of,
                        AlignmentSteps* steps) {
  steps->request_begin.assign(requests + 1, 0);
  for (uint32_t s = 0; s < steps->size(); ++s) {
    requests_of(s, [&](uint32_t q) { ++steps->request_begin[q + 1]; });
  }
  for (size_t q = 0; q < requests; ++q) steps->request_begin[q + 1] += steps->request_begin[q];
  steps->request_steps.resize(step_requests);
  std::vector<uint32_t> fill(steps->request_begin.begin(), steps->request_begin.end() - 1);
  for (uint32_t s = 0; s < steps->size(); ++s) {
    requests_of(s, [&](uint32_t q) { steps->request_steps[fill[q]++] = s; });
  }
}

// Steps grouped by a key (process, rank or one group), each group by start with
// a running maximum of ends.
class StepWindowIndex {
 public:
  template <typename KeyOf>
  StepWindowIndex(const AlignmentSteps& steps, KeyOf key_of) : steps_(steps) {
    for (uint32_t s = 0; s < steps.size(); ++s) {
      int64_t key = key_of(s);
      if (key >= 0) order_.push_back({key, s});
    }
    std::sort(order_.begin(), order_.end(), [&](const Entry& a, const Entry& b) {
      if (a.key != b.key) return a.key < b.key;
      return steps.start_ns[a.step] < steps.start_ns[b.step];
    });
    running_end_.resize(order_.size());
    for (size_t i = 0; i < order_.size(); ++i) {
      running_end_[i] = steps.end_ns[order_[i].step];
      if (i > 0 && order_[i - 1].key == order_[i].key) {
        running_end_[i] = std::max(running_end_[i], running_end_[i - 1]);
      }
    }
  }

  // The nearest step of group `key` whose window widened by w holds ts.
  uint32_t Find(int64_t key, int64_t ts, int64_t w) const {
    auto group_begin = std::lower_bound(order_.begin(), order_.end(), key,
                                        [](const Entry& e, int64_t k) { return e.key < k; });
    auto group_end = std::upper_bound(group_begin, order_.end(), key,
                                      [](int64_t k, const Entry& e) { return k < e.key; });
    // Last step of the group that starts at or before ts + w.
    auto last = std::upper_bound(group_begin, group_end, ts + w, [&](int64_t t, const Entry& e) {
      return t < steps_.start_ns[e.step];
    });
    uint32_t best = kNone;
    int64_t best_distance = INT64_MAX;
    for (auto it = last; it != group_begin;) {
      --it;
      if (running_end_[it - order_.begin()] + w < ts) break;
      int64_t distance = steps_.Distance(it->step, ts);
      if (distance <= w && distance < best_distance) {
        best = it->step;
        best_distance = distance;
        if (distance == 0) break;
      }
    }
    return best;
  }

 private:
  struct Entry {
    int64_t key;
    uint32_t step;
  };
  const AlignmentSteps& steps_;
  std::vector<Entry> order_;
  std::vector<int64_t> running_end_;
};

// The nearest step of request q to ts: same process first, then same rank, then any.
uint32_t NearestStepOfRequest(const AlignmentSteps& steps, uint32_t q, int64_t process,
                              int32_t rank, int64_t ts) {
  int64_t best[3] = {INT64_MAX, INT64_MAX, INT64_MAX};
  uint32_t pick[3] = {kNone, kNone, kNone};
  for (uint32_t k = steps.request_begin[q]; k < steps.request_begin[q + 1]; ++k) {
    const uint32_t s = steps.request_steps[k];
    const int64_t distance = steps.Distance(s, ts);
    const int level = (process >= 0 && steps.process[s] == process) ? 0
                      : (rank >= 0 && steps.rank[s] == rank)        ? 1
                                                                    : 2;
    if (distance < best[level]) {
      best[level] = distance;
      pick[level] = s;
    }
  }
  return pick[0] != kNone ? pick[0] : pick[1] != kNone ? pick[1] : pick[2];
}

// Every line's step and alignment; `request_of(i)` is line i's request (kNone: none).
template <typename RequestOf>
LogAlignmentCounts AlignLines(const AlignmentSteps& steps, RequestOf request_of, int64_t window_ns,
                              model::LogTable* logs) {
  const int64_t w = std::max<int64_t>(window_ns, 0);
  StepWindowIndex by_process(steps, [&](uint32_t s) { return steps.process[s]; });
  StepWindowIndex by_rank(steps, [&](uint32_t s) { return int64_t{steps.rank[s]}; });
  StepWindowIndex any(steps, [](uint32_t) { return int64_t{0}; });
  LogAlignmentCounts counts;
  for (size_t i = 0; i < logs->size(); ++i) {
    logs->step[i] = model::StepIndex::Invalid();
    logs->alignment[i] = model::LogAlignment::kNone;
    const int64_t ts = logs->ts_ns[i];
    if (ts == INT64_MIN) {
      ++counts.unaligned;
      continue;
    }
    const int64_t process = logs->process[i].valid() ? int64_t{logs->process[i].value()} : -1;
    const int32_t rank = logs->rank[i];
    const uint32_t request = request_of(i);
    uint32_t chosen =
        request == kNone ? kNone : NearestStepOfRequest(steps, request, process, rank, ts);
    if (chosen != kNone) {
      logs->step[i] = model::StepIndex(chosen);
      logs->alignment[i] = model::LogAlignment::kRequestId;
      ++counts.by_request;
      continue;
    }
    if (process >= 0) chosen = by_process.Find(process, ts, w);
    if (chosen == kNone && rank >= 0) chosen = by_rank.Find(rank, ts, w);
    if (chosen == kNone) chosen = any.Find(0, ts, w);
    if (chosen == kNone) {
      ++counts.unaligned;
      continue;
    }
    logs->step[i] = model::StepIndex(chosen);
    logs->alignment[i] = model::LogAlignment::kTimeWindow;
    ++counts.by_window;
  }
  return counts;
}

}  // namespace

namespace internal {

void AlignLogs(model::Trace* trace, const BuildOptions& options) {
  model::LogTable& logs = trace->logs;
  const model::StepTable& steps = trace->steps;
  if (logs.size() == 0) return;
  AlignmentSteps aligned{{}, steps.rank, steps.start_ns, steps.end_ns, {}, {}};
  for (model::ProcessIndex process : steps.process) aligned.process.push_back(process.value());
  InvertStepRequests(
      trace->requests.size(), trace->step_requests.size(),
      [&](uint32_t s, auto visit) {
        for (uint32_t i = 0; i < steps.requests_count[s]; ++i) {
          visit(trace->step_requests[steps.requests_begin[s] + i].value());
        }
      },
      &aligned);
  std::unordered_map<uint32_t, uint32_t> request_of_id;  // request id string -> request
  for (uint32_t q = 0; q < trace->requests.size(); ++q) {
    request_of_id.emplace(trace->requests.id[q].value(), q);
  }
  const LogAlignmentCounts counts = AlignLines(
      aligned,
      [&](size_t i) {
        if (!logs.request[i].valid() || logs.request[i] == base::StringPool::kEmpty) return kNone;
        auto it = request_of_id.find(logs.request[i].value());
        return it == request_of_id.end() ? kNone : it->second;
      },
      options.log_window_ns, &logs);
  trace->stats.Set(model::stat::kReconstructLogsAlignedRequestId, counts.by_request);
  trace->stats.Set(model::stat::kReconstructLogsAlignedTimeWindow, counts.by_window);
  trace->stats.Set(model::stat::kReconstructLogsUnaligned, counts.unaligned);
}

}  // namespace internal

LogAlignmentCounts AlignLogsToRows(const RequestRows& rows, const base::StringPool& strings,
                                   int64_t log_window_ns, model::LogTable* logs) {
  AlignmentSteps aligned{{}, rows.rank, rows.start_ns, rows.end_ns, {}, {}};
  aligned.process.assign(rows.process.begin(), rows.process.end());
  InvertStepRequests(
      rows.requests(), rows.step_requests.size(),
      [&](uint32_t s, auto visit) {
        for (uint32_t i = rows.requests_begin[s]; i < rows.requests_begin[s + 1]; ++i) {
          visit(rows.step_requests[i]);
        }
      },
      &aligned);
  std::unordered_map<std::string_view, uint32_t> request_of_id;  // request id text -> request
  for (uint32_t q = 0; q < rows.requests(); ++q) request_of_id.emplace(rows.id[q], q);
  return AlignLines(
      aligned,
      [&](size_t i) {
        const model::StringId id = logs->request[i];
        if (!id.valid() || id == base::StringPool::kEmpty || id.value() >= strings.size()) {
          return kNone;
        }
        auto it = request_of_id.find(strings.Get(id));
        return it == request_of_id.end() ? kNone : it->second;
      },
      log_window_ns, logs);
}

}  // namespace teller::reconstruct
