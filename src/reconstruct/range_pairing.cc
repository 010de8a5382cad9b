// Stage 1: range reconstruction. A kBegin and a kEnd with the same valid id in
// one process pair first (start/end ranges, any thread); the rest pair per thread
// like NVTX push/pop: a kEnd closes the innermost open kBegin of its thread.
#include <algorithm>

#include "reconstruct/build_state.h"

namespace teller::reconstruct::internal {
namespace {

using model::EventPhase;

void Pair(model::EventTable* events, uint32_t begin, uint32_t end) {
  int64_t dur = events->start_ns[end] - events->start_ns[begin];
  events->phase[begin] = EventPhase::kComplete;
  events->dur_ns[begin] = dur > 0 ? dur : 0;
  events->flags[end] |= model::kFlagConsumed;
}

bool IsOpenEnd(const model::EventTable& events, uint32_t row) {
  return events.phase[row] == EventPhase::kEnd && !(events.flags[row] & model::kFlagConsumed);
}

void PairById(model::EventTable* events, const std::vector<uint32_t>& marks) {
  std::vector<uint32_t> with_id;
  for (uint32_t row : marks) {
    if (events->id[row].valid()) with_id.push_back(row);
  }
  std::sort(with_id.begin(), with_id.end(), [&](uint32_t a, uint32_t b) {
    if (events->process[a] != events->process[b]) return events->process[a] < events->process[b];
    if (events->id[a] != events->id[b]) return events->id[a] < events->id[b];
    if (events->start_ns[a] != events->start_ns[b]) {
      return events->start_ns[a] < events->start_ns[b];
    }
    return a < b;
  });
  std::vector<uint32_t> open;
  for (size_t i = 0; i < with_id.size();) {
    size_t j = i;
    while (j < with_id.size() && events->process[with_id[j]] == events->process[with_id[i]] &&
           events->id[with_id[j]] == events->id[with_id[i]]) {
      ++j;
    }
    open.clear();
    for (size_t k = i; k < j; ++k) {
      uint32_t row = with_id[k];
      if (events->phase[row] == EventPhase::kBegin) {
        open.push_back(row);
      } else if (IsOpenEnd(*events, row) && !open.empty()) {
        Pair(events, open.back(), row);
        open.pop_back();
      }
    }
    i = j;
  }
}

}  // namespace

void PairRanges(model::Trace* trace) {
  model::EventTable* events = &trace->events;
  size_t n = events->size();
  std::vector<uint32_t> marks;
  for (uint32_t row = 0; row < n; ++row) {
    EventPhase phase = events->phase[row];
    if (phase == EventPhase::kBegin ||
        (phase == EventPhase::kEnd && !(events->flags[row] & model::kFlagConsumed))) {
      marks.push_back(row);
    }
  }
  if (marks.empty()) return;
  PairById(events, marks);

  // Per-thread stacks over what is left, in time order (input order breaks ties).
  std::erase_if(marks, [&](uint32_t row) {
    return events->phase[row] != EventPhase::kBegin && !IsOpenEnd(*events, row);
  });
  std::sort(marks.begin(), marks.end(), [&](uint32_t a, uint32_t b) {
    if (events->thread[a] != events->thread[b]) return events->thread[a] < events->thread[b];
    if (events->start_ns[a] != events->start_ns[b]) {
      return events->start_ns[a] < events->start_ns[b];
    }
    return a < b;
  });
  std::vector<uint32_t> stack;
  std::vector<uint32_t> unclosed;
  int64_t unmatched_pops = 0;
  for (size_t i = 0; i < marks.size();) {
    size_t j = i;
    stack.clear();
    for (; j < marks.size() && events->thread[marks[j]] == events->thread[marks[i]]; ++j) {
      uint32_t row = marks[j];
      if (events->phase[row] == EventPhase::kBegin) {
        stack.push_back(row);
      } else if (stack.empty()) {
        ++unmatched_pops;
      } else {
        Pair(events, stack.back(), row);
        stack.pop_back();
      }
    }
    unclosed.insert(unclosed.end(), stack.begin(), stack.end());
    i = j;
  }
  if (unmatched_pops > 0) {
    trace->stats.Increment(model::stat::kReconstructUnmatchedPop, unmatched_pops);
  }
  if (unclosed.empty()) return;

  // An open range ends at the last timestamp seen on its thread.
  std::vector<int64_t> thread_last(trace->threads.size(), INT64_MIN);
  for (uint32_t row = 0; row < n; ++row) {
    int64_t& last = thread_last[events->thread[row].value()];
    last = std::max(last, EndNs(*events, row));
  }
  for (uint32_t row : unclosed) {
    int64_t dur = thread_last[events->thread[row].value()] - events->start_ns[row];
    events->phase[row] = EventPhase::kComplete;
    events->dur_ns[row] = dur > 0 ? dur : 0;
    events->flags[row] |= model::kFlagTruncated;
  }
  trace->stats.Increment(model::stat::kReconstructUnclosedRange,
                         static_cast<int64_t>(unclosed.size()));
}

}  // namespace teller::reconstruct::internal
