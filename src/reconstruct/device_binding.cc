// Stage 2: device work (K, MEM, COMM, SYNC on device tracks) binds to the host
// call with the same correlation id in the same process. A graph launch binds
// to all of its graph's work. When a correlation id repeats on the host, the
// latest launch that starts at or before the device work wins (else the first).
//
// Correlation ids of one process are usually dense (CUPTI and Kineto count them
// up from 1), so a process whose launch ids span at most a few times their count
// and do not repeat binds through a direct table. Other processes (sparse or
// repeated ids) go through a sort of (process, correlation) keys.
#include <algorithm>

#include "reconstruct/build_state.h"

namespace teller::reconstruct::internal {
namespace {

// Rows of a device timeline bound to the call that launched them by correlation id: the
// device's work, and the synchronizations a profiler records on the device's timeline.
bool IsBoundByCorrelation(model::Layer layer) {
  return model::IsDeviceWork(layer) || layer == model::Layer::kSync;
}

struct ProcessIds {
  int64_t min_id = INT64_MAX;
  int64_t max_id = INT64_MIN;
  uint64_t launches = 0;
  bool dense = false;
  size_t table_begin = 0;
};

struct Key {
  uint32_t process;
  uint32_t row;
  int64_t correlation;

  bool operator<(const Key& o) const {
    if (process != o.process) return process < o.process;
    if (correlation != o.correlation) return correlation < o.correlation;
    return row < o.row;
  }
  bool SameGroup(const Key& o) const {
    return process == o.process && correlation == o.correlation;
  }
};

// Binds the work of processes not served by a table; returns repeated launch ids.
int64_t BindBySort(const model::Trace& trace, const std::vector<uint8_t>& is_device,
                   const std::vector<ProcessIds>& ids, ScratchVector<uint32_t>* up) {
  const model::EventTable& events = trace.events;
  std::vector<Key> launches, work;
  for (uint32_t row = 0; row < events.size(); ++row) {
    uint32_t process = events.process[row].value();
    if (ids[process].dense || !events.correlation[row].valid() ||
        events.phase[row] == model::EventPhase::kEnd) {
      continue;
    }
    bool device = is_device[events.thread[row].value()];
    if (device && !IsBoundByCorrelation(events.layer[row])) continue;
    (device ? work : launches).push_back(Key{process, row, events.correlation[row].value()});
  }
  if (work.empty() && launches.empty()) return 0;
  std::sort(launches.begin(), launches.end());
  std::sort(work.begin(), work.end());
  size_t l = 0;
  for (size_t w = 0; w < work.size();) {
    size_t w_end = w;
    while (w_end < work.size() && work[w_end].SameGroup(work[w])) ++w_end;
    while (l < launches.size() && launches[l] < work[w] && !launches[l].SameGroup(work[w])) ++l;
    size_t l_end = l;
    while (l_end < launches.size() && launches[l_end].SameGroup(work[w])) ++l_end;
    for (size_t k = w; k < w_end && l_end > l; ++k) {
      // The latest launch at or before the work, else the earliest launch.
      int64_t start = events.start_ns[work[k].row];
      uint32_t pick = launches[l].row;
      int64_t best_before = INT64_MIN, earliest = INT64_MAX;
      for (size_t c = l; c < l_end; ++c) {
        int64_t launch_start = events.start_ns[launches[c].row];
        if (launch_start <= start && launch_start > best_before) {
          best_before = launch_start;
          pick = launches[c].row;
        } else if (best_before == INT64_MIN && launch_start < earliest) {
          earliest = launch_start;
          pick = launches[c].row;
        }
      }
      (*up)[work[k].row] = pick;
    }
    w = w_end;
  }
  int64_t repeated = 0;
  for (size_t i = 0; i < launches.size();) {
    size_t j = i + 1;
    while (j < launches.size() && launches[j].SameGroup(launches[i])) ++j;
    repeated += static_cast<int64_t>(j - i - 1);
    i = j;
  }
  return repeated;
}

}  // namespace

void BindDeviceWork(model::Trace* trace, BuildState* state) {
  const model::EventTable& events = trace->events;
  const size_t n = events.size();
  const std::vector<uint8_t>& is_device = trace->threads.is_device;
  ScratchVector<uint32_t>& up = state->up;
  std::vector<ProcessIds> ids(trace->processes.size());
  for (uint32_t row = 0; row < n; ++row) {
    if (!events.correlation[row].valid() || is_device[events.thread[row].value()] ||
        events.phase[row] == model::EventPhase::kEnd) {
      continue;
    }
    ProcessIds& p = ids[events.process[row].value()];
    int64_t id = events.correlation[row].value();
    p.min_id = std::min(p.min_id, id);
    p.max_id = std::max(p.max_id, id);
    ++p.launches;
  }
  size_t table_size = 0;
  for (ProcessIds& p : ids) {
    if (p.launches == 0) continue;
    uint64_t span = static_cast<uint64_t>(p.max_id) - static_cast<uint64_t>(p.min_id) + 1;
    p.dense = span <= 4 * p.launches + 4096;
    if (!p.dense) continue;
    p.table_begin = table_size;
    table_size += span;
  }
  std::vector<uint32_t> table(table_size, kNone);
  for (uint32_t row = 0; row < n; ++row) {
    if (!events.correlation[row].valid() || is_device[events.thread[row].value()] ||
        events.phase[row] == model::EventPhase::kEnd) {
      continue;
    }
    ProcessIds& p = ids[events.process[row].value()];
    if (!p.dense) continue;
    uint32_t& slot = table[p.table_begin + (events.correlation[row].value() - p.min_id)];
    if (slot != kNone) p.dense = false;  // repeated id: this process goes the sort way
    slot = row;
  }
  int64_t kernels_total = 0, kernels_bound = 0;
  for (uint32_t row = 0; row < n; ++row) {
    if (!is_device[events.thread[row].value()]) continue;
    model::Layer layer = events.layer[row];
    bool kernel = model::IsDeviceWork(layer);
    kernels_total += kernel;
    if (!events.correlation[row].valid() || !IsBoundByCorrelation(layer) ||
        events.phase[row] == model::EventPhase::kEnd) {
      continue;
    }
    const ProcessIds& p = ids[events.process[row].value()];
    int64_t id = events.correlation[row].value();
    if (!p.dense || id < p.min_id || id > p.max_id) continue;
    up[row] = table[p.table_begin + (id - p.min_id)];
  }
  bool any_sparse = false;
  for (const ProcessIds& p : ids) any_sparse = any_sparse || (p.launches > 0 && !p.dense);
  int64_t repeated = any_sparse ? BindBySort(*trace, is_device, ids, &up) : 0;
  for (uint32_t row = 0; row < n; ++row) {
    kernels_bound += up[row] != kNone && is_device[events.thread[row].value()] &&
                     model::IsDeviceWork(events.layer[row]);
  }
  trace->stats.Set(model::stat::kReconstructKernelsBound, kernels_bound);
  trace->stats.Set(model::stat::kReconstructKernelsUnbound, kernels_total - kernels_bound);
  if (repeated > 0) {
    trace->stats.Increment(model::stat::kReconstructDuplicateCorrelation, repeated);
  }
}

}  // namespace teller::reconstruct::internal
