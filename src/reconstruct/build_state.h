// Scratch state shared by the reconstruction stages (internal to src/reconstruct).
// Everything is one flat array over event rows; no per-event heap objects.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <new>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "base/status.h"
#include "model/trace.h"
#include "reconstruct/call_chain_builder.h"

namespace teller::reconstruct::internal {

inline constexpr uint32_t kNone = UINT32_MAX;

// Allocator for the large per-event scratch arrays: blocks of 4 MiB and more are
// 2 MiB aligned and marked for transparent huge pages, so that first touch costs
// one fault per 2 MiB instead of one per 4 KiB (page faults dominated the
// reconstruction time on virtual machines).
template <typename T>
struct ScratchAllocator {
  using value_type = T;
  static constexpr size_t kHugeBytes = size_t{2} << 20;
  static constexpr size_t kThresholdBytes = size_t{4} << 20;

  ScratchAllocator() = default;
  template <typename U>
  ScratchAllocator(const ScratchAllocator<U>&) {}  // NOLINT: allocator rebinding

  T* allocate(size_t count) {
    size_t bytes = count * sizeof(T);
    if (bytes < kThresholdBytes) return static_cast<T*>(::operator new(bytes));
    size_t rounded = (bytes + kHugeBytes - 1) / kHugeBytes * kHugeBytes;
    void* block = std::aligned_alloc(kHugeBytes, rounded);
    if (!block) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    madvise(block, rounded, MADV_HUGEPAGE);
#endif
    return static_cast<T*>(block);
  }
  void deallocate(T* block, size_t count) {
    if (count * sizeof(T) < kThresholdBytes) {
      ::operator delete(block);
    } else {
      std::free(block);
    }
  }
  template <typename U>
  bool operator==(const ScratchAllocator<U>&) const {
    return true;
  }
};
template <typename T>
using ScratchVector = std::vector<T, ScratchAllocator<T>>;

// Reserves an output column and marks its untouched whole 2 MiB pages for
// transparent huge pages before anything is written to it.
template <typename T>
void ReserveHuge(std::vector<T>* column, size_t count) {
  column->reserve(count);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  auto begin = reinterpret_cast<uintptr_t>(column->data());
  uintptr_t end = begin + count * sizeof(T);
  uintptr_t first = (begin + kHuge - 1) & ~(kHuge - 1);
  uintptr_t last = end & ~(kHuge - 1);
  if (column->empty() && last > first) {
    madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
  }
#endif
}

// Order of events that start together: outer layers first.
inline uint32_t LayerRank(model::Layer layer) {
  switch (layer) {
    case model::Layer::kStep:
      return 0;
    case model::Layer::kFe:
      return 1;
    case model::Layer::kBe:
      return 2;
    case model::Layer::kComm:
      return 2;
    case model::Layer::kRt:
      return 3;
    case model::Layer::kSync:
      return 3;
    case model::Layer::kDrv:
      return 4;
    case model::Layer::kK:
      return 5;
    case model::Layer::kMem:
      return 5;
    case model::Layer::kOther:
      return 6;
  }
  return 6;
}

inline int64_t EndNs(const model::EventTable& events, uint32_t row) {
  int64_t dur = events.dur_ns[row];
  return events.start_ns[row] + (dur > 0 ? dur : 0);
}

// A step root chosen by step detection, before steps are ordered and numbered.
struct StepCandidate {
  uint32_t row = kNone;
  model::StepSource source = model::StepSource::kTopLevelRange;
  int64_t number = -1;  // from the input (STEP "step" arg, ProfilerStep#N), -1 none
  model::StepPhase phase = model::StepPhase::kUnknown;
  model::StringId requests = model::StringId(0);  // STEP "requests" arg text
};

struct BuildState {
  // Events that take part, grouped by thread: rows of thread t are
  // order[thread_begin[t] .. thread_begin[t + 1]), sorted by start, longer
  // first, outer layer first, row.
  std::vector<uint32_t> thread_begin;
  ScratchVector<uint32_t> order;
  // Per row, the event above it: for a host event the innermost host event that
  // contains it on its thread (stage 3); for device work the host call that
  // launched it (stage 2). kNone when there is none.
  ScratchVector<uint32_t> up;
  std::vector<StepCandidate> steps;
};

// Stage 0: checks that the tables are consistent enough to index.
base::Status CheckTables(const model::Trace& trace);
// Stage 1: pairs kBegin/kEnd (by id, then per-thread stacks).
void PairRanges(model::Trace* trace);
// Stage 7's first half (collective rows matched, clocks aligned) runs early, so that
// later stages see aligned times, over collective records: reconstruct/cross_rank.h.
// After the step trees: collective kernels that carry no collective row, matched across
// ranks by (global step, ordinal among the step's such kernels) when every rank of the
// step ran the same sequence of their names.
void MatchCollectivesByStepOrder(model::Trace* trace);
// Sort key of one event: start, longer first, outer layer first, row.
struct TimeKey {
  int64_t start_ns;
  int64_t neg_dur_ns;
  uint64_t tie;  // layer rank << 32 | row

  bool operator<(const TimeKey& o) const {
    if (start_ns != o.start_ns) return start_ns < o.start_ns;
    if (neg_dur_ns != o.neg_dur_ns) return neg_dur_ns < o.neg_dur_ns;
    return tie < o.tie;
  }
};
struct SortScratch {
  std::vector<TimeKey> run;
  std::vector<TimeKey> rest;
};
// Sorts rows by TimeKey; a no-op check when they are sorted already.
void SortRowsByTime(const model::EventTable& events, uint32_t* rows, size_t count,
                    SortScratch* scratch);
// Groups events by thread, sorted; fills thread_begin and order.
void GroupByThread(const model::Trace& trace, BuildState* state);
// Stage 3: host nesting by time containment.
void NestHostEvents(model::Trace* trace, BuildState* state);
// Stage 2: device work -> launching host call by correlation id.
void BindDeviceWork(model::Trace* trace, BuildState* state);
// Stage 4a: chooses step roots.
void DetectSteps(model::Trace* trace, BuildState* state);
// Stage 4b: orders steps and writes the step table and the node table.
void BuildStepTrees(model::Trace* trace, const BuildOptions& options, BuildState* state);
// Stage 5: request table and step_requests.
void BuildRequests(model::Trace* trace, const BuildState& state);
// Stage 6: log alignment.
void AlignLogs(model::Trace* trace, const BuildOptions& options);

}  // namespace teller::reconstruct::internal
