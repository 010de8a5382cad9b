#include "sim/twin_diff.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <string_view>
#include <tuple>

#include "sim/step_ops.h"
#include "wire/store_names.h"

namespace teller::sim {
namespace {

// One event of a rank's step, as the store will name it.
struct Item {
  model::Layer layer;
  std::string name;
  std::string_view family;
  EventTable table;
  int64_t start;
  int64_t end;
  bool hit;
  std::string_view previous;  // kernels: the kernel before it on the rank, in start order
};

std::string_view ApiFamily(std::string_view name) {
  if (name.find("Malloc") != std::string_view::npos || name.find("Free") != std::string_view::npos)
    return "memory";
  if (name.find("Synchronize") != std::string_view::npos) return "sync";
  if (name.find("Memcpy") != std::string_view::npos) return "memory";
  return "launch";
}

// The rank's events, grouped by (layer, name) and in start order inside a group;
// collective records are left out (the store folds them into their kernels).
std::vector<Item> Items(const RankBuffer& b) {
  std::vector<Item> items;
  items.reserve(b.EventCount());
  for (size_t i = 0; i < b.ranges.size(); ++i) {
    const auto& r = b.ranges[i];
    items.push_back({wire::StoreLayerOf(r),
                     std::string(wire::StoreNameOf(r)),
                     "host",
                     EventTable::kRange,
                     r.start_ns,
                     r.end_ns,
                     b.range_hit[i] != 0,
                     {}});
  }
  for (size_t i = 0; i < b.api_calls.size(); ++i) {
    const auto& r = b.api_calls[i];
    items.push_back({wire::StoreLayerOf(r),
                     std::string(wire::StoreNameOf(r)),
                     ApiFamily(r.name),
                     EventTable::kApi,
                     r.start_ns,
                     r.end_ns,
                     b.api_hit[i] != 0,
                     {}});
  }
  std::vector<size_t> order(b.kernels.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    return b.kernels[x].start_ns < b.kernels[y].start_ns;
  });
  std::string_view previous;
  for (size_t i : order) {
    const auto& r = b.kernels[i];
    items.push_back({wire::StoreLayerOf(r), std::string(wire::StoreNameOf(r)),
                     FamilyName(b.kernel_family[i]), EventTable::kKernel, r.start_ns, r.end_ns,
                     b.kernel_hit[i] != 0, previous});
    previous = r.name;
  }
  for (size_t i = 0; i < b.memcpys.size(); ++i) {
    const auto& r = b.memcpys[i];
    items.push_back({wire::StoreLayerOf(r),
                     wire::StoreNameOf(r),
                     "memory",
                     EventTable::kMemcpy,
                     r.start_ns,
                     r.end_ns,
                     b.memcpy_hit[i] != 0,
                     {}});
  }
  for (size_t i = 0; i < b.syncs.size(); ++i) {
    const auto& r = b.syncs[i];
    items.push_back({wire::StoreLayerOf(r),
                     std::string(wire::StoreNameOf(r)),
                     "sync",
                     EventTable::kSync,
                     r.start_ns,
                     r.end_ns,
                     b.sync_hit[i] != 0,
                     {}});
  }
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    return std::tie(a.layer, a.name, a.start) < std::tie(b.layer, b.name, b.start);
  });
  return items;
}

// Whether fault f acted on this event (beyond the flags the interpreter set).
bool ActedOn(const ActiveFault& f, int32_t rank, const Item& item, const ClusterSpec& cluster) {
  const bool target = f.rank < 0 || f.rank == rank;
  const bool host_side = item.table == EventTable::kRange || item.table == EventTable::kApi;
  switch (f.mechanism) {
    case Mechanism::kGpuThrottle:
    case Mechanism::kKernelContention:
      return target && item.table == EventTable::kKernel && item.layer != model::Layer::kComm;
    case Mechanism::kKernelSlowdown:
      return target && item.table == EventTable::kKernel && item.family == FamilyName(f.family);
    case Mechanism::kLaunchLatency:
      return target && item.table == EventTable::kApi && item.family == "launch";
    case Mechanism::kMemcpyLatency:
      return target &&
             (item.table == EventTable::kMemcpy ||
              (item.table == EventTable::kApi && item.name.find("Memcpy") != std::string::npos));
    case Mechanism::kSyncLatency:
      return target && (item.table == EventTable::kSync ||
                        (item.table == EventTable::kApi && item.family == "sync"));
    case Mechanism::kHostMemoryPressure:
      return NodeOfRank(cluster, rank) == f.node &&
             (host_side || item.table == EventTable::kMemcpy);
    case Mechanism::kStragglerRank:
      return f.rank == rank && host_side;
    default:
      return false;
  }
}

// Whether a duration or a start moved: by more than kChangeFraction, and by more than
// kMinChangeNs itself or, for a duration, in its cell's sum (a family of 2 us kernels each
// 40% slower moves every instance 0.8 us and the step's sum of them by far more).
bool Changed(int64_t faulty, int64_t twin, bool cell_changed = false) {
  const int64_t delta = std::llabs(faulty - twin);
  return (delta > kMinChangeNs || cell_changed) &&
         static_cast<double>(delta) > kChangeFraction * std::llabs(twin);
}

// The extent of the rank's STEP ranges (else of all its events), from step_start.
int64_t RankExtent(const RankBuffer& b, int64_t step_start) {
  int64_t end = step_start;
  bool step_range = false;
  for (const auto& r : b.ranges) {
    if (r.layer == wire::RangeLayer::kStep) {
      end = std::max(end, r.end_ns);
      step_range = true;
    }
  }
  if (step_range) return end - step_start;
  for (const auto& r : b.ranges) end = std::max(end, r.end_ns);
  for (const auto& r : b.kernels) end = std::max(end, r.end_ns);
  for (const auto& r : b.memcpys) end = std::max(end, r.end_ns);
  return end - step_start;
}

// Summed durations of one (layer, name) cell of a rank's step in both runs.
struct Cell {
  double faulty_ns = 0;
  double twin_ns = 0;
  int64_t events = 0;
  bool structural = false;  // an event new or missing
  double sigma = kDeviceNoiseSigma;

  // Its sum moved beyond kMinChangeNs, kChangeFraction and its noise (Visible).
  bool SumChanged() const {
    return std::abs(faulty_ns - twin_ns) > static_cast<double>(kMinChangeNs) &&
           std::abs(faulty_ns - twin_ns) > kChangeFraction * twin_ns && Visible();
  }

  bool Visible() const {
    if (structural) return true;
    if (events == 0 || twin_ns <= 0) return false;
    const double change = std::abs(faulty_ns / twin_ns - 1);
    return change > std::max(0.05, 3 * sigma / std::sqrt(static_cast<double>(events)));
  }
};

double NoiseOf(EventTable table) {
  return table == EventTable::kKernel || table == EventTable::kMemcpy ? kDeviceNoiseSigma
                                                                      : kHostNoiseSigma;
}

class RankDiff {
 public:
  RankDiff(int32_t rank, int64_t step_start, const std::vector<ActiveFault>& faults,
           const ClusterSpec& cluster, std::vector<InstanceChange>* out)
      : rank_(rank), step_start_(step_start), faults_(faults), cluster_(cluster), out_(out) {}

  // Walks both runs' groups of (layer, name) side by side.
  size_t Run(const std::vector<Item>& faulty, const std::vector<Item>& twin) {
    const size_t before = out_->size();
    size_t i = 0, j = 0;
    while (i < faulty.size() || j < twin.size()) {
      const bool take_faulty =
          j == twin.size() || (i < faulty.size() && std::tie(faulty[i].layer, faulty[i].name) <=
                                                        std::tie(twin[j].layer, twin[j].name));
      const Item& head = take_faulty ? faulty[i] : twin[j];
      size_t i_end = i, j_end = j;
      while (i_end < faulty.size() && faulty[i_end].layer == head.layer &&
             faulty[i_end].name == head.name) {
        ++i_end;
      }
      while (j_end < twin.size() && twin[j_end].layer == head.layer &&
             twin[j_end].name == head.name) {
        ++j_end;
      }
      Group(faulty, i, i_end, twin, j, j_end);
      i = i_end;
      j = j_end;
    }
    for (size_t k = before; k < out_->size(); ++k) {
      InstanceChange& c = (*out_)[k];
      c.visible = cells_[{c.layer, c.name}].Visible();
      any_visible_ |= c.visible;
    }
    return out_->size() - before;
  }

  bool any_visible() const { return any_visible_; }

 private:
  void Group(const std::vector<Item>& faulty, size_t i0, size_t i1, const std::vector<Item>& twin,
             size_t j0, size_t j1) {
    const size_t n = std::max(i1 - i0, j1 - j0);
    const Item& head = i1 > i0 ? faulty[i0] : twin[j0];
    Cell& cell = cells_[{head.layer, head.name}];
    for (size_t k = 0; k < n; ++k) {
      const bool in_faulty = i0 + k < i1, in_twin = j0 + k < j1;
      const Item& item = in_faulty ? faulty[i0 + k] : twin[j0 + k];
      cell.sigma = NoiseOf(item.table);
      cell.structural |=
          in_faulty != in_twin || (in_faulty && in_twin && item.previous != twin[j0 + k].previous);
      if (in_faulty && in_twin) {
        cell.faulty_ns += static_cast<double>(item.end - item.start);
        cell.twin_ns += static_cast<double>(twin[j0 + k].end - twin[j0 + k].start);
        ++cell.events;
      }
    }
    const bool cell_changed = cell.SumChanged();
    for (size_t k = 0; k < n; ++k) {
      const bool in_faulty = i0 + k < i1, in_twin = j0 + k < j1;
      const Item& item = in_faulty ? faulty[i0 + k] : twin[j0 + k];
      InstanceChange c;
      c.kind = !in_twin     ? ChangeKind::kNew
               : !in_faulty ? ChangeKind::kMissing
                            : ChangeKind::kTiming;
      if (in_faulty && in_twin) {
        const Item& t = twin[j0 + k];
        const int64_t dur = item.end - item.start, twin_dur = t.end - t.start;
        c.delta_ns = dur - twin_dur;
        c.ratio = twin_dur > 0 ? static_cast<double>(dur) / static_cast<double>(twin_dur) : 0;
        if (Changed(dur, twin_dur, cell_changed)) {
          c.kind = ChangeKind::kTiming;
        } else if (Changed(item.start - step_start_, t.start - step_start_) ||
                   item.previous != t.previous) {
          c.kind = ChangeKind::kMoved;
        } else {
          continue;
        }
      } else {
        c.delta_ns = in_faulty ? item.end - item.start : -(item.end - item.start);
      }
      c.rank = rank_;
      c.layer = item.layer;
      c.name = item.name;
      c.family = std::string(item.family);
      c.ordinal = static_cast<int32_t>(k);
      c.culprit = in_faulty && item.hit;
      for (const ActiveFault& f : faults_) c.culprit |= ActedOn(f, rank_, item, cluster_);
      out_->push_back(std::move(c));
    }
  }

  int32_t rank_;
  int64_t step_start_;
  const std::vector<ActiveFault>& faults_;
  const ClusterSpec& cluster_;
  std::vector<InstanceChange>* out_;
  std::map<std::pair<model::Layer, std::string>, Cell> cells_;
  bool any_visible_ = false;
};

}  // namespace

std::string_view ChangeKindName(ChangeKind kind) {
  switch (kind) {
    case ChangeKind::kTiming:
      return "timing";
    case ChangeKind::kMoved:
      return "moved";
    case ChangeKind::kNew:
      return "new";
    case ChangeKind::kMissing:
      return "missing";
  }
  return "timing";
}

StepChange DiffStep(const std::vector<RankBuffer>& faulty, const std::vector<RankBuffer>& twin,
                    int64_t step_start_ns, const std::vector<ActiveFault>& faults,
                    const ClusterSpec& cluster) {
  StepChange change;
  for (size_t r = 0; r < faulty.size() && r < twin.size(); ++r) {
    RankStepChange rank;
    rank.rank = faulty[r].rank;
    rank.twin_ns = RankExtent(twin[r], step_start_ns);
    rank.delta_ns = RankExtent(faulty[r], step_start_ns) - rank.twin_ns;
    RankDiff diff(rank.rank, step_start_ns, faults, cluster, &change.instances);
    rank.changed = diff.Run(Items(faulty[r]), Items(twin[r])) > 0;
    change.visible |= diff.any_visible();
    change.ranks.push_back(rank);
  }
  return change;
}

}  // namespace teller::sim
