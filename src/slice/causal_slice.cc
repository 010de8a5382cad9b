#include "slice/causal_slice.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "fmt/format.h"
#include "model/classify.h"

namespace teller::slice {
namespace {

constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
constexpr int32_t kNoRegion = -1;
// Relevance within this of kappa passes (sums of the weights are not exact).
constexpr double kSlack = 1e-9;

// Per-node flags of the step being sliced (scratch).
enum NodeFlag : uint8_t {
  kEligible = 1,
  kSuspect = 2,
  kDevice = 4,    // on a device track (stream)
  kComm = 8,      // communication: COMM layer, or a kernel with a collective name
  kCompute = 16,  // device kernel or copy that is not communication
};

// One node on its lane (thread or stream), sorted by (lane, start, node).
struct LaneItem {
  uint32_t lane;
  int64_t time_ns;
  uint32_t local;
  auto operator<=>(const LaneItem&) const = default;
};

// A matched collective event (horizontal view), sorted by (match, event).
struct MatchEntry {
  uint32_t match;
  uint32_t event;
  uint32_t node;  // kNone when the event is in no step
};

}  // namespace

struct Slicer::State {
  explicit State(const model::Trace& t) : trace(t) {}

  const model::Trace& trace;
  // Collective-name cache for kernels, by StringId: 0 unknown, 1 no, 2 yes.
  std::vector<uint8_t> comm_name;

  // Horizontal-view indexes, built on first use.
  bool matches_built = false;
  std::vector<MatchEntry> match_entries;
  std::vector<std::pair<uint32_t, uint32_t>> match_by_event;  // (event, entry), sorted

  // Scratch, indexed by the node's offset in the step ("local").
  std::vector<uint8_t> flags;
  std::vector<int64_t> start_ns;
  std::vector<int64_t> end_ns;
  std::vector<uint32_t> lane;  // thread or stream index; kNone when the event has none
  std::vector<double> score;
  std::vector<uint8_t> reasons;
  std::vector<double> temporal;  // the gamma term of each node
  std::vector<int8_t> ancestor_budget;
  std::vector<int32_t> region;
  std::vector<uint32_t> lane_pos;
  std::vector<int32_t> slice_index;
  std::vector<LaneItem> lane_items;
  std::vector<uint32_t> lane_offset;  // counting sort of lane_items by lane
  std::vector<LaneItem> suspect_ends;
  std::vector<LaneItem> suspect_starts;
  std::vector<std::pair<int64_t, uint32_t>> device_items;
  std::vector<uint8_t> region_suspect;  // per region: 1 compute suspect, 2 comm suspect
  std::vector<uint32_t> candidates;
  std::vector<std::tuple<int32_t, uint8_t, int32_t>> region_members;

  bool IsCommName(model::EventRow row);
  void BuildMatches();

  // The step being sliced: its nodes are [begin, end), n of them; scratch arrays are
  // indexed by node - begin.
  uint32_t begin = 0;
  uint32_t end = 0;
  uint32_t n = 0;

  bool InStep(model::NodeIndex node) const {
    return node.valid() && node.value() >= begin && node.value() < end;
  }
  uint32_t ParentLocal(uint32_t i) const {
    const model::NodeIndex p = trace.nodes.parent[begin + i];
    return InStep(p) ? p.value() - begin : kNone;
  }

  // The steps of SliceStep, in order; each reads what the ones before it left.
  base::Status MarkEligible(model::StepIndex step, const std::vector<model::NodeIndex>& suspects,
                            const std::vector<model::NodeIndex>& scope);
  int64_t GatherNodes();  // returns the number of eligible nodes
  void ScoreSuspectsAndStructure(const SliceOptions& options);
  void BuildLanes();
  void ScoreTemporal(const SliceOptions& options);
  void ScoreCommRegions(const SliceOptions& options);
  void MarkAncestors(const SliceOptions& options);
  void SelectKept(const SliceOptions& options);  // into candidates, by node
  void AddKeptNodes(const SliceOptions& options, StepSlice* out);
  void AddEdges(const SliceOptions& options, StepSlice* out);
  void AddPeers(model::StepIndex step, StepSlice* out);
};

bool Slicer::State::IsCommName(model::EventRow row) {
  const uint32_t id = trace.events.name[row.value()].value();
  if (id >= comm_name.size()) comm_name.resize(std::max<size_t>(id + 1, trace.strings.size()), 0);
  if (comm_name[id] == 0) {
    comm_name[id] =
        model::IsCollectiveKernelName(trace.str(trace.events.name[row.value()])) ? 2 : 1;
  }
  return comm_name[id] == 2;
}

void Slicer::State::BuildMatches() {
  matches_built = true;
  const model::CollectiveMatchTable& m = trace.collective_matches;
  match_entries.resize(m.size());
  for (size_t r = 0; r < m.size(); ++r) {
    match_entries[r] = {m.match[r].value(), m.event[r].value(), kNone};
  }
  std::sort(match_entries.begin(), match_entries.end(),
            [](const MatchEntry& a, const MatchEntry& b) {
              return std::tie(a.match, a.event) < std::tie(b.match, b.event);
            });
  match_by_event.resize(match_entries.size());
  for (size_t i = 0; i < match_entries.size(); ++i) {
    match_by_event[i] = {match_entries[i].event, static_cast<uint32_t>(i)};
  }
  std::sort(match_by_event.begin(), match_by_event.end());
  // Nodes of matched events: a bitmap skips the other nodes without a search.
  std::vector<bool> matched(trace.events.size(), false);
  for (const MatchEntry& e : match_entries) {
    if (e.event < matched.size()) matched[e.event] = true;
  }
  for (uint32_t n = 0; n < trace.nodes.size(); ++n) {
    const uint32_t ev = trace.nodes.event[n].value();
    if (ev >= matched.size() || !matched[ev]) continue;
    auto it = std::lower_bound(match_by_event.begin(), match_by_event.end(),
                               std::make_pair(ev, uint32_t{0}));
    for (; it != match_by_event.end() && it->first == ev; ++it) match_entries[it->second].node = n;
  }
}

Slicer::Slicer(const model::Trace& trace) : state_(std::make_unique<State>(trace)) {}
Slicer::~Slicer() = default;

base::Status Slicer::State::MarkEligible(model::StepIndex step,
                                         const std::vector<model::NodeIndex>& suspects,
                                         const std::vector<model::NodeIndex>& scope) {
  // Eligible nodes V and suspects I_s.
  flags.assign(n, scope.empty() ? kEligible : 0);
  for (model::NodeIndex node : scope) {
    if (!InStep(node)) {
      return base::InvalidArgument("slice: scope node {} is not in step {} (nodes [{}, {}))",
                                   node.value(), step.value(), begin, end);
    }
    flags[node.value() - begin] |= kEligible;
  }
  for (model::NodeIndex node : suspects) {
    if (!InStep(node)) {
      return base::InvalidArgument("slice: suspect node {} is not in step {} (nodes [{}, {}))",
                                   node.value(), step.value(), begin, end);
    }
    flags[node.value() - begin] |= kEligible | kSuspect;
  }
  return base::OkStatus();
}

int64_t Slicer::State::GatherNodes() {
  // Node kinds, times and lanes, gathered once into flat arrays.
  int64_t eligible_count = 0;
  const model::EventTable& events = trace.events;
  const model::NodeTable& nodes = trace.nodes;
  start_ns.assign(n, 0);
  end_ns.assign(n, 0);
  lane.assign(n, kNone);
  for (uint32_t i = 0; i < n; ++i) {
    if (!(flags[i] & kEligible)) continue;
    ++eligible_count;
    const model::EventRow ev = nodes.event[begin + i];
    const model::ThreadIndex thread = events.thread[ev.value()];
    start_ns[i] = events.start_ns[ev.value()];
    end_ns[i] = start_ns[i] + events.dur_ns[ev.value()];
    lane[i] = thread.valid() ? thread.value() : kNone;
    const bool device = thread.valid() && thread.value() < trace.threads.size() &&
                        trace.threads.is_device[thread.value()];
    const model::Layer layer = events.layer[ev.value()];
    // Kernels and backend ops with collective names (nccl:all_reduce, c10d::allreduce_)
    // are communication too; importers may have left them K / BE.
    const bool comm = layer == model::Layer::kComm ||
                      ((layer == model::Layer::kK || layer == model::Layer::kBe) && IsCommName(ev));
    if (device) flags[i] |= kDevice;
    if (comm) flags[i] |= kComm;
    if (device && !comm && (layer == model::Layer::kK || layer == model::Layer::kMem)) {
      flags[i] |= kCompute;
    }
  }
  return eligible_count;
}

void Slicer::State::ScoreSuspectsAndStructure(const SliceOptions& options) {
  score.assign(n, 0.0);
  reasons.assign(n, 0);
  for (uint32_t i = 0; i < n; ++i) {
    if (flags[i] & kSuspect) {
      score[i] += options.alpha;
      reasons[i] |= kReasonSuspect;
    }
  }

  // E_p: parents and children of suspects.
  for (uint32_t i = 0; i < n; ++i) {
    if (!(flags[i] & kEligible)) continue;
    const uint32_t p = ParentLocal(i);
    if (p == kNone || !(flags[p] & kEligible)) continue;
    if ((flags[p] & kSuspect) && !(reasons[i] & kReasonStructural)) {
      reasons[i] |= kReasonStructural;
      score[i] += options.beta;
    }
    if ((flags[i] & kSuspect) && !(reasons[p] & kReasonStructural)) {
      reasons[p] |= kReasonStructural;
      score[p] += options.beta;
    }
  }
}

void Slicer::State::BuildLanes() {
  // Lanes: eligible nodes by (lane, start, node); suspects by end and by start.
  // Bucketed by lane with a counting pass; pre-order is start order on a host thread and
  // launch order on a stream, so most lanes need no sort at all.
  const size_t lane_slots = trace.threads.size() + 1;  // last slot: no thread
  auto slot = [&](uint32_t lane) { return lane == kNone ? lane_slots - 1 : size_t{lane}; };
  lane_offset.assign(lane_slots + 1, 0);
  suspect_ends.clear();
  suspect_starts.clear();
  for (uint32_t i = 0; i < n; ++i) {
    if (!(flags[i] & kEligible)) continue;
    ++lane_offset[slot(lane[i]) + 1];
    if (flags[i] & kSuspect) {
      suspect_ends.push_back({lane[i], end_ns[i], i});
      suspect_starts.push_back({lane[i], start_ns[i], i});
    }
  }
  for (size_t l = 0; l < lane_slots; ++l) lane_offset[l + 1] += lane_offset[l];
  lane_items.resize(lane_offset[lane_slots]);
  for (uint32_t i = 0; i < n; ++i) {
    if (!(flags[i] & kEligible)) continue;
    lane_items[lane_offset[slot(lane[i])]++] = {lane[i], start_ns[i], i};
  }
  // lane_offset[l] is now the end of lane l, the start of lane l + 1.
  for (size_t l = 0, first = 0; l < lane_slots; first = lane_offset[l++]) {
    auto a = lane_items.begin() + first, b = lane_items.begin() + lane_offset[l];
    if (!std::is_sorted(a, b)) std::sort(a, b);
  }
  std::sort(suspect_ends.begin(), suspect_ends.end());
  std::sort(suspect_starts.begin(), suspect_starts.end());
  lane_pos.assign(n, kNone);
  for (uint32_t p = 0; p < lane_items.size(); ++p) lane_pos[lane_items[p].local] = p;
}

void Slicer::State::ScoreTemporal(const SliceOptions& options) {
  // Temporal term: the nearest suspect on the same lane that ends before v starts or
  // starts after v ends (nested nodes are E_p / Anc_h context, not succession).
  temporal.assign(n, 0.0);
  if (!suspect_ends.empty()) {
    for (const LaneItem& item : lane_items) {
      const uint32_t i = item.local;
      const uint32_t item_lane = item.lane;
      const int64_t s = item.time_ns, e = end_ns[i];
      int64_t gap = std::numeric_limits<int64_t>::max();
      // Last suspect with (lane, end) <= (lane, s); skip v itself (zero duration).
      auto it =
          std::upper_bound(suspect_ends.begin(), suspect_ends.end(), LaneItem{item_lane, s, kNone});
      while (it != suspect_ends.begin()) {
        --it;
        if (it->lane != item_lane) break;
        if (it->local == i) continue;
        gap = std::min(gap, s - it->time_ns);
        break;
      }
      auto jt =
          std::lower_bound(suspect_starts.begin(), suspect_starts.end(), LaneItem{item_lane, e, 0});
      for (; jt != suspect_starts.end() && jt->lane == item_lane; ++jt) {
        if (jt->local == i) continue;
        gap = std::min(gap, jt->time_ns - e);
        break;
      }
      if (gap > options.temporal_window_ns) continue;
      const double decay =
          options.tau0_ns > 0 ? std::exp(-double(gap) / double(options.tau0_ns)) : gap == 0;
      temporal[i] = options.gamma * decay;
      score[i] += temporal[i];
    }
  }
}

void Slicer::State::ScoreCommRegions(const SliceOptions& options) {
  // E_c regions: device work of the step by start; each collective owns the compute
  // nodes (at most comm_region_nodes) since the previous collective. A host
  // communication record takes the region of its first device collective.
  region.assign(n, kNoRegion);
  device_items.clear();
  for (uint32_t i = 0; i < n; ++i) {
    if ((flags[i] & kEligible) && (flags[i] & kDevice) && (flags[i] & (kComm | kCompute))) {
      device_items.push_back({start_ns[i], i});
    }
  }
  if (!std::is_sorted(device_items.begin(), device_items.end())) {
    std::sort(device_items.begin(), device_items.end());
  }
  int32_t region_count = 0;
  {
    const size_t cap = static_cast<size_t>(std::max(options.comm_region_nodes, 0));
    size_t after_comm = 0;  // first position after the previous collective
    for (size_t p = 0; p < device_items.size(); ++p) {
      const uint32_t i = device_items[p].second;
      if (!(flags[i] & kComm)) continue;
      const int32_t r = region_count++;
      region[i] = r;
      const size_t first = std::max(after_comm, p >= cap ? p - cap : size_t{0});
      for (size_t q = first; q < p; ++q) region[device_items[q].second] = r;
      after_comm = p + 1;
      for (uint32_t a = ParentLocal(i); a != kNone; a = ParentLocal(a)) {
        if ((flags[a] & kEligible) && (flags[a] & kComm) && !(flags[a] & kDevice) &&
            region[a] == kNoRegion) {
          region[a] = r;
        }
      }
    }
  }
  region_suspect.assign(region_count, 0);
  for (uint32_t i = 0; i < n; ++i) {
    if (!(flags[i] & kSuspect) || region[i] == kNoRegion) continue;
    region_suspect[region[i]] |= (flags[i] & kComm) ? 2 : 1;
  }
  for (uint32_t i = 0; i < n; ++i) {
    if (region[i] == kNoRegion) continue;
    const uint8_t want = (flags[i] & kComm) ? 1 : 2;  // the other side of E_c
    if (region_suspect[region[i]] & want) {
      reasons[i] |= kReasonComm;
      score[i] += options.eta;
    }
  }
}

void Slicer::State::MarkAncestors(const SliceOptions& options) {
  // Anc_h(I_s): walk up at most ancestor_depth levels; stop where a walk with as
  // many levels left has been.
  ancestor_budget.assign(n, -1);
  for (uint32_t i = 0; i < n; ++i) {
    if (!(flags[i] & kSuspect)) continue;
    int left = options.ancestor_depth;
    for (uint32_t a = ParentLocal(i); a != kNone && left > 0; a = ParentLocal(a)) {
      --left;
      if (ancestor_budget[a] >= left) break;
      ancestor_budget[a] = static_cast<int8_t>(std::min(left, 127));
      reasons[a] |= kReasonAncestor;
    }
  }
}

void Slicer::State::SelectKept(const SliceOptions& options) {
  // Kept: R >= kappa among eligible nodes, suspects, Anc_h.
  std::vector<uint32_t>& kept = candidates;
  kept.clear();
  size_t forced = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const bool passes = (flags[i] & kEligible) && score[i] + kSlack >= options.kappa;
    // Temporal: the gamma term reaches kappa alone, or the other terms need it.
    if (passes && temporal[i] > 0 &&
        (temporal[i] + kSlack >= options.kappa ||
         score[i] - temporal[i] + kSlack < options.kappa)) {
      reasons[i] |= kReasonTemporal;
    }
    if (!passes && !(reasons[i] & kReasonAncestor) && !(flags[i] & kSuspect)) continue;
    kept.push_back(i);
    if (flags[i] & kSuspect) ++forced;
  }
  if (options.max_nodes > 0 && kept.size() > options.max_nodes) {
    // Lowest relevance goes first (later nodes first among ties); never a suspect.
    auto before = [&](uint32_t a, uint32_t b) {
      const bool sa = flags[a] & kSuspect, sb = flags[b] & kSuspect;
      if (sa != sb) return sa;
      if (score[a] != score[b]) return score[a] > score[b];
      return a < b;
    };
    const size_t keep = std::max(options.max_nodes, forced);
    std::nth_element(kept.begin(), kept.begin() + keep, kept.end(), before);
    kept.resize(keep);
    std::sort(kept.begin(), kept.end());
  }
}

void Slicer::State::AddKeptNodes(const SliceOptions& options, StepSlice* out) {
  out->nodes.reserve(candidates.size());
  out->relevance.reserve(candidates.size());
  out->reasons.reserve(candidates.size());
  std::vector<int32_t>& index = slice_index;
  index.assign(n, -1);
  for (uint32_t i : candidates) {
    index[i] = static_cast<int32_t>(out->nodes.size());
    out->nodes.push_back(model::NodeIndex(begin + i));
    out->relevance.push_back(static_cast<float>(score[i]));
    // Reasons of terms that did not make the node pass are not reported.
    uint8_t r = reasons[i];
    if (!((flags[i] & kEligible) && score[i] + kSlack >= options.kappa)) {
      r &= kReasonSuspect | kReasonAncestor;
    }
    out->reasons.push_back(r);
  }
}

void Slicer::State::AddEdges(const SliceOptions& options, StepSlice* out) {
  for (uint32_t i : candidates) {
    const uint32_t p = ParentLocal(i);
    if (p != kNone && slice_index[p] >= 0) {
      out->edges.parent_child.push_back({slice_index[p], slice_index[i]});
    }
  }
  for (uint32_t u : candidates) {
    const uint32_t pos = lane_pos[u];
    if (pos == kNone) continue;  // not eligible (an ancestor outside the scope)
    const uint32_t u_lane = lane_items[pos].lane;
    const int64_t e = end_ns[u];
    // Next node(s) on the lane that start at or after u ends, within the window.
    auto it =
        std::lower_bound(lane_items.begin() + pos + 1, lane_items.end(), LaneItem{u_lane, e, 0});
    if (it == lane_items.end() || it->lane != u_lane ||
        it->time_ns - e > options.temporal_window_ns) {
      continue;
    }
    const int64_t next_start = it->time_ns;
    for (; it != lane_items.end() && it->lane == u_lane && it->time_ns == next_start; ++it) {
      if (slice_index[it->local] >= 0) {
        out->edges.temporal.push_back({slice_index[u], slice_index[it->local]});
      }
    }
  }
  {
    auto& members = region_members;  // (region, is_comm, slice index)
    members.clear();
    for (uint32_t i : candidates) {
      if (region[i] != kNoRegion && (flags[i] & kEligible)) {
        members.push_back({region[i], (flags[i] & kComm) ? 1 : 0, slice_index[i]});
      }
    }
    std::sort(members.begin(), members.end());
    for (size_t a = 0; a < members.size();) {
      size_t b = a;
      while (b < members.size() && std::get<0>(members[b]) == std::get<0>(members[a])) ++b;
      size_t first_comm = a;
      while (first_comm < b && std::get<1>(members[first_comm]) == 0) ++first_comm;
      for (size_t c = a; c < first_comm; ++c) {
        for (size_t k = first_comm; k < b; ++k) {
          out->edges.comm.push_back({std::get<2>(members[c]), std::get<2>(members[k])});
        }
      }
      a = b;
    }
    std::sort(out->edges.comm.begin(), out->edges.comm.end());
  }
}

void Slicer::State::AddPeers(model::StepIndex step, StepSlice* out) {
  if (!matches_built) BuildMatches();
  const model::EventTable& events = trace.events;
  const model::NodeTable& nodes = trace.nodes;
  const model::ProcessIndex own = trace.steps.process[step.value()];
  for (uint32_t i : candidates) {
    if (!(flags[i] & kComm) || !(out->reasons[slice_index[i]] & (kReasonSuspect | kReasonComm))) {
      continue;
    }
    const uint32_t ev = nodes.event[begin + i].value();
    auto it = std::lower_bound(match_by_event.begin(), match_by_event.end(),
                               std::make_pair(ev, uint32_t{0}));
    if (it == match_by_event.end() || it->first != ev) continue;
    const uint32_t match = match_entries[it->second].match;
    auto group =
        std::lower_bound(match_entries.begin(), match_entries.end(), match,
                         [](const MatchEntry& entry, uint32_t m) { return entry.match < m; });
    for (; group != match_entries.end() && group->match == match; ++group) {
      if (group->node == kNone || events.process[group->event] == own) continue;
      out->peer_nodes.push_back(model::NodeIndex(group->node));
    }
  }
  std::sort(out->peer_nodes.begin(), out->peer_nodes.end());
  out->peer_nodes.erase(std::unique(out->peer_nodes.begin(), out->peer_nodes.end()),
                        out->peer_nodes.end());
}

base::StatusOr<StepSlice> Slicer::SliceStep(model::StepIndex step,
                                            const std::vector<model::NodeIndex>& suspects,
                                            const std::vector<model::NodeIndex>& scope,
                                            const SliceOptions& options) {
  State& st = *state_;
  const model::Trace& trace = st.trace;
  if (!step.valid() || step.value() >= trace.steps.size()) {
    return base::InvalidArgument("slice: step {} out of range ({} steps)", step.value(),
                                 trace.steps.size());
  }
  const uint32_t begin = trace.steps.node_begin[step.value()].value();
  const uint32_t end = trace.steps.node_end[step.value()].value();
  if (end < begin || end > trace.nodes.size()) {
    return base::InvalidArgument("slice: step {} has node range [{}, {}) outside {} nodes",
                                 step.value(), begin, end, trace.nodes.size());
  }
  st.begin = begin;
  st.end = end;
  st.n = end - begin;
  TELLER_RETURN_IF_ERROR(st.MarkEligible(step, suspects, scope));
  const int64_t eligible_count = st.GatherNodes();
  st.ScoreSuspectsAndStructure(options);
  st.BuildLanes();
  st.ScoreTemporal(options);
  st.ScoreCommRegions(options);
  st.MarkAncestors(options);
  st.SelectKept(options);

  StepSlice out;
  out.step = step;
  out.step_nodes = eligible_count;
  out.step_dur_ns = trace.steps.end_ns[step.value()] - trace.steps.start_ns[step.value()];
  st.AddKeptNodes(options, &out);
  st.AddEdges(options, &out);
  if (options.horizontal) st.AddPeers(step, &out);
  return out;
}

base::StatusOr<StepSlice> SliceStep(const model::Trace& trace, model::StepIndex step,
                                    const std::vector<model::NodeIndex>& suspects,
                                    const std::vector<model::NodeIndex>& scope,
                                    const SliceOptions& options) {
  Slicer slicer(trace);
  return slicer.SliceStep(step, suspects, scope, options);
}

std::vector<model::NodeIndex> ParentClosure(const model::Trace& trace, const StepSlice& slice) {
  std::vector<model::NodeIndex> out;
  if (!slice.step.valid() || slice.step.value() >= trace.steps.size()) return out;
  const uint32_t begin = trace.steps.node_begin[slice.step.value()].value();
  const uint32_t end = trace.steps.node_end[slice.step.value()].value();
  std::vector<uint8_t> in(end > begin ? end - begin : 0, 0);
  for (model::NodeIndex node : slice.nodes) {
    if (node.value() < begin || node.value() >= end) continue;
    // Mark up to the first marked ancestor: each node is walked once.
    for (uint32_t i = node.value(); i >= begin && i < end && !in[i - begin];) {
      in[i - begin] = 1;
      const model::NodeIndex p = trace.nodes.parent[i];
      if (!p.valid()) break;
      i = p.value();
    }
  }
  for (uint32_t i = 0; i < in.size(); ++i) {
    if (in[i]) out.push_back(model::NodeIndex(begin + i));
  }
  return out;
}

SliceSize MeasureSlice(const model::Trace& trace, const StepSlice& slice) {
  SliceSize size;
  size.slice_nodes = static_cast<int64_t>(slice.nodes.size());
  size.step_nodes = slice.step_nodes;
  size.step_dur_ns = slice.step_dur_ns;
  size.peer_nodes = static_cast<int64_t>(slice.peer_nodes.size());
  int64_t first = std::numeric_limits<int64_t>::max(), last = std::numeric_limits<int64_t>::min();
  for (size_t k = 0; k < slice.nodes.size(); ++k) {
    if (slice.reasons[k] & kReasonSuspect) ++size.suspects;
    if (slice.reasons[k] == kReasonAncestor) continue;  // context only: spans the step
    const uint32_t ev = trace.nodes.event[slice.nodes[k].value()].value();
    first = std::min(first, trace.events.start_ns[ev]);
    last = std::max(last, trace.events.start_ns[ev] + trace.events.dur_ns[ev]);
  }
  size.slice_span_ns = last >= first ? last - first : 0;
  return size;
}

std::string FormatSliceSize(const SliceSize& size) {
  return fmt::format(
      "{}/{} nodes ({:.1f}%), span {:.2f}/{:.2f} ms ({:.1f}%), {} suspects, {} peers",
      size.slice_nodes, size.step_nodes, 100.0 * size.NodeShare(), size.slice_span_ns / 1e6,
      size.step_dur_ns / 1e6, 100.0 * size.SpanShare(), size.suspects, size.peer_nodes);
}

}  // namespace teller::slice
