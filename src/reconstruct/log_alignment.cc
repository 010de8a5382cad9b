// Stage 6: each log line gets a step. A line with a request id goes to the step
// of that request nearest in time (same process, else same rank, else any); other
// lines go to the step whose [start - w, end + w] window holds them, nearest
// first, looked up on the same process, then the same rank, then any rank.
#include <algorithm>
#include <unordered_map>

#include "reconstruct/build_state.h"

namespace teller::reconstruct::internal {
namespace {

int64_t Distance(const model::StepTable& steps, uint32_t s, int64_t ts) {
  if (ts < steps.start_ns[s]) return steps.start_ns[s] - ts;
  if (ts > steps.end_ns[s]) return ts - steps.end_ns[s];
  return 0;
}

// Steps grouped by a key (process, rank or one group), each group by start with
// a running maximum of ends.
class StepWindowIndex {
 public:
  template <typename KeyOf>
  StepWindowIndex(const model::StepTable& steps, KeyOf key_of) : steps_(steps) {
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
      int64_t distance = Distance(steps_, it->step, ts);
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
  const model::StepTable& steps_;
  std::vector<Entry> order_;
  std::vector<int64_t> running_end_;
};

}  // namespace

void AlignLogs(model::Trace* trace, const BuildOptions& options) {
  model::LogTable& logs = trace->logs;
  const model::StepTable& steps = trace->steps;
  if (logs.size() == 0) return;
  const int64_t w = std::max<int64_t>(options.log_window_ns, 0);

  // Request -> its steps.
  std::unordered_map<uint32_t, uint32_t> request_of;
  for (uint32_t q = 0; q < trace->requests.size(); ++q) {
    request_of.emplace(trace->requests.id[q].value(), q);
  }
  std::vector<uint32_t> request_begin(trace->requests.size() + 1, 0);
  for (model::RequestIndex q : trace->step_requests) ++request_begin[q.value() + 1];
  for (size_t q = 0; q < trace->requests.size(); ++q) request_begin[q + 1] += request_begin[q];
  std::vector<uint32_t> request_steps(trace->step_requests.size());
  {
    std::vector<uint32_t> fill(request_begin.begin(), request_begin.end() - 1);
    for (uint32_t s = 0; s < steps.size(); ++s) {
      for (uint32_t i = 0; i < steps.requests_count[s]; ++i) {
        request_steps[fill[trace->step_requests[steps.requests_begin[s] + i].value()]++] = s;
      }
    }
  }

  StepWindowIndex by_process(steps, [&](uint32_t s) { return int64_t{steps.process[s].value()}; });
  StepWindowIndex by_rank(steps, [&](uint32_t s) { return int64_t{steps.rank[s]}; });
  StepWindowIndex any(steps, [](uint32_t) { return int64_t{0}; });

  int64_t by_request = 0, by_window = 0, unaligned = 0;
  for (size_t i = 0; i < logs.size(); ++i) {
    logs.step[i] = model::StepIndex::Invalid();
    logs.alignment[i] = model::LogAlignment::kNone;
    int64_t ts = logs.ts_ns[i];
    if (ts == INT64_MIN) {
      ++unaligned;
      continue;
    }
    bool has_process = logs.process[i].valid();
    int32_t rank = logs.rank[i];
    uint32_t chosen = kNone;
    auto it = logs.request[i] == base::StringPool::kEmpty
                  ? request_of.end()
                  : request_of.find(logs.request[i].value());
    if (it != request_of.end()) {
      // Nearest step of the request, same process first, then same rank, then any.
      int64_t best[3] = {INT64_MAX, INT64_MAX, INT64_MAX};
      uint32_t pick[3] = {kNone, kNone, kNone};
      for (uint32_t k = request_begin[it->second]; k < request_begin[it->second + 1]; ++k) {
        uint32_t s = request_steps[k];
        int64_t distance = Distance(steps, s, ts);
        int level = (has_process && steps.process[s] == logs.process[i]) ? 0
                    : (rank >= 0 && steps.rank[s] == rank)               ? 1
                                                                         : 2;
        if (distance < best[level]) {
          best[level] = distance;
          pick[level] = s;
        }
      }
      chosen = pick[0] != kNone ? pick[0] : pick[1] != kNone ? pick[1] : pick[2];
      if (chosen != kNone) {
        logs.step[i] = model::StepIndex(chosen);
        logs.alignment[i] = model::LogAlignment::kRequestId;
        ++by_request;
        continue;
      }
    }
    if (has_process) chosen = by_process.Find(logs.process[i].value(), ts, w);
    if (chosen == kNone && rank >= 0) chosen = by_rank.Find(rank, ts, w);
    if (chosen == kNone) chosen = any.Find(0, ts, w);
    if (chosen == kNone) {
      ++unaligned;
      continue;
    }
    logs.step[i] = model::StepIndex(chosen);
    logs.alignment[i] = model::LogAlignment::kTimeWindow;
    ++by_window;
  }
  trace->stats.Set(model::stat::kReconstructLogsAlignedRequestId, by_request);
  trace->stats.Set(model::stat::kReconstructLogsAlignedTimeWindow, by_window);
  trace->stats.Set(model::stat::kReconstructLogsUnaligned, unaligned);
}

}  // namespace teller::reconstruct::internal
