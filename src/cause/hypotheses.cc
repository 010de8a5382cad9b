#include "cause/hypotheses.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <span>
#include <tuple>

#include <fmt/format.h>

#include "base/median.h"
#include "base/robust.h"
#include "base/parallel_for.h"
#include "localize/baseline.h"

namespace teller::cause {

using localize::OperatorFamily;

std::string_view CauseKindName(CauseKind kind) {
  static constexpr std::array<std::string_view, kCauseKindCount> kNames = {
      "gpu_slow",     "family_slow",  "host_slow",       "launch_latency",    "copy_latency",
      "sync_latency", "allocator",    "straggler",       "link_degraded",     "engine_pause",
      "reorder",      "launch_retry", "request_starved", "request_preempted", "request_misrouted"};
  return kNames[static_cast<size_t>(kind)];
}

bool IsRankCause(CauseKind kind) {
  return kind != CauseKind::kFamilySlow && kind != CauseKind::kLinkDegraded &&
         kind != CauseKind::kEnginePause && kind != CauseKind::kReorder && !IsRequestCause(kind);
}

bool IsRequestCause(CauseKind kind) {
  return kind == CauseKind::kRequestStarved || kind == CauseKind::kRequestPreempted ||
         kind == CauseKind::kRequestMisrouted;
}

namespace {

struct Template {
  CauseKind kind;
  int32_t rank = -1;
  OperatorFamily family = OperatorFamily::kUnnamed;
  int32_t node = -1;
  // A link whose collectives' transfers are measured (matched across ranks): it is
  // judged by them too, not only by their whole time, which holds the waits for late
  // peers.
  bool by_transfer = false;
  // A straggler late by its stalls (Hypothesis::by_stall).
  bool by_stall = false;
};

Template TemplateOf(const Hypothesis& h) {
  return {h.kind, h.rank, h.family, h.node, h.by_transfer, h.by_stall};
}

bool IsAdditive(const Template& t) {
  return t.kind == CauseKind::kAllocator || t.kind == CauseKind::kEnginePause ||
         t.kind == CauseKind::kReorder || t.kind == CauseKind::kLaunchRetry || t.by_stall;
}

// Facts of a group (a global step) the victims' predictions need: per rank, the
// baseline of the channels each rank cause scales.
struct GroupFacts {
  std::map<std::pair<int32_t, CauseKind>, double> culprit_expected_ns;
  int32_t first_rank = -1;  // the rank that runs the scheduler (vLLM, SGLang: rank 0)
  bool one_rank = false;    // no peers: an idle stretch waits for none of them
  // Per channel (and compute family), the median z over the group's ranks, when it has
  // CauseOptions::min_common_ranks or more: what moved on every rank (a long prompt) is no
  // rank's cause.
  std::map<std::pair<Channel, OperatorFamily>, double> common_z;
  // ... and per node, the median z over the ranks of the other nodes: what a node's
  // cause moved beyond the rest of the job.
  std::map<std::tuple<int32_t, Channel, OperatorFamily>, double> off_node_z;
};

struct Prediction {
  double weight = 0.0;  // predicted excess per unit of effect
  bool victim = false;
};

bool ScalesChannel(CauseKind kind, Channel c) {
  switch (kind) {
    case CauseKind::kHostSlow:
      // Under memory pressure (swapping, page reclaim) copies to and from host memory
      // slow down with the host's own work.
      if (c == Channel::kDeviceCopy) return true;
      [[fallthrough]];
    case CauseKind::kStraggler:
      // Everything the host's CPU does: its ranges and the calls it makes.
      return c == Channel::kFrontend || c == Channel::kBackend || c == Channel::kLaunch ||
             c == Channel::kCollectiveLaunch || c == Channel::kHostCopy ||
             c == Channel::kRuntimeOther;
    case CauseKind::kGpuSlow:
      return c == Channel::kCompute;
    case CauseKind::kLaunchLatency:
      return c == Channel::kLaunch || c == Channel::kCollectiveLaunch;
    case CauseKind::kCopyLatency:
      return c == Channel::kHostCopy || c == Channel::kDeviceCopy;
    case CauseKind::kSyncLatency:
      return c == Channel::kSync;
    default:
      return false;
  }
}

// Peers of a slow or late rank wait for it: in collectives (tensor parallel) or
// between steps (the scheduler waits for every worker); half of the wait is
// predicted in each, so either explains it.
Prediction PredictVictim(const Template& t, const Cell& cell, const GroupFacts& group) {
  if (cell.channel != Channel::kCollective && cell.channel != Channel::kStepGap) return {};
  // A slow host whose peers wait for it is a straggler (its own cause).
  if (t.kind == CauseKind::kHostSlow) return {};
  // Each nanosecond a rank stalls before its collectives, its peers wait.
  if (t.by_stall) return {0.5, true};
  auto culprit = group.culprit_expected_ns.find({t.rank, t.kind});
  if (culprit == group.culprit_expected_ns.end()) return {};
  return {0.5 * culprit->second, true};
}

// What a cause predicts for one cell, per unit of its effect.
Prediction Predict(const Template& t, const MapStep& step, const Cell& cell,
                   const GroupFacts& group) {
  const bool on_rank = (t.rank < 0 || step.rank == t.rank) && (t.node < 0 || step.node == t.node);
  const Channel c = cell.channel;
  if (IsRankCause(t.kind) && !on_rank) return PredictVictim(t, cell, group);
  switch (t.kind) {
    case CauseKind::kGpuSlow:
    case CauseKind::kHostSlow:
    case CauseKind::kLaunchLatency:
    case CauseKind::kCopyLatency:
    case CauseKind::kSyncLatency:
      return ScalesChannel(t.kind, c) ? Prediction{cell.expected, false} : Prediction{};
    case CauseKind::kFamilySlow:
      return c == Channel::kCompute && cell.family == t.family ? Prediction{cell.expected, false}
                                                               : Prediction{};
    case CauseKind::kAllocator:
      return c == Channel::kAlloc ? Prediction{1.0, false} : Prediction{};
    case CauseKind::kStraggler:
      // A host slower than its peers', so the last to arrive at every collective: its
      // peers wait there (PredictVictim). Its own collectives wait less, but they waited
      // little before when the ranks arrive together, so that is not predicted. Or a rank
      // that stalls inside its step (idle, no work recorded: a sleep, a GC pause, I/O):
      // everything after the stall, the step's collectives among it, comes that much later.
      if (t.by_stall) return c == Channel::kStall ? Prediction{1.0, false} : Prediction{};
      return ScalesChannel(t.kind, c) ? Prediction{cell.expected, false} : Prediction{};
    case CauseKind::kLinkDegraded:
      // Its collectives take longer, and so do their transfers when they are measured
      // (a slow rank's peers wait longer in theirs, but their transfers do not grow).
      return (c == Channel::kCollective || (t.by_transfer && c == Channel::kCollectiveTransfer)) &&
                     cell.family == t.family && (t.node < 0 || step.node == t.node)
                 ? Prediction{cell.expected, false}
                 : Prediction{};
    case CauseKind::kEnginePause:
      // Idle GPUs between steps, and on a rank that runs an engine loop its scheduler's
      // range stretched (one rank per engine: data-parallel replicas each run their own,
      // so any rank may; MergedTerm takes the gap and the range as one); without peers, a
      // stall inside the step too (with them, a rank idles inside its step when it waits
      // for a late one, and one rank's stall that its peers wait for is that rank's: a
      // straggler by_stall).
      if (c == Channel::kStepGap || c == Channel::kFrontend) return {1.0, false};
      return c == Channel::kStall && group.one_rank ? Prediction{1.0, false} : Prediction{};
    case CauseKind::kReorder:
      return c == Channel::kOrderBreaks ? Prediction{1.0, false} : Prediction{};
    case CauseKind::kLaunchRetry:
      return c == Channel::kFailedCalls ? Prediction{1.0, false} : Prediction{};
    case CauseKind::kRequestStarved:  // read from the requests, not the map
    case CauseKind::kRequestPreempted:
    case CauseKind::kRequestMisrouted:
      return {};
  }
  return {};
}

std::vector<Template> Templates(const DeviationMap& map) {
  std::set<OperatorFamily> families, collective_families, transfer_families;
  bool failed_calls = false;
  for (const Cell& cell : map.cells) {
    if (cell.channel == Channel::kCompute) families.insert(cell.family);
    if (cell.channel == Channel::kCollective) collective_families.insert(cell.family);
    if (cell.channel == Channel::kCollectiveTransfer) transfer_families.insert(cell.family);
    failed_calls |= cell.channel == Channel::kFailedCalls;
  }
  const bool collectives = !collective_families.empty();
  std::vector<Template> templates;
  for (int32_t rank : map.ranks) {
    for (CauseKind kind :
         {CauseKind::kGpuSlow, CauseKind::kHostSlow, CauseKind::kLaunchLatency,
          CauseKind::kCopyLatency, CauseKind::kSyncLatency, CauseKind::kAllocator}) {
      templates.push_back({kind, rank});
    }
    // Retries need failed calls in the map: without them the fit is empty.
    if (failed_calls) templates.push_back({CauseKind::kLaunchRetry, rank});
    if (map.ranks.size() > 1 && collectives) {
      templates.push_back({CauseKind::kStraggler, rank});
      templates.push_back({CauseKind::kStraggler, rank, OperatorFamily::kUnnamed, -1, false, true});
    }
  }
  for (OperatorFamily family : families) templates.push_back({CauseKind::kFamilySlow, -1, family});
  // A node's host slow (memory pressure, a noisy neighbour) slows every rank it runs.
  std::map<int32_t, std::set<int32_t>> ranks_of_node;
  for (const MapStep& step : map.steps) ranks_of_node[step.node].insert(step.rank);
  std::set<int32_t> nodes;
  for (const auto& [node, ranks] : ranks_of_node) {
    nodes.insert(node);
    if (node >= 0 && ranks.size() >= 2 && ranks_of_node.size() >= 2) {
      templates.push_back({CauseKind::kHostSlow, -1, OperatorFamily::kUnnamed, node});
    }
  }
  // A link carries some collectives (a pipeline's send/recv crosses nodes, a tensor-
  // parallel all-reduce stays inside one).
  for (OperatorFamily family : collective_families) {
    const bool by_transfer = transfer_families.count(family) > 0;
    templates.push_back({CauseKind::kLinkDegraded, -1, family, -1, by_transfer});
    if (nodes.size() < 2) continue;
    for (int32_t node : nodes) {
      templates.push_back({CauseKind::kLinkDegraded, -1, family, node, by_transfer});
    }
  }
  templates.push_back({CauseKind::kEnginePause});
  templates.push_back({CauseKind::kReorder});
  return templates;
}

// The map indexed by group: positions of each step, in group order.
// The waits of a group's ranks as the victims of a rank that stalls before its collectives
// (PredictVictim's half a nanosecond a nanosecond): each rank's part, their sums, and the
// two least parts by each measure AddStallVictims reads, so leaving out the stalled rank
// costs O(log ranks), not a pass over the group.
struct StallWaits {
  struct Part {
    int32_t rank = -1;
    double s = 0.0;  // sum z u
    double q = 0.0;  // sum u^2
  };
  std::vector<Part> parts;  // by rank
  double s = 0.0, q = 0.0;
  double contradiction_z = 0.0;  // CauseOptions::contradiction_z
  // Indices into parts of the two least by s / sqrt(q), and by s / q + z / sqrt(q) (how low
  // the common level must fall for the part to contradict it: SomePartContradicts).
  std::array<size_t, 2> least_z = {kNone, kNone};
  std::array<size_t, 2> least_bound = {kNone, kNone};
  static constexpr size_t kNone = static_cast<size_t>(-1);
};

struct Groups {
  std::vector<int64_t> ids;                 // ascending
  std::vector<std::vector<uint32_t>> rows;  // MapStep rows of each group
  std::vector<GroupFacts> facts;
  // Each group's phase: its rows' when they agree, else kUnknown.
  std::vector<model::StepPhase> phases;
  // Where peers wait (PredictVictim's cells), per MapStep row and per group: the sums
  // of clipped z / sigma and of 1 / sigma^2 over those cells. A cause of one rank
  // predicts w / sigma on each of them, so its victim sums over a group are w and w^2
  // times the group's sums less its own rank's.
  std::vector<double> wait_z, wait_u2;              // per row
  std::vector<double> group_wait_z, group_wait_u2;  // per group
  // Per group, its ranks' waits as a straggler by_stall's victims (AddStallVictims).
  std::vector<StallWaits> stall_waits;
  // Each group's rows ordered by rank (then row), and their ranks: a cause of one rank
  // reads only that rank's rows, so N such causes cost N x rows / N, not N x rows.
  std::vector<std::vector<uint32_t>> rows_by_rank;
  std::vector<std::vector<int32_t>> ranks_by_rank;
  // The same by node: a node's cause predicts nothing on another node's rows.
  std::vector<std::vector<uint32_t>> rows_by_node;
  std::vector<std::vector<int32_t>> nodes_by_node;

  // The rows of group g on `rank` (on `node`), in row order.
  std::span<const uint32_t> RowsOfRank(size_t g, int32_t rank) const {
    return RowsWithKey(rows_by_rank[g], ranks_by_rank[g], rank);
  }
  std::span<const uint32_t> RowsOfNode(size_t g, int32_t node) const {
    return RowsWithKey(rows_by_node[g], nodes_by_node[g], node);
  }

 private:
  static std::span<const uint32_t> RowsWithKey(const std::vector<uint32_t>& rows,
                                               const std::vector<int32_t>& keys, int32_t key) {
    const auto [lo, hi] = std::equal_range(keys.begin(), keys.end(), key);
    return std::span<const uint32_t>(rows).subspan(static_cast<size_t>(lo - keys.begin()),
                                                   static_cast<size_t>(hi - lo));
  }
};

// A cause of one rank predicts nothing on another rank's step but its waits (a fleet of
// N ranks has N such causes, each over every step): it reads its own rank's rows, and
// the others' waits come from the wait sums (AddPeerWaits).
bool ReadsOnlyItsRank(const Template& t) {
  return IsRankCause(t.kind) && t.rank >= 0 && t.node < 0;
}

// A cell's z within +-cap (CauseOptions::cell_z_cap): one absurd value is not more evidence.
double ClippedZ(const Cell& cell, double cap) { return std::clamp(cell.z(), -cap, cap); }

// Keeps in `least` the indices of the two parts with the smallest key, the first on ties.
template <typename Key>
void KeepTwoLeast(const std::vector<StallWaits::Part>& parts, Key key, std::array<size_t, 2>* least) {
  for (size_t i = 0; i < parts.size(); ++i) {
    const double k = key(parts[i]);
    if ((*least)[0] == StallWaits::kNone || k < key(parts[(*least)[0]])) {
      (*least)[1] = (*least)[0];
      (*least)[0] = i;
    } else if ((*least)[1] == StallWaits::kNone || k < key(parts[(*least)[1]])) {
      (*least)[1] = i;
    }
  }
}

StallWaits SumStallWaits(const DeviationMap& map, const std::vector<uint32_t>& rows,
                         const Groups& groups, double contradiction_z) {
  constexpr double w = 0.5;
  std::map<int32_t, std::pair<double, double>> by_rank;
  for (uint32_t row : rows) {
    if (groups.wait_u2[row] <= 0.0) continue;
    auto& part = by_rank[map.steps[row].rank];
    part.first += w * groups.wait_z[row];
    part.second += w * w * groups.wait_u2[row];
  }
  StallWaits waits;
  waits.contradiction_z = contradiction_z;
  for (const auto& [rank, part] : by_rank) {
    waits.parts.push_back({rank, part.first, part.second});
    waits.s += part.first, waits.q += part.second;
  }
  KeepTwoLeast(waits.parts, [](const StallWaits::Part& p) { return p.s / std::sqrt(p.q); },
               &waits.least_z);
  KeepTwoLeast(
      waits.parts,
      [&](const StallWaits::Part& p) { return p.s / p.q + contradiction_z / std::sqrt(p.q); },
      &waits.least_bound);
  return waits;
}

void SumWaitCells(const DeviationMap& map, double cell_z_cap, double contradiction_z,
                  Groups* groups) {
  groups->wait_z.assign(map.steps.size(), 0.0);
  groups->wait_u2.assign(map.steps.size(), 0.0);
  for (size_t row = 0; row < map.steps.size(); ++row) {
    const MapStep& step = map.steps[row];
    for (uint32_t c = step.cells_begin; c < step.cells_end; ++c) {
      const Cell& cell = map.cells[c];
      if (cell.channel != Channel::kCollective && cell.channel != Channel::kStepGap) continue;
      groups->wait_z[row] += ClippedZ(cell, cell_z_cap) / cell.sigma;
      groups->wait_u2[row] += 1.0 / (cell.sigma * cell.sigma);
    }
  }
  for (const std::vector<uint32_t>& rows : groups->rows) {
    double z = 0.0, u2 = 0.0;
    for (uint32_t row : rows) z += groups->wait_z[row], u2 += groups->wait_u2[row];
    groups->group_wait_z.push_back(z);
    groups->group_wait_u2.push_back(u2);
    groups->stall_waits.push_back(SumStallWaits(map, rows, *groups, contradiction_z));
  }
}

double UpperMedian(std::vector<double>* values) {
  std::nth_element(values->begin(), values->begin() + values->size() / 2, values->end());
  return (*values)[values->size() / 2];
}

// Per node of the group, the median z of one channel over the ranks of the other nodes:
// the upper median of every z less the node's own, read off the sorted z's once (a
// fleet's node has a few of its hundreds of ranks).
void AddOffNodeMedians(std::pair<Channel, OperatorFamily> key,
                       std::vector<std::pair<int32_t, double>> by_node, GroupFacts* facts) {
  std::vector<double> sorted;
  for (const auto& entry : by_node) sorted.push_back(entry.second);
  std::sort(sorted.begin(), sorted.end());
  std::sort(by_node.begin(), by_node.end());
  if (by_node.front().first == by_node.back().first) return;  // one node
  for (size_t begin = 0; begin < by_node.size();) {
    size_t end = begin;
    while (end < by_node.size() && by_node[end].first == by_node[begin].first) ++end;
    const size_t others = sorted.size() - (end - begin);
    if (others >= 2) {
      // The median's place among the others, moved past each of the node's own z's
      // that sort before it.
      size_t at = others / 2, skipped = 0;
      while (begin + skipped < end && by_node[begin + skipped].second <= sorted[at + skipped]) {
        ++skipped;
      }
      facts->off_node_z[{by_node[begin].first, key.first, key.second}] = sorted[at + skipped];
    }
    begin = end;
  }
}

// A group's rows ordered by one key of their steps (rank, node), in row order within a
// key, and their keys: RowsOfRank and RowsOfNode find a key's rows by binary search.
void AddKeyedRows(const DeviationMap& map, const std::vector<uint32_t>& rows, int32_t MapStep::*key,
                  std::vector<std::vector<uint32_t>>* rows_by_key,
                  std::vector<std::vector<int32_t>>* keys) {
  std::vector<uint32_t> sorted = rows;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [&](uint32_t a, uint32_t b) { return map.steps[a].*key < map.steps[b].*key; });
  std::vector<int32_t> sorted_keys;
  for (uint32_t row : sorted) sorted_keys.push_back(map.steps[row].*key);
  rows_by_key->push_back(std::move(sorted));
  keys->push_back(std::move(sorted_keys));
}

Groups GroupSteps(const DeviationMap& map, const CauseOptions& options) {
  std::map<int64_t, std::vector<uint32_t>> by_group;
  for (uint32_t row = 0; row < map.steps.size(); ++row) {
    by_group[map.steps[row].group].push_back(row);
  }
  Groups groups;
  for (auto& [id, rows] : by_group) {
    GroupFacts facts;
    facts.first_rank = map.ranks.empty() ? -1 : map.ranks.front();
    facts.one_rank = map.ranks.size() == 1;
    std::map<std::pair<Channel, OperatorFamily>, std::vector<double>> zs;
    std::map<std::pair<Channel, OperatorFamily>, std::vector<std::pair<int32_t, double>>> node_zs;
    for (uint32_t row : rows) {
      const MapStep& step = map.steps[row];
      for (uint32_t c = step.cells_begin; c < step.cells_end; ++c) {
        const Cell& cell = map.cells[c];
        zs[{cell.channel, cell.family}].push_back(cell.z());
        node_zs[{cell.channel, cell.family}].emplace_back(step.node, cell.z());
        for (int k = 0; k < kCauseKindCount; ++k) {
          const CauseKind kind = static_cast<CauseKind>(k);
          if (ScalesChannel(kind, cell.channel)) {
            facts.culprit_expected_ns[{step.rank, kind}] += cell.expected;
          }
        }
      }
    }
    for (auto& [key, values] : zs) {
      if (values.size() < options.min_common_ranks) continue;
      facts.common_z[key] = UpperMedian(&values);
    }
    for (auto& [key, by_node] : node_zs) AddOffNodeMedians(key, std::move(by_node), &facts);
    AddKeyedRows(map, rows, &MapStep::rank, &groups.rows_by_rank, &groups.ranks_by_rank);
    AddKeyedRows(map, rows, &MapStep::node, &groups.rows_by_node, &groups.nodes_by_node);
    model::StepPhase phase = map.steps[rows.front()].phase;
    for (uint32_t row : rows) {
      if (map.steps[row].phase != phase) phase = model::StepPhase::kUnknown;
    }
    groups.phases.push_back(phase);
    groups.ids.push_back(id);
    groups.rows.push_back(std::move(rows));
    groups.facts.push_back(std::move(facts));
  }
  SumWaitCells(map, options.cell_z_cap, options.contradiction_z, &groups);
  return groups;
}

// A cell's z as a cause of kind sees it: a rank's own cause sees it beyond what moved
// on most ranks of the same step (culprit cells only; victims are measured as they are).
// Unclipped: the caller clips.
double CauseZ(const Template& t, const Cell& cell, const Prediction& p, const GroupFacts& g) {
  // Collectives and gaps move on every rank when one rank is late: that is the wait,
  // not a common cause.
  const bool waits = cell.channel == Channel::kCollective || cell.channel == Channel::kStepGap;
  if (!IsRankCause(t.kind) || p.victim || waits) return cell.z();
  if (t.node >= 0) {
    auto off_node = g.off_node_z.find({t.node, cell.channel, cell.family});
    return off_node == g.off_node_z.end() ? cell.z() : cell.z() - std::max(0.0, off_node->second);
  }
  auto common = g.common_z.find({cell.channel, cell.family});
  if (common == g.common_z.end() || common->second <= 0.0) return cell.z();
  return cell.z() - common->second;
}

// Least-squares sums of a template over one group: S = sum z u, Q = sum u^2, with
// u the predicted excess per unit effect in units of the cell's noise.
struct Sums {
  double s = 0.0;
  double q = 0.0;
  double victim_s = 0.0;
  double victim_q = 0.0;
  // Shape of the culprit cells with unclipped z's: sum z u, sum z^2 and how many cells
  // measured something.
  double raw_s = 0.0;
  double raw_zz = 0.0;
  int cells = 0;
  // A cause that claims its peers' waits as its own mechanism (a straggler by_stall: an
  // idle rank is a straggler only when its peers wait for it) stands only as far as they
  // waited.
  bool needs_victims = false;
  // How well the pattern of what moved matches the pattern the cause predicts: the
  // cosine between the z's and the predictions, with each cell's unit of noise taken
  // out of the z's norm. A slow host that moved one range 100-fold and none of its calls
  // is not a host running slower; a GPU whose one family moved is not a slow GPU.
  double Shape() const {
    if (q <= 0.0 || raw_s <= 0.0) return 0.0;
    const double fitted = raw_s / std::sqrt(q);
    const double norm =
        std::max(raw_zz - static_cast<double>(std::max(cells - 1, 0)), fitted * fitted);
    return norm > 0.0 ? fitted / std::sqrt(norm) : 0.0;
  }
  // Evidence of the group: the culprit cells', plus the victims' up to as much again
  // (victims corroborate a cause; they never make one), at most cap, then weighed by
  // how well its shape fits (after the cap, so two strong causes differ by their fit).
  double Evidence(double cap) const {
    if (q <= 0.0) return 0.0;
    const double victim = victim_q > 0.0 ? victim_s / std::sqrt(victim_q) : 0.0;
    double culprit = s / std::sqrt(q);
    if (needs_victims) culprit = std::min(culprit, victim);
    if (culprit <= 0.0) return culprit;
    const double evidence = culprit + std::clamp(victim, 0.0, culprit);
    return std::min(evidence, cap) * Shape();
  }
};

// Whether one part's own effect (a rank's, a channel's: its sum z u and sum u^2) lies
// clearly below the common one, in its own noise, and below below_share of it. A rank
// that did not wait was the one late. A part whose cells are too noisy to show the effect
// (a pipeline stage that idles for milliseconds anyway) does not contradict it.
bool SomePartContradicts(const std::vector<std::pair<double, double>>& parts,
                         double contradiction_z, double below_share = 1.0) {
  double s = 0.0, q = 0.0;
  for (const auto& [part_s, part_q] : parts) s += part_s, q += part_q;
  if (q <= 0.0) return false;
  const double common = s / q;
  for (const auto& [part_s, part_q] : parts) {
    const double own = part_s / part_q;
    if ((common - own) * std::sqrt(part_q) > contradiction_z && own < below_share * common) {
      return true;
    }
  }
  return false;
}

// One culprit cell of a rank as a cause sees it: its unclipped z and its predicted
// excess per unit effect in units of its noise.
struct Term {
  double raw_z = 0.0;
  double u = 0.0;
  bool observed = false;  // measured something (not 0 against a baseline of 0)
  bool cpu_bound = false;  // the host's CPU time (SlowsWithTheCpu)
};

// Channels that are the host's CPU time: a slow or contended CPU stretches them alike.
// Copies and syncs wait on the device, not the CPU; a late rank's delay may sit in its
// collectives' launch calls.
bool SlowsWithTheCpu(Channel c) {
  return c == Channel::kFrontend || c == Channel::kBackend || c == Channel::kLaunch ||
         c == Channel::kRuntimeOther;
}

// A paused engine's idle time lands between steps (the gap before the step, and on a
// rank that runs an engine's loop its scheduler's range stretched: their sum, as the pause
// lands in one or the other) or inside one (a stall): on each rank the predicted cells
// count as one term, the place that moved more in its noise. Which ranks run a loop the
// map does not say: the first rank, and one that usually spends longer in its ranges than
// idle before its step (each data-parallel replica's first rank schedules while its
// workers wait). Whether a rank measured anything is its gap's say (a rank that never
// idles between steps says nothing of a pause), or the first rank's range.
Term MergedTerm(const std::vector<const Cell*>& cells, bool first_rank) {
  const Cell* gap = nullptr;
  const Cell* range = nullptr;
  Term inside{-std::numeric_limits<double>::infinity(), 0.0, false};
  for (const Cell* cell : cells) {
    if (cell->channel == Channel::kStall)
      inside = {cell->z(), 1.0 / cell->sigma, cell->value != 0.0 || cell->expected != 0.0};
    if (cell->channel == Channel::kStepGap) gap = cell;
    if (cell->channel == Channel::kFrontend) range = cell;
  }
  auto observed = [](const Cell* cell) {
    return cell != nullptr && (cell->value != 0.0 || cell->expected != 0.0);
  };
  const bool runs_loop =
      range != nullptr && (first_rank || (gap != nullptr && range->expected > gap->expected));
  double value = 0.0, expected = 0.0, variance = 0.0;
  for (const Cell* cell : {gap, runs_loop ? range : nullptr}) {
    if (cell == nullptr) continue;
    value += cell->value;
    expected += cell->expected;
    variance += cell->sigma * cell->sigma;
  }
  if (variance <= 0.0) return inside;
  const double sigma = std::sqrt(variance);
  const Term between{(value - expected) / sigma, 1.0 / sigma,
                     observed(gap) || (first_rank && observed(range))};
  return inside.raw_z > between.raw_z ? inside : between;
}

// When one of the terms `in_set` picks (its channels) lies clearly below the ratio the
// others say, the step's evidence from them is that term's alone; other terms stay.
template <typename InSet>
void KeepLeastTerm(double contradiction_z, InSet in_set, std::vector<Term>* terms) {
  std::vector<std::pair<double, double>> channel_raw;  // per observed channel: z u, u^2
  for (const Term& term : *terms) {
    if (in_set(term) && term.observed && term.u > 0.0)
      channel_raw.emplace_back(term.raw_z * term.u, term.u * term.u);
  }
  if (channel_raw.size() < 2 || !SomePartContradicts(channel_raw, contradiction_z)) return;
  const auto least =
      std::min_element(terms->begin(), terms->end(), [&](const Term& a, const Term& b) {
        const bool a_counts = in_set(a) && a.observed, b_counts = in_set(b) && b.observed;
        return a_counts && (!b_counts || a.raw_z < b.raw_z);
      });
  const Term kept = *least;
  std::erase_if(*terms, in_set);
  terms->push_back(kept);
}

// The victim sums of a straggler by_stall in group g: every peer waits for a rank that
// idles before its collectives (PredictVictim: half a nanosecond a nanosecond in each wait
// cell). A peer whose waits lie clearly below the others' (SomePartContradicts) waited
// for another rank, and the idle rank waited with it (a driver idle while a late worker
// holds everyone up): the victims' evidence is then the least waiting peer's.
void AddStallVictims(const Template& t, const Groups& groups, size_t g, Sums* sums) {
  const StallWaits& waits = groups.stall_waits[g];
  sums->needs_victims = true;
  const auto own = std::lower_bound(
      waits.parts.begin(), waits.parts.end(), t.rank,
      [](const StallWaits::Part& part, int32_t rank) { return part.rank < rank; });
  const bool has_own = own != waits.parts.end() && own->rank == t.rank;
  const size_t left_out = has_own ? static_cast<size_t>(own - waits.parts.begin()) : StallWaits::kNone;
  if (waits.parts.size() == (has_own ? 1u : 0u)) return;
  // The least part of the others by a measure: the least, or the second when it is t's.
  auto least = [&](const std::array<size_t, 2>& two) { return two[0] == left_out ? two[1] : two[0]; };
  const double s = waits.s - (has_own ? own->s : 0.0);
  const double q = waits.q - (has_own ? own->q : 0.0);
  const StallWaits::Part& lowest = waits.parts[least(waits.least_bound)];
  const bool contradicts =
      q > 0.0 && s / q > lowest.s / lowest.q + waits.contradiction_z / std::sqrt(lowest.q);
  if (contradicts) {
    const StallWaits::Part& part = waits.parts[least(waits.least_z)];
    sums->victim_s += part.s;
    sums->victim_q += part.q;
    return;
  }
  sums->victim_s += s;
  sums->victim_q += q;
}

// The victim sums of a rank's cause over the other ranks' waits in group g: what
// PredictVictim predicts there, from the group's wait sums less the rank's own.
void AddPeerWaits(const Template& t, const DeviationMap& map, const Groups& groups, size_t g,
                  double contradiction_z, Sums* sums) {
  if (!ReadsOnlyItsRank(t) || t.kind == CauseKind::kHostSlow) return;
  if (t.by_stall) {
    AddStallVictims(t, groups, g, sums);
    return;
  }
  // PredictVictim's weight on each wait cell.
  const auto culprit = groups.facts[g].culprit_expected_ns.find({t.rank, t.kind});
  if (culprit == groups.facts[g].culprit_expected_ns.end()) return;
  const double w = 0.5 * culprit->second;
  double z = groups.group_wait_z[g], u2 = groups.group_wait_u2[g];
  for (uint32_t row : groups.RowsOfRank(g, t.rank)) {
    z -= groups.wait_z[row], u2 -= groups.wait_u2[row];
  }
  sums->victim_s += w * z;
  sums->victim_q += w * w * std::max(u2, 0.0);
}

// The rows of group g where a template predicts anything itself: a rank's cause its
// rank's (the others' waits come from AddPeerWaits), a node's cause (its host, its
// links) its node's, the rest every row.
std::span<const uint32_t> RowsItReads(const Template& t, const Groups& groups, size_t g) {
  if (ReadsOnlyItsRank(t)) return groups.RowsOfRank(g, t.rank);
  if (t.node >= 0) return groups.RowsOfNode(g, t.node);
  return groups.rows[g];
}

Sums GroupSums(const Template& t, const DeviationMap& map, const Groups& groups, size_t g,
               const CauseOptions& options) {
  const double cap = options.cell_z_cap;
  Sums sums;
  double least_rank = std::numeric_limits<double>::infinity();
  size_t ranks = 0;
  std::vector<std::pair<double, double>> rank_raw;  // per observed rank: raw sum z u, sum u^2
  std::vector<Term> terms;
  std::vector<const Cell*> merged;
  const std::span<const uint32_t> rows = RowsItReads(t, groups, g);
  for (uint32_t row : rows) {
    const MapStep& step = map.steps[row];
    terms.clear();
    merged.clear();
    auto add_cell = [&](uint32_t c) {
      const Cell& cell = map.cells[c];
      const Prediction p = Predict(t, step, cell, groups.facts[g]);
      if (p.weight == 0.0) return;
      const double u = p.weight / cell.sigma;
      if (p.victim) {
        sums.victim_s += ClippedZ(cell, cap) * u;
        sums.victim_q += u * u;
      } else if (t.kind == CauseKind::kEnginePause) {
        merged.push_back(&cell);
      } else {
        terms.push_back({CauseZ(t, cell, p, groups.facts[g]), u,
                         cell.value != 0.0 || cell.expected != 0.0, SlowsWithTheCpu(cell.channel)});
      }
    };
    for (uint32_t c = step.cells_begin; c < step.cells_end; ++c) add_cell(c);
    const bool first_rank = step.rank == groups.facts[g].first_rank;
    if (!merged.empty()) terms.push_back(MergedTerm(merged, first_rank));
    // Slow launches slow every launch call alike: the driver does not know which library's
    // kernel it launches (only the collectives' launch calls growing is a rank that
    // reaches them late and waits inside the call). A slow host stretches every CPU
    // channel alike (only the launch calls growing is the driver's launch path).
    if (t.kind == CauseKind::kLaunchLatency) {
      KeepLeastTerm(options.contradiction_z, [](const Term&) { return true; }, &terms);
    }
    if (t.kind == CauseKind::kHostSlow || (t.kind == CauseKind::kStraggler && !t.by_stall)) {
      KeepLeastTerm(options.contradiction_z, [](const Term& term) { return term.cpu_bound; },
                    &terms);
    }
    double rank_s = 0.0, rank_q = 0.0, rank_raw_s = 0.0;
    bool observed = false;
    for (const Term& term : terms) {
      const double s_term = std::clamp(term.raw_z, -cap, cap) * term.u;
      sums.s += s_term;
      sums.q += term.u * term.u;
      rank_s += s_term, rank_q += term.u * term.u;
      if (!term.observed) continue;
      observed = true;
      rank_raw_s += term.raw_z * term.u;
      sums.raw_s += term.raw_z * term.u;
      sums.raw_zz += term.raw_z * term.raw_z;
      ++sums.cells;
    }
    // A rank whose predicted cells never measure anything (no gap is counted where no
    // request waits) says nothing about a cause of every rank.
    if (rank_q > 0.0 && observed) {
      least_rank = std::min(least_rank, rank_s / std::sqrt(rank_q));
      rank_raw.emplace_back(rank_raw_s, rank_q);
      ++ranks;
    }
  }
  AddPeerWaits(t, map, groups, g, options.contradiction_z, &sums);
  // A degraded link slows the collectives of every rank it carries, the ranks arriving
  // together, and a paused engine idles every GPU; when one rank's collectives or gaps
  // did not grow, that rank was the last to arrive (it is slow or late) and the others
  // waited for it. A kernel family slower on every rank (a library, a version, a shape
  // the deployment changed) runs slower on each of them: spikes on one or two ranks of a
  // step, the others as usual, are those ranks' own. The evidence is the least moved rank's.
  const bool every_rank = t.kind == CauseKind::kLinkDegraded ||
                          t.kind == CauseKind::kEnginePause || t.kind == CauseKind::kFamilySlow;
  if (every_rank && ranks > 0 && sums.q > 0.0 &&
      SomePartContradicts(rank_raw, options.contradiction_z)) {
    sums.s = std::min(sums.s, least_rank * std::sqrt(static_cast<double>(ranks) * sums.q));
  }
  return sums;
}

// The best window of per-group evidence. Its steps are found with each step's term
// capped at +-drift, so a window holds more strong steps than weak ones and scattered
// spikes (GC pauses) do not chain into one; its score is the evidence over the drift
// without its CauseOptions::trimmed_steps largest steps.
struct Window {
  size_t begin = 0, end = 0;  // [begin, end) of groups
  double score = 0.0;
  // Found over the groups of this phase alone (PhaseWindow); kUnknown: over every group.
  model::StepPhase phase = model::StepPhase::kUnknown;
};

// The segment of largest sum of per-group terms evidence - drift, each within +-drift.
Window MaxSegment(const std::vector<double>& evidence, double drift) {
  Window best;
  double best_sum = 0.0, sum = 0.0;
  size_t start = 0;
  for (size_t g = 0; g < evidence.size(); ++g) {
    const double term = std::clamp(evidence[g] - drift, -drift, drift);
    if (sum <= 0.0) {
      sum = 0.0;
      start = g;
    }
    sum += term;
    if (sum > best_sum) {
      best_sum = sum;
      best = {start, g + 1, 0.0};
    }
  }
  return best;
}

// Whether count < share x total, a count exactly at the share not below it (2 of 3 is
// not below two thirds, however 2/3 rounds).
bool BelowShare(size_t count, size_t total, double share) {
  return static_cast<double>(count) < share * static_cast<double>(total) * (1.0 - 1e-12);
}

// Ends before warm_up_share of the run: the steps after it are the run's normal.
bool IsWarmUp(const Window& w, size_t groups, const CauseOptions& options) {
  return BelowShare(w.end, groups, options.warm_up_share);
}

bool IsRegime(const Window& w, size_t groups, const CauseOptions& options) {
  return static_cast<double>(w.end - w.begin) > options.regime_share * static_cast<double>(groups);
}

// Whether the window's steps hold one level: their evidence spread less than a quarter
// of its median. A drift or a noisy stretch does not.
bool HoldsALevel(const Window& w, const std::vector<double>& evidence) {
  std::vector<double> inside(evidence.begin() + static_cast<std::ptrdiff_t>(w.begin),
                             evidence.begin() + static_cast<std::ptrdiff_t>(w.end));
  const auto [median, mad] = base::MedianAndMad(&inside);
  return median > 0.0 && base::SigmaOfMad(mad) <= 0.25 * median;
}

// Quiet steps before the window, which lasts to the run's end at one level: a fault that
// set in during the capture and was still running when it stopped, whatever share of the
// run it took. A drift or a noisy stretch chained from the start is not level.
bool HasOnset(const Window& w, const std::vector<double>& evidence) {
  return w.begin > 0 && w.end == evidence.size() && HoldsALevel(w, evidence);
}

// A short capture (fewer steps than the baselines need to tell a slow regime from normal
// and a spike from a regime: localize::ShiftOptions' min_normal + min_slow; over one
// phase's steps alone, fewer of that phase, whose baselines have as few), where every
// step of the window moved beyond the drift at one level: a fault over half of a
// six-step capture, not one or two steps that stand out.
bool IsLevelInShortCapture(const Window& w, const std::vector<double>& evidence, double drift) {
  const localize::ShiftOptions shift;
  if (evidence.size() >= shift.min_normal + shift.min_slow) return false;
  for (size_t g = w.begin; g < w.end; ++g) {
    if (evidence[g] <= drift) return false;
  }
  return HoldsALevel(w, evidence);
}

// Fewer than interleaved_moved_share of the window's steps moved: its strong steps
// alternate with quiet ones (two step bodies a capture alternates, one heavier every
// other step), which a fault that set in and lasted does not do.
bool IsInterleaved(const Window& w, const std::vector<double>& evidence,
                   const CauseOptions& options) {
  size_t moved = 0;
  for (size_t g = w.begin; g < w.end; ++g) moved += evidence[g] > options.drift;
  return BelowShare(moved, w.end - w.begin, options.interleaved_moved_share);
}

// Evidence that is random per call (launches that fail and are retried, some steps
// with failures beside clean ones), taken as its rate: the mean over a step and the two
// on each side. A healthy run has none of it, so a lone failure stays below the drift.
std::vector<double> RateOf(const std::vector<double>& evidence) {
  constexpr size_t kSide = 2;
  std::vector<double> rate(evidence.size(), 0.0);
  for (size_t g = 0; g < evidence.size(); ++g) {
    const size_t begin = g >= kSide ? g - kSide : 0;
    const size_t end = std::min(evidence.size(), g + kSide + 1);
    rate[g] = std::accumulate(evidence.begin() + static_cast<std::ptrdiff_t>(begin),
                              evidence.begin() + static_cast<std::ptrdiff_t>(end), 0.0) /
              static_cast<double>(2 * kSide + 1);
  }
  return rate;
}

Window BestWindow(const std::vector<double>& evidence, const CauseOptions& options);

// The window of intermittent evidence: found on its rate, from its first step beyond the
// drift to its last, each of its steps weighing the span's mean.
Window IntermittentWindow(const std::vector<double>& evidence, const CauseOptions& options) {
  const std::vector<double> rate = RateOf(evidence);
  const Window found = MaxSegment(rate, options.drift);
  Window span{found.end, found.begin, 0.0};
  for (size_t g = found.begin; g < found.end; ++g) {
    if (evidence[g] <= options.drift) continue;
    span.begin = std::min(span.begin, g);
    span.end = std::max(span.end, g + 1);
  }
  if (span.end <= span.begin) return {};
  const double mean = std::accumulate(evidence.begin() + static_cast<std::ptrdiff_t>(span.begin),
                                      evidence.begin() + static_cast<std::ptrdiff_t>(span.end),
                                      0.0) /
                      static_cast<double>(span.end - span.begin);
  std::vector<double> within(evidence.size(), 0.0);
  std::fill(within.begin() + static_cast<std::ptrdiff_t>(span.begin),
            within.begin() + static_cast<std::ptrdiff_t>(span.end), mean);
  return BestWindow(within, options);
}

Window BestWindow(const std::vector<double>& evidence, const CauseOptions& options) {
  Window best = MaxSegment(evidence, options.drift);
  if (best.end == best.begin) return best;
  // A window over most of the run may be a fault's strong steps chained to weaker ones
  // before its onset; with a larger drift only the strong steps stay.
  if (IsRegime(best, evidence.size(), options)) {
    const Window strong = MaxSegment(evidence, options.strong_drift_factor * options.drift);
    if (strong.end > strong.begin && !IsRegime(strong, evidence.size(), options)) best = strong;
  }
  std::vector<double> terms;
  for (size_t g = best.begin; g < best.end; ++g) {
    terms.push_back(std::clamp(evidence[g], options.step_evidence_floor, options.step_cap) -
                    options.drift);
  }
  std::sort(terms.begin(), terms.end());
  // What is left must be more than one step: three strong steps are a blip, but in a
  // short capture three steps at one level are half of it.
  const size_t trimmed = IsLevelInShortCapture(best, evidence, options.drift)
                             ? std::min<size_t>(options.trimmed_steps, 1)
                             : options.trimmed_steps;
  const size_t kept = terms.size() >= trimmed + 2 ? terms.size() - trimmed : 0;
  best.score = std::max(0.0, std::accumulate(terms.begin(), terms.begin() + kept, 0.0));
  // A window over most of the run is a regime (a rank's role, a workload phase), not
  // an incident, unless the steps before it show its onset.
  if (IsRegime(best, evidence.size(), options) && !HasOnset(best, evidence)) {
    best.score *= options.regime_discount;
  }
  if (IsInterleaved(best, evidence, options)) best.score *= options.interleaved_discount;
  // A window that opens the run and closes well before its end is the engine warming up
  // (first requests, lazy set-up, caches and pools growing), not an incident.
  if (best.begin == 0 && IsWarmUp(best, evidence.size(), options)) {
    best.score *= options.warm_up_discount;
  }
  return best;
}

// The effect of a template over its window: the least-squares fit of its groups' sums.
// A stall's or a pause's effect is its length: fitted on its unclipped z's, as the z cap
// bounds how much one cell weighs as evidence, not how long a stall was (a 12 ms sleep in
// steps that vary by 100 us is z 120).
double Effect(const Template& t, const Groups& groups, const Window& w,
              const std::vector<Sums>& sums) {
  const bool length = t.by_stall || t.kind == CauseKind::kEnginePause;
  double s = 0.0, q = 0.0;
  for (size_t g = w.begin; g < w.end; ++g) {
    if (w.phase != model::StepPhase::kUnknown && groups.phases[g] != w.phase) continue;
    s += length ? sums[g].raw_s : sums[g].s;
    q += sums[g].q;
  }
  return q > 0.0 ? s / q : 0.0;
}

// Explained share, cost and victims of a fitted template over its window (h->effect
// set): a pass over every cell of the window, so only for the causes a report shows.
void Measure(const Template& t, const DeviationMap& map, const Groups& groups, const Window& w,
             double cell_z_cap, Hypothesis* h) {
  const double theta = h->effect;
  double total = 0.0, explained = 0.0;
  std::map<int32_t, double> waits;
  std::vector<std::pair<double, uint32_t>> culprits, victims;
  for (size_t g = w.begin; g < w.end; ++g) {
    double job_value = 0.0, job_expected = 0.0, predicted = 0.0;
    std::map<int32_t, double> predicted_by_rank;
    for (uint32_t row : groups.rows[g]) {
      const MapStep& step = map.steps[row];
      for (uint32_t c = step.cells_begin; c < step.cells_end; ++c) {
        const Cell& cell = map.cells[c];
        if (cell.channel == Channel::kStepTime) {
          job_value = std::max(job_value, cell.value);
          job_expected = std::max(job_expected, cell.expected);
          continue;
        }
        const double z = ClippedZ(cell, cell_z_cap);
        total += std::max(z, 0.0) * std::max(z, 0.0);
        const Prediction p = Predict(t, step, cell, groups.facts[g]);
        if (p.weight == 0.0) continue;
        if (p.weight > 0.0) explained += std::max(z, 0.0) * std::max(z, 0.0);
        (p.victim ? victims : culprits).emplace_back(z, c);
        if (p.victim) {
          waits[step.rank] += cell.value - cell.expected;
        } else if (t.kind == CauseKind::kEnginePause) {
          // One pause a rank, in whichever of its cells it landed (MergedTerm).
          predicted_by_rank[step.rank] = std::max(predicted_by_rank[step.rank], theta * p.weight);
        } else {
          predicted_by_rank[step.rank] += theta * p.weight;
        }
      }
    }
    for (const auto& [rank, ns] : predicted_by_rank) predicted = std::max(predicted, ns);
    const double excess = std::max(0.0, job_value - job_expected);
    h->step_baseline_ns += job_expected;
    h->step_excess_ns += excess;
    // A pause idles every GPU and host: all of it is on the critical path, and what the
    // steps took beyond their baseline is its cost, up to the pause's own length (beyond
    // it the steps lost time to something else: on many ranks, the slowest rank's noise).
    predicted = std::max(predicted, 0.0);
    h->impact_ns += t.kind == CauseKind::kEnginePause ? std::min(excess, predicted) : predicted;
  }
  h->explained = total > 0.0 ? std::clamp(explained / total, 0.0, 1.0) : 0.0;
  for (const auto& [rank, wait] : waits) {
    if (wait <= 0.0) continue;
    h->victims.push_back(rank);
    h->victim_wait_ns += wait;
  }
  auto by_z = [](const auto& a, const auto& b) { return a.first > b.first; };
  std::sort(culprits.begin(), culprits.end(), by_z);
  std::sort(victims.begin(), victims.end(), by_z);
  for (const auto& entry : culprits) h->evidence.push_back(entry.second);
  for (const auto& entry : victims) h->evidence.push_back(entry.second);
}

// Launches fail at random: the retries show in the steps of their window where the rank's
// calls failed more than its baseline, not in every step between the first and the last.
void ListStepsWithFailures(const DeviationMap& map, const Groups& groups, const Window& w,
                           Hypothesis* h) {
  h->lists_abnormal_steps = true;
  for (size_t g = w.begin; g < w.end; ++g) {
    bool failed = false;
    for (uint32_t row : groups.RowsOfRank(g, h->rank)) {
      const MapStep& step = map.steps[row];
      for (uint32_t c = step.cells_begin; c < step.cells_end; ++c) {
        const Cell& cell = map.cells[c];
        failed |= cell.channel == Channel::kFailedCalls && cell.value >= cell.expected + 1.0;
      }
    }
    if (failed) h->abnormal_groups.push_back(groups.ids[g]);
  }
}

// A template's window, score and effect (Measure adds the rest); its window to *window.
// Slower launch calls show where a step launches kernel by kernel: an engine that replays
// CUDA graphs for its decode steps launches eagerly only in its prefill steps, a few among
// many. Over one phase's groups alone, such a fault's steps are contiguous; its window is
// the span of that phase's window, when it scores above the window over every group.
Window PhaseWindow(const Template& t, const Groups& groups, const std::vector<double>& evidence,
                   const CauseOptions& options, Window window) {
  if (t.kind != CauseKind::kLaunchLatency && t.kind != CauseKind::kHostSlow &&
      !(t.kind == CauseKind::kStraggler && !t.by_stall)) {
    return window;
  }
  for (const model::StepPhase phase : {model::StepPhase::kPrefill, model::StepPhase::kMixed,
                                       model::StepPhase::kDecode}) {
    std::vector<size_t> of_phase;
    std::vector<double> phase_evidence;
    for (size_t g = 0; g < evidence.size(); ++g) {
      if (groups.phases[g] != phase) continue;
      of_phase.push_back(g);
      phase_evidence.push_back(evidence[g]);
    }
    if (of_phase.size() == evidence.size()) continue;  // one phase: the window above
    const Window found = BestWindow(phase_evidence, options);
    if (found.end == found.begin || found.score <= window.score) continue;
    window = {of_phase[found.begin], of_phase[found.end - 1] + 1, found.score, phase};
  }
  return window;
}

Hypothesis Fit(const Template& t, const DeviationMap& map, const Groups& groups,
               const CauseOptions& options, Window* window_out) {
  std::vector<Sums> sums(groups.ids.size());
  std::vector<double> evidence(groups.ids.size(), 0.0);
  for (size_t g = 0; g < groups.ids.size(); ++g) {
    sums[g] = GroupSums(t, map, groups, g, options);
    evidence[g] = sums[g].Evidence(options.step_cap);
  }
  const Window window = t.kind == CauseKind::kLaunchRetry
                            ? IntermittentWindow(evidence, options)
                            : PhaseWindow(t, groups, evidence, options, BestWindow(evidence, options));
  Hypothesis h;
  h.kind = t.kind;
  h.rank = t.rank;
  h.family = t.family;
  h.node = t.node;
  if (t.node >= 0 && static_cast<size_t>(t.node) < map.node_names.size())
    h.node_name = map.node_names[t.node];
  h.additive = IsAdditive(t);
  h.by_transfer = t.by_transfer;
  h.by_stall = t.by_stall;
  h.host_only_job = !map.device_work;
  if (window.end == window.begin) return h;
  h.score = window.score;
  h.first_group = groups.ids[window.begin];
  h.last_group = groups.ids[window.end - 1];
  h.steps = static_cast<int64_t>(window.end - window.begin);
  h.since_ns = map.steps[groups.rows[window.begin].front()].start_ns;
  for (uint32_t row : groups.rows[window.begin]) {
    h.since_ns = std::min(h.since_ns, map.steps[row].start_ns);
  }
  h.effect = Effect(t, groups, window, sums);
  if (t.kind == CauseKind::kLaunchRetry) ListStepsWithFailures(map, groups, window, &h);
  *window_out = window;
  return h;
}

// The least effect a cause can have and be a fault. Healthy GPUs of one SKU differ by
// a few percent in their sustained clocks (the simulator draws each rank's speed within
// +-7%, sigma 2.5%): a GPU that much slower than its peers is the fleet's spread, not a
// throttle, however many steps make it significant.
double MinEffect(CauseKind kind, const CauseOptions& options) {
  return kind == CauseKind::kGpuSlow ? options.gpu_slow_min_effect : 0.0;
}

// Whether a cause slows one kind of the host's calls: launches, copies. A slower host
// (a straggler's) slows them with the rest of its work.
bool SlowsOneKindOfCall(CauseKind kind) {
  return kind == CauseKind::kLaunchLatency || kind == CauseKind::kCopyLatency;
}

// Calls visit(cell) for each cell of the rank's steps in the window's groups.
template <typename Visit>
void ForCellsOfRank(const DeviationMap& map, const Groups& groups, const Window& w, int32_t rank,
                    Visit visit) {
  for (size_t g = w.begin; g < w.end; ++g) {
    for (uint32_t row : groups.RowsOfRank(g, rank)) {
      const MapStep& step = map.steps[row];
      for (uint32_t c = step.cells_begin; c < step.cells_end; ++c) visit(map.cells[c]);
    }
  }
}

// How much slower the rest of the rank's host work ran over the cause's window than its
// baseline (ratio minus 1, the least-squares fit over its cells): the channels a slower
// host stretches that the cause does not predict. 0 unless the fit stands min_z standard
// errors above none.
double RestOfHostEffect(const DeviationMap& map, const Groups& groups, const Window& w,
                        const Hypothesis& h, double min_z) {
  double s = 0.0, q = 0.0;
  ForCellsOfRank(map, groups, w, h.rank, [&](const Cell& cell) {
    if (!ScalesChannel(CauseKind::kStraggler, cell.channel) ||
        ScalesChannel(h.kind, cell.channel) || cell.expected <= 0.0) {
      return;
    }
    const double u = cell.expected / cell.sigma;
    s += cell.z() * u;
    q += u * u;
  });
  return q > 0.0 && s >= min_z * std::sqrt(q) ? s / q : 0.0;
}

// Per compute family, the rank's sum z u and sum u^2 over the cause's window, each cell
// read against its reference level, level(cell) (u: that level over the cell's sigma, its
// predicted excess per unit effect); a cell without one (0 or below) is left out.
template <typename Level>
std::vector<std::pair<double, double>> FamilyEffects(const DeviationMap& map,
                                                     const Groups& groups, const Window& w,
                                                     int32_t rank, Level level) {
  std::map<OperatorFamily, std::pair<double, double>> by_family;
  ForCellsOfRank(map, groups, w, rank, [&](const Cell& cell) {
    if (cell.channel != Channel::kCompute) return;
    const double reference = level(cell);
    if (reference <= 0.0) return;
    const double u = reference / cell.sigma;
    by_family[cell.family].first += (cell.value - reference) / cell.sigma * u;
    by_family[cell.family].second += u * u;
  });
  std::vector<std::pair<double, double>> parts;
  for (const auto& [family, part] : by_family) parts.push_back(part);
  return parts;
}

// Per compute family and phase, the median of its values in the rank's steps outside the
// window: in a short capture mostly slow, a baseline may be the slow steps' own level, the
// steps beside the window are not.
std::map<std::pair<OperatorFamily, model::StepPhase>, double> LevelsOutside(
    const DeviationMap& map, const Groups& groups, const Window& w, int32_t rank) {
  std::map<std::pair<OperatorFamily, model::StepPhase>, std::vector<double>> values;
  for (size_t g = 0; g < groups.ids.size(); ++g) {
    if (g >= w.begin && g < w.end) continue;
    for (uint32_t row : groups.RowsOfRank(g, rank)) {
      const MapStep& step = map.steps[row];
      for (uint32_t c = step.cells_begin; c < step.cells_end; ++c) {
        const Cell& cell = map.cells[c];
        if (cell.channel == Channel::kCompute) values[{cell.family, step.phase}].push_back(cell.value);
      }
    }
  }
  std::map<std::pair<OperatorFamily, model::StepPhase>, double> levels;
  for (auto& [key, series] : values) levels[key] = base::MedianInPlace(&series);
  return levels;
}

// The rank's scored steps outside the window.
size_t StepsOutside(const Groups& groups, const Window& w, int32_t rank) {
  size_t outside = 0;
  for (size_t g = 0; g < groups.ids.size(); ++g) {
    if (g < w.begin || g >= w.end) outside += groups.RowsOfRank(g, rank).size();
  }
  return outside;
}

// A slower GPU (its clocks, a neighbour's kernels) slows every family it runs, the
// memory-bound ones less than the compute-bound. When one family, over the window, moved
// clearly less than min_share of the common slowdown, the others moved for their own
// reasons (a longer context's attention): the cause is scored by that family's share.
// Each family's move is read against its baseline where the rank has a baseline's worth of
// normal steps beside the window, else against those steps themselves (at least 2).
void DiscountUnmovedFamilies(const DeviationMap& map, const Groups& groups,
                             const std::vector<Window>& windows, const CauseOptions& options,
                             std::vector<Hypothesis>* fitted) {
  for (size_t i = 0; i < fitted->size(); ++i) {
    Hypothesis& h = (*fitted)[i];
    if (h.kind != CauseKind::kGpuSlow || h.score <= 0.0 || h.rank < 0) continue;
    const size_t outside = StepsOutside(groups, windows[i], h.rank);
    if (outside < 2) continue;
    std::vector<std::pair<double, double>> parts;
    if (outside >= options.gpu_family_min_normal_steps) {
      parts = FamilyEffects(map, groups, windows[i], h.rank,
                            [](const Cell& cell) { return cell.expected; });
    } else {
      const auto levels = LevelsOutside(map, groups, windows[i], h.rank);
      parts = FamilyEffects(map, groups, windows[i], h.rank, [&](const Cell& cell) {
        const auto found = levels.find({cell.family, map.steps[cell.step_row].phase});
        return found == levels.end() ? 0.0 : found->second;
      });
    }
    if (parts.size() < 2 ||
        !SomePartContradicts(parts, options.contradiction_z, options.gpu_least_family_share)) {
      continue;
    }
    double s = 0.0, q = 0.0, least = std::numeric_limits<double>::infinity();
    for (const auto& [part_s, part_q] : parts) {
      s += part_s, q += part_q;
      least = std::min(least, part_s / part_q);
    }
    h.score *= std::clamp(least / (s / q), 0.0, 1.0);
  }
}

// A cause of one kind of call is scored by the share of its effect beyond what the rest
// of the host's work shows: launches 1.40x slower on a host whose other work ran 1.43x
// slower are the host's, not the driver's.
void DiscountWithinTheHost(const DeviationMap& map, const Groups& groups,
                           const std::vector<Window>& windows, double min_z,
                           std::vector<Hypothesis>* fitted) {
  for (size_t i = 0; i < fitted->size(); ++i) {
    Hypothesis& h = (*fitted)[i];
    if (!SlowsOneKindOfCall(h.kind) || h.score <= 0.0 || h.effect <= 0.0 || h.rank < 0) continue;
    const double rest = RestOfHostEffect(map, groups, windows[i], h, min_z);
    if (rest > 0.0) h.score *= std::max(0.0, 1.0 - rest / h.effect);
  }
}

// Every template fitted, those that stand ranked best first, one per cause and place (the
// best of its templates); the first `measured` measured in full (a fleet of N ranks has
// some 8 N templates: measuring each would read every cell N times).
std::vector<Hypothesis> RankAll(const DeviationMap& map, const Groups& groups,
                                const CauseOptions& options, size_t measured) {
  const std::vector<Template> templates = Templates(map);
  std::vector<Hypothesis> fitted(templates.size());
  std::vector<Window> windows(templates.size());
  base::ParallelFor(templates.size(), options.threads, [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      fitted[i] = Fit(templates[i], map, groups, options, &windows[i]);
    }
  });
  DiscountWithinTheHost(map, groups, windows, options.contradiction_z, &fitted);
  DiscountUnmovedFamilies(map, groups, windows, options, &fitted);
  std::vector<size_t> order;
  for (size_t i = 0; i < fitted.size(); ++i) {
    if (fitted[i].score > 0.0 && fitted[i].effect > MinEffect(fitted[i].kind, options)) {
      order.push_back(i);
    }
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return fitted[a].score > fitted[b].score; });
  std::set<std::tuple<CauseKind, int32_t, OperatorFamily, int32_t>> places;
  std::vector<size_t> kept;
  for (size_t i : order) {
    const Hypothesis& h = fitted[i];
    if (places.insert({h.kind, h.rank, h.family, h.node}).second) kept.push_back(i);
  }
  order = std::move(kept);
  base::ParallelFor(
      std::min(measured, order.size()), options.threads, [&](size_t begin, size_t end) {
        for (size_t k = begin; k < end; ++k) {
          const size_t i = order[k];
          Measure(templates[i], map, groups, windows[i], options.cell_z_cap, &fitted[i]);
        }
      });
  std::vector<Hypothesis> ranked;
  for (size_t i : order) ranked.push_back(std::move(fitted[i]));
  return ranked;
}

// The map with the first cause's predicted excess taken out of its window's cells.
DeviationMap Residual(const DeviationMap& map, const Groups& groups, const Hypothesis& h) {
  DeviationMap residual = map;
  const Template t = TemplateOf(h);
  for (size_t g = 0; g < groups.ids.size(); ++g) {
    if (groups.ids[g] < h.first_group || groups.ids[g] > h.last_group) continue;
    for (uint32_t row : groups.rows[g]) {
      const MapStep& step = map.steps[row];
      for (uint32_t c = step.cells_begin; c < step.cells_end; ++c) {
        const Prediction p = Predict(t, step, map.cells[c], groups.facts[g]);
        if (p.weight != 0.0) residual.cells[c].value -= h.effect * p.weight;
      }
    }
  }
  return residual;
}

// A family slowdown that the first cause took with it (JoinCoMovingFamilies).
bool JoinedInto(const Hypothesis& h, const Hypothesis& first) {
  return h.kind == CauseKind::kFamilySlow &&
         std::find(first.also_families.begin(), first.also_families.end(), h.family) !=
             first.also_families.end();
}

// One cause at one place: a straggler late by stalls or by a slower host is one straggler.
bool SameCause(const Hypothesis& a, const Hypothesis& b) {
  return a.kind == b.kind && a.rank == b.rank && a.family == b.family && a.node == b.node;
}

}  // namespace

bool MovesAsCulprit(const Hypothesis& h, const MapStep& step, const Cell& cell) {
  const Template t = TemplateOf(h);
  const Prediction p = Predict(t, step, cell, GroupFacts{});
  return p.weight > 0.0 && !p.victim;
}

// The time a family's compute cells added over a window, on every rank.
double FamilyExcessNs(const DeviationMap& map, OperatorFamily family, int64_t first_group,
                      int64_t last_group) {
  double excess = 0.0;
  for (const MapStep& step : map.steps) {
    if (step.group < first_group || step.group > last_group) continue;
    for (uint32_t c = step.cells_begin; c < step.cells_end; ++c) {
      const Cell& cell = map.cells[c];
      if (cell.channel == Channel::kCompute && cell.family == family)
        excess += cell.value - cell.expected;
    }
  }
  return excess;
}

// Whether two family slowdowns are one: windows that mostly overlap, ratios that agree.
bool SlowedAlike(const Hypothesis& a, const Hypothesis& b, const CauseOptions& options) {
  if (a.kind != CauseKind::kFamilySlow || b.kind != CauseKind::kFamilySlow || a.rank != b.rank ||
      a.by_instance_peers || b.by_instance_peers) {
    return false;
  }
  const int64_t common =
      std::min(a.last_group, b.last_group) - std::max(a.first_group, b.first_group) + 1;
  const int64_t both =
      std::max(a.last_group, b.last_group) - std::min(a.first_group, b.first_group) + 1;
  if (common <= 0 || common < options.joined_family_window_overlap * static_cast<double>(both))
    return false;
  const double ratio = (1.0 + a.effect) / (1.0 + b.effect);
  return std::abs(ratio - 1.0) <= options.joined_family_ratio_tolerance;
}

// A kernel class that our families split (softmax beside attention, indexing and concat
// beside elementwise) slows as one: the first cause, a family slowdown, takes the families
// slowed alike with it (each itself above the verdict's threshold) and is named by the one
// whose kernels added the most time.
void JoinCoMovingFamilies(const DeviationMap& map, const CauseOptions& options,
                          std::vector<Hypothesis>* ranked) {
  if (ranked->empty() || (*ranked)[0].kind != CauseKind::kFamilySlow) return;
  Hypothesis& first = (*ranked)[0];
  // Every family is compared with the first cause as ranked, over its window, whichever
  // family leads once joined.
  Hypothesis anchor;
  anchor.kind = first.kind;
  anchor.rank = first.rank;
  anchor.first_group = first.first_group;
  anchor.last_group = first.last_group;
  anchor.effect = first.effect;
  anchor.by_instance_peers = first.by_instance_peers;
  std::optional<double> best_excess;  // read once a family joins: a pass over the map
  // Only the measured ones (RankAll): the joined family may lead the cause.
  size_t measured = std::min(ranked->size(), options.max_alternatives + 1);
  for (size_t i = 1; i < measured;) {
    Hypothesis& other = (*ranked)[i];
    if (other.score < options.min_score || !SlowedAlike(anchor, other, options)) {
      ++i;
      continue;
    }
    if (!best_excess)
      best_excess = FamilyExcessNs(map, first.family, anchor.first_group, anchor.last_group);
    const double excess = FamilyExcessNs(map, other.family, anchor.first_group, anchor.last_group);
    if (excess > *best_excess) {
      best_excess = excess;
      first.also_families.push_back(first.family);
      other.also_families = std::move(first.also_families);
      other.score = std::max(other.score, first.score);
      first = std::move(other);
    } else {
      first.also_families.push_back(other.family);
    }
    ranked->erase(ranked->begin() + static_cast<std::ptrdiff_t>(i));
    --measured;
  }
}

CauseAnalysis AnalyzeCauses(const DeviationMap& map, const CauseOptions& options) {
  CauseAnalysis analysis;
  analysis.scored_steps = static_cast<int64_t>(map.steps.size());
  const Groups groups = GroupSteps(map, options);
  analysis.ranked = RankAll(map, groups, options, options.max_alternatives + 1);
  JoinCoMovingFamilies(map, options, &analysis.ranked);
  analysis.degraded = !analysis.ranked.empty() && analysis.ranked[0].score >= options.min_score;
  if (!analysis.degraded) return analysis;
  // The residual's groups are its own: its z's, and so what moved on every rank, differ.
  const DeviationMap residual = Residual(map, groups, analysis.ranked[0]);
  // The second cause is the residual's best or, when that is the first again, its next.
  for (const Hypothesis& h : RankAll(residual, GroupSteps(residual, options), options, 2)) {
    if (h.score < options.min_score) break;
    if (SameCause(h, analysis.ranked[0]) || JoinedInto(h, analysis.ranked[0])) continue;
    analysis.has_second = true;
    analysis.second = h;
    break;
  }
  return analysis;
}

}  // namespace teller::cause
