// Events grouped by thread in time order, and stage 3: host events nest by time
// containment with one sorted sweep and a stack per thread.
#include <algorithm>

#include "reconstruct/build_state.h"

namespace teller::reconstruct::internal {
namespace {

TimeKey KeyOf(const model::EventTable& events, uint32_t row) {
  int64_t dur = events.dur_ns[row];
  return TimeKey{events.start_ns[row], -(dur > 0 ? dur : 0),
                 (uint64_t{LayerRank(events.layer[row])} << 32) | row};
}

}  // namespace

void SortRowsByTime(const model::EventTable& events, uint32_t* rows, size_t count,
                    SortScratch* scratch) {
  if (count < 2) return;
  bool sorted = true;
  TimeKey previous = KeyOf(events, rows[0]);
  for (size_t i = 1; i < count && sorted; ++i) {
    TimeKey key = KeyOf(events, rows[i]);
    sorted = !(key < previous);
    previous = key;
  }
  if (sorted) return;
  // Inputs are mostly in order: keep the ascending run greedily, sort the
  // stragglers, merge the two.
  std::vector<TimeKey>& run = scratch->run;
  std::vector<TimeKey>& rest = scratch->rest;
  run.clear();
  rest.clear();
  for (size_t i = 0; i < count; ++i) {
    TimeKey key = KeyOf(events, rows[i]);
    if (run.empty() || !(key < run.back())) {
      run.push_back(key);
    } else {
      rest.push_back(key);
    }
  }
  std::sort(rest.begin(), rest.end());
  size_t a = 0, b = 0, out = 0;
  while (a < run.size() && b < rest.size()) {
    rows[out++] = static_cast<uint32_t>(rest[b] < run[a] ? rest[b++].tie : run[a++].tie);
  }
  while (a < run.size()) rows[out++] = static_cast<uint32_t>(run[a++].tie);
  while (b < rest.size()) rows[out++] = static_cast<uint32_t>(rest[b++].tie);
}

void GroupByThread(const model::Trace& trace, BuildState* state) {
  const model::EventTable& events = trace.events;
  size_t n = events.size();
  size_t threads = trace.threads.size();
  state->thread_begin.assign(threads + 1, 0);
  for (uint32_t row = 0; row < n; ++row) {
    if (events.phase[row] == model::EventPhase::kEnd) continue;
    ++state->thread_begin[events.thread[row].value() + 1];
  }
  for (size_t t = 0; t < threads; ++t) state->thread_begin[t + 1] += state->thread_begin[t];
  state->order.resize(state->thread_begin[threads]);
  std::vector<uint32_t> fill(state->thread_begin.begin(), state->thread_begin.end() - 1);
  for (uint32_t row = 0; row < n; ++row) {
    if (events.phase[row] == model::EventPhase::kEnd) continue;
    state->order[fill[events.thread[row].value()]++] = row;
  }
  SortScratch scratch;
  for (size_t t = 0; t < threads; ++t) {
    uint32_t begin = state->thread_begin[t];
    SortRowsByTime(events, state->order.data() + begin, state->thread_begin[t + 1] - begin,
                   &scratch);
  }
}

void NestHostEvents(model::Trace* trace, BuildState* state) {
  const model::EventTable& events = trace->events;
  state->up.assign(events.size(), kNone);
  std::vector<uint32_t> stack;
  int64_t partial_overlaps = 0;
  for (size_t t = 0; t < trace->threads.size(); ++t) {
    if (trace->threads.is_device[t]) continue;
    stack.clear();
    for (uint32_t i = state->thread_begin[t]; i < state->thread_begin[t + 1]; ++i) {
      uint32_t row = state->order[i];
      int64_t start = events.start_ns[row];
      int64_t end = EndNs(events, row);
      while (!stack.empty()) {
        uint32_t top = stack.back();
        int64_t top_start = events.start_ns[top];
        int64_t top_end = EndNs(events, top);
        // Sorted by start, so start >= top_start. Inside when it also ends in time
        // and does not start at top's (exclusive) end.
        if (end <= top_end && (start < top_end || start == top_start)) break;
        if (start < top_end) ++partial_overlaps;  // a sibling of top, counted
        stack.pop_back();
      }
      state->up[row] = stack.empty() ? kNone : stack.back();
      stack.push_back(row);
    }
  }
  if (partial_overlaps > 0) {
    trace->stats.Increment(model::stat::kReconstructPartialOverlap, partial_overlaps);
  }
}

}  // namespace teller::reconstruct::internal
