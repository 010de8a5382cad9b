#include "cause/step_replay.h"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>

#include "base/parallel_for.h"

namespace teller::cause {

namespace {

// Host calls that return only when the device has finished (synchronizations,
// synchronous copies).
bool WaitsForDevice(Channel channel) {
  return channel == Channel::kSync || channel == Channel::kHostCopy;
}

constexpr double kNever = -std::numeric_limits<double>::max();

struct Clock {
  double measured = 0.0;
  double replayed = 0.0;
};

}  // namespace

bool StepReplay::Point::operator<(const Point& o) const {
  return std::tie(t, is_start, neg_depth, node) < std::tie(o.t, o.is_start, o.neg_depth, o.node);
}

StepReplay::StepReplay(const model::Trace& trace, const localize::StepFeatures& features,
                       const CauseOptions& options)
    : trace_(&trace),
      node_cells_(NodeCells(trace, features)),
      match_of_event_(CollectiveMatchOfEvents(trace)),
      options_(options) {}

StepReplay::StepReplay(const ReplayGraph& graph, const CauseOptions& options)
    : graph_(&graph), options_(options) {}

ReplayGraph StepReplay::GroupGraph(int64_t group) const {
  if (graph_ != nullptr) return CutGroup(*graph_, group);
  return CutReplayGraph(*trace_, node_cells_, match_of_event_, {group});
}

// One group's replay: the replayed clocks of the nodes reached so far. Per node of the
// group's graph, per thread and per process, absent until reached.
struct StepReplay::State {
  State(const StepReplay& r, const PreparedGroup& g, const Cut& c, const Cut& s)
      : replay(r),
        group(g),
        graph(g.graph),
        cut(c),
        stall_cut(s),
        start_of(g.graph.nodes.size()),
        host_lead(g.graph.threads.size(), 0.0),
        open_host(g.graph.threads.size()),
        last_point(g.graph.threads.size()),
        stream_end(g.graph.threads.size()),
        thread_end(g.graph.threads.size()),
        device_end(g.graph.processes),
        device_end_stream(g.graph.processes, UINT32_MAX),
        device_other_end(g.graph.processes),
        work_end(g.graph.processes) {}
  const StepReplay& replay;
  const CauseOptions& options() const { return replay.options(); }
  const PreparedGroup& group;
  const ReplayGraph& graph;
  const Cut& cut;
  const Cut& stall_cut;
  std::vector<std::optional<Clock>> start_of;     // per node
  std::vector<double> host_lead;                  // per host thread: measured - replayed
  std::vector<std::vector<uint32_t>> open_host;   // per host thread: its open nodes, innermost last
  std::vector<std::optional<double>> last_point;  // per host thread: its last start or end
  std::vector<std::optional<Clock>> stream_end;   // per stream: its last kernel's end
  std::vector<std::optional<Clock>> thread_end;   // per host thread: its last end
  std::vector<std::optional<Clock>> device_end;   // per process: its device's last end
  // Per process: the stream of its device's last end, and the last end on another stream.
  std::vector<uint32_t> device_end_stream;
  std::vector<std::optional<Clock>> device_other_end;
  std::vector<std::optional<Clock>> work_end;  // per process: its last end of work
  // The latest end of work on any thread, and the latest on a thread other than its.
  Clock last_end{kNever, kNever}, last_other_end{kNever, kNever};
  uint32_t last_end_thread = UINT32_MAX;
  // Per match, over the members started so far: their latest arrival, measured and
  // replayed, and their largest cut (kept as they start: a collective of k members is read
  // at each member's end, k times).
  struct Arrivals {
    double measured = 0.0, replayed = 0.0, cut = 0.0;
  };
  std::unordered_map<int32_t, Arrivals> arrivals;

  uint32_t thread(uint32_t n) const { return graph.nodes.thread[n]; }
  uint32_t process(uint32_t n) const { return graph.threads.process[thread(n)]; }
  bool IsDevice(uint32_t n) const { return graph.threads.is_device[thread(n)] != 0; }
  Channel channel(uint32_t n) const { return graph.nodes.cell[n].channel; }

  double Share(const Cut& of, uint32_t i) const {
    return of ? std::clamp(of(i), 0.0, options().replay_max_cut) : 0.0;
  }
  bool IsRange(uint32_t n) const {
    return channel(n) == Channel::kFrontend || channel(n) == Channel::kBackend;
  }

  void Start(uint32_t n, double t) {
    if (!IsDevice(n)) {
      const bool stall_cut_before = CutStretch(n, t);
      start_of[n] = Clock{t, HostStart(n, t, stall_cut_before)};
      open_host[thread(n)].push_back(n);
    } else {
      start_of[n] = Clock{t, KernelStart(n, t)};
    }
    const int32_t match = graph.nodes.match[n];
    if (match < 0) return;
    Arrivals& arrived = arrivals[match];
    arrived.measured = std::max(arrived.measured, start_of[n]->measured);
    arrived.replayed = std::max(arrived.replayed, start_of[n]->replayed);
    arrived.cut = std::max(arrived.cut, Share(cut, n));
  }

  // The host thread's stretch since its last start or end is the own time of its innermost
  // open range, and may hold part of its step's longest stall: a cut of either is taken
  // there, so what follows on the thread moves earlier (a sleep at the start of a step
  // range moves every child after it). Whether a cut stall lay in the stretch.
  bool CutStretch(uint32_t n, double t) {
    const uint32_t th = thread(n);
    std::optional<double>& last = last_point[th];
    bool stall_in_stretch = false;
    if (last && t > *last) {
      const double stretch = t - *last;
      const std::vector<uint32_t>& open = open_host[th];
      const double range_share =
          !open.empty() && IsRange(open.back()) ? Share(cut, open.back()) : 0.0;
      double overlap = 0.0, stall_share = 0.0;
      const uint32_t step = graph.nodes.step[n];
      const int64_t stall_begin = graph.steps.stall_begin_ns[step] - group.origin;
      const int64_t stall_end = graph.steps.stall_end_ns[step] - group.origin;
      if (stall_cut && stall_end > stall_begin) {
        // A stall's cut takes it down to its baseline (its share is its excess over it),
        // which never removes all of it.
        stall_share = std::clamp(stall_cut(step), 0.0, 1.0);
        overlap = std::max(0.0, std::min(t, static_cast<double>(stall_end)) -
                                    std::max(*last, static_cast<double>(stall_begin)));
      }
      host_lead[th] +=
          range_share * (stretch - overlap) + std::max(range_share, stall_share) * overlap;
      stall_in_stretch = stall_share > 0.0 && overlap > 0.0;
    }
    last = t;
    return stall_in_stretch;
  }

  // A host thread idle for long before n waited for other work, unless the idle time was
  // a stall the replay cuts (stall_cut_before): that was the thread's own delay.
  double HostStart(uint32_t n, double t, bool stall_cut_before) {
    double& lead = host_lead[thread(n)];
    const std::optional<Clock>& previous = thread_end[thread(n)];
    if (!previous || stall_cut_before) return t - lead;
    const double gap = t - previous->measured;
    const Clock& other = last_end_thread == thread(n) ? last_other_end : last_end;
    const double since = t - other.measured;
    const uint32_t step = graph.nodes.step[n];
    const double step_ns =
        static_cast<double>(graph.steps.end_ns[step] - graph.steps.start_ns[step]);
    // A host thread idle for long (CauseOptions::replay_wait_gap_ns and share of its
    // step) soon after other work ended waited for it (a pipeline stage's results, a reply).
    if (gap >= std::max(options().replay_wait_gap_ns,
                        options().replay_host_wait_step_share * step_ns) &&
        other.measured >= previous->measured && since <= 0.5 * gap) {
      lead = t - std::max(previous->replayed, other.replayed + since);
    }
    return t - lead;
  }

  // A kernel starts after its stream's previous kernel and after its launch call; the
  // dependency that held it back keeps its gap, the other only a launch's.
  double KernelStart(uint32_t n, double t) {
    std::vector<std::pair<double, double>> deps;  // (measured slack, replayed time)
    const std::optional<Clock>& previous = stream_end[thread(n)];
    if (previous && previous->measured <= t) {
      deps.emplace_back(t - previous->measured, previous->replayed);
    }
    const uint32_t launch_call = graph.nodes.launch[n];
    if (launch_call != ReplayNodes::kNone && start_of[launch_call]) {
      const Clock& launch = *start_of[launch_call];
      deps.emplace_back(t - launch.measured, launch.replayed);
    }
    if (deps.empty()) return t;
    // Held back by neither: it waited for another stream (an event: a collective's
    // result), which ended just before it.
    const double held = std::min_element(deps.begin(), deps.end())->first;
    const Clock* other = OtherStreamEnd(process(n), thread(n));
    if (held >= options().replay_wait_gap_ns && other != nullptr &&
        t - other->measured <= 0.5 * held) {
      deps.emplace_back(t - other->measured, other->replayed);
    }
    const auto binding = std::min_element(deps.begin(), deps.end());
    double start = -std::numeric_limits<double>::max();
    for (auto it = deps.begin(); it != deps.end(); ++it) {
      const double slack =
          it == binding ? it->first : std::min(it->first, options().replay_inherent_gap_ns);
      start = std::max(start, it->second + slack);
    }
    return start;
  }

  void End(uint32_t n, double t) {
    const double dur = static_cast<double>(graph.nodes.dur_ns[n]);
    const Clock begin = start_of[n] ? *start_of[n] : Clock{t - dur, t - dur};
    const double share = Share(cut, n);
    double end = 0.0;
    if (IsDevice(n)) {
      end = DeviceEnd(n, t, begin, share, dur);
    } else {
      CutStretch(n, t);
      end = HostEnd(n, t, begin, share, dur);
      std::vector<uint32_t>& open = open_host[thread(n)];
      auto it = std::find(open.rbegin(), open.rend(), n);
      if (it != open.rend()) open.erase(std::next(it).base());
    }
    if (thread(n) != last_end_thread) last_other_end = last_end, last_end_thread = thread(n);
    last_end = {t, end};
    std::optional<Clock>& rank_end = work_end[process(n)];
    if (!rank_end) rank_end = Clock{};
    rank_end->measured = std::max(rank_end->measured, t);
    rank_end->replayed = std::max(rank_end->replayed, end);
  }

  // The last end on the process' device on a stream other than this one.
  const Clock* OtherStreamEnd(uint32_t process, uint32_t stream) const {
    if (!device_end[process]) return nullptr;
    if (device_end_stream[process] != stream) return &*device_end[process];
    return device_other_end[process] ? &*device_other_end[process] : nullptr;
  }

  // A collective's end when its last member has arrived by t: the last arrival plus the
  // transfer. Its transfer is the collective's, shared by its members: the largest cut of
  // any (own_share: this member's).
  std::optional<double> CollectiveEnd(int32_t match, double t, double own_share) {
    const auto found = arrivals.find(match);
    const Arrivals arrived = found != arrivals.end() ? found->second : Arrivals{};
    const double transfer = t - arrived.measured;
    if (transfer < 0.0) return std::nullopt;
    return arrived.replayed + transfer * (1.0 - std::max(own_share, arrived.cut));
  }

  // Host work that ends inside a collective call matched across ranks (the call itself, or
  // a range nested in it) returns when the collective is done: the call blocks on the host
  // until every rank has arrived (a CPU job's gloo all_reduce).
  std::optional<double> BlockedEnd(uint32_t n, double t) {
    const std::vector<uint32_t>& open = open_host[thread(n)];
    for (auto it = open.rbegin(); it != open.rend(); ++it) {
      const int32_t match = graph.nodes.match[*it];
      if (match >= 0) return CollectiveEnd(match, t, Share(cut, *it));
    }
    return std::nullopt;
  }

  double HostEnd(uint32_t n, double t, Clock begin, double share, double dur) {
    // A range's own time was cut where it lay (CutStretch).
    const double removed = IsRange(n) ? 0.0 : share * dur;
    double end = t - host_lead[thread(n)] - removed;
    const std::optional<Clock>& awaited = device_end[process(n)];
    if (WaitsForDevice(channel(n)) && awaited && awaited->measured >= begin.measured) {
      // It returned when the device finished: it ends as early as the device does.
      end = std::max(begin.replayed, awaited->replayed) + (t - awaited->measured) - removed;
    }
    if (const std::optional<double> blocked = BlockedEnd(n, t)) end = *blocked;
    end = std::max(end, begin.replayed);
    host_lead[thread(n)] = t - end;
    thread_end[thread(n)] = Clock{t, end};
    return end;
  }

  double DeviceEnd(uint32_t n, double t, Clock begin, double share, double dur) {
    double end = begin.replayed + dur * (1.0 - share);
    const int32_t match = graph.nodes.match[n];
    // A collective ends when its last member has arrived and the transfer is done.
    if (const std::optional<double> done =
            match >= 0 ? CollectiveEnd(match, t, share) : std::nullopt) {
      end = std::max(begin.replayed, *done);
    }
    stream_end[thread(n)] = Clock{t, end};
    const uint32_t p = process(n);
    if (!device_end[p]) {
      device_end[p] = Clock{t, end};
      device_end_stream[p] = thread(n);
    } else if (t >= device_end[p]->measured) {
      if (device_end_stream[p] != thread(n)) device_other_end[p] = device_end[p];
      device_end[p] = Clock{t, end};
      device_end_stream[p] = thread(n);
    }
    return end;
  }
};

StepReplay::PreparedGroup StepReplay::Prepare(ReplayGraph group_graph) {
  PreparedGroup prepared;
  prepared.graph = std::move(group_graph);
  const ReplayGraph& graph = prepared.graph;
  if (graph.steps.size() == 0) return prepared;
  // Times relative to the group's start: a double holds them to the nanosecond.
  prepared.origin = *std::min_element(graph.steps.start_ns.begin(), graph.steps.start_ns.end());
  for (uint32_t n = 0; n < graph.nodes.size(); ++n) {
    const uint16_t neg_depth = static_cast<uint16_t>(UINT16_MAX - graph.nodes.depth[n]);
    prepared.points.push_back({graph.nodes.start_ns[n], 1, 0, n});
    // An instant is ended where it starts.
    if (graph.nodes.dur_ns[n] > 0) {
      prepared.points.push_back({graph.nodes.start_ns[n] + graph.nodes.dur_ns[n], 0, neg_depth, n});
    }
  }
  std::sort(prepared.points.begin(), prepared.points.end());
  return prepared;
}

ReplayedGroup StepReplay::Replay(const PreparedGroup& group, const Cut& cut,
                                 const Cut& stall_cut) const {
  ReplayedGroup result;
  if (group.points.empty()) return result;
  State state(*this, group, cut, stall_cut);
  for (const Point& point : group.points) {
    const double t = static_cast<double>(point.t - group.origin);
    if (!point.is_start) {
      state.End(point.node, t);
      continue;
    }
    state.Start(point.node, t);
    if (group.graph.nodes.dur_ns[point.node] <= 0) state.End(point.node, t);
  }
  double measured_end = 0.0, replayed_end = 0.0;
  for (const std::optional<Clock>& clock : state.work_end) {
    if (!clock) continue;
    measured_end = std::max(measured_end, clock->measured);
    replayed_end = std::max(replayed_end, clock->replayed);
  }
  result.measured_ns = std::max(0.0, measured_end);
  result.replayed_ns = std::max(0.0, replayed_end);
  return result;
}

ReplayedGroup StepReplay::Replay(int64_t group, const Cut& cut, const Cut& stall_cut) const {
  const PreparedGroup prepared = Prepare(group);
  const ReplayGraph& graph = prepared.graph;
  const Cut of_run_node = [&](uint32_t n) { return cut(graph.RunNode(n)); };
  const Cut of_run_step = [&](uint32_t s) { return stall_cut(graph.steps.step[s]); };
  return Replay(prepared, of_run_node, stall_cut ? of_run_step : Cut());
}

std::vector<StepReplay::Arrival> StepReplay::LastArrivals(const ReplayGraph& graph) {
  // The steps in the run's order, their nodes in order: the first to arrive last wins a tie.
  std::vector<uint32_t> order(graph.steps.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](uint32_t a, uint32_t b) { return graph.steps.step[a] < graph.steps.step[b]; });
  std::map<int32_t, std::pair<Arrival, int64_t>> by_match;  // -> (arrival, latest start)
  for (uint32_t s : order) {
    const int32_t rank = graph.steps.rank[s];
    for (uint32_t n = graph.steps.nodes_begin[s]; n < graph.steps.nodes_begin[s + 1]; ++n) {
      const int32_t match = graph.nodes.match[n];
      if (match < 0) continue;
      auto& [arrival, latest] = by_match[match];
      const int64_t start = graph.nodes.start_ns[n];
      if (arrival.ranks.empty() || start > latest) latest = start, arrival.last_rank = rank;
      arrival.ranks.push_back(rank);
    }
  }
  std::vector<Arrival> arrivals;
  for (auto& [match, entry] : by_match) {
    if (entry.first.ranks.size() >= 2) arrivals.push_back(std::move(entry.first));
  }
  return arrivals;
}

namespace {

// Causes whose culprit cells are work inside the steps (not idle time between them, nor
// counts).
bool MovesStepTime(CauseKind kind) {
  return kind != CauseKind::kEnginePause && kind != CauseKind::kReorder &&
         kind != CauseKind::kLaunchRetry && !IsRequestCause(kind);
}

// Per scored step, the share of each culprit cell's value above its baseline.
struct CulpritShare {
  Channel channel;
  localize::OperatorFamily family;
  double share;
};

std::vector<CulpritShare> CulpritShares(const DeviationMap& map, uint32_t row,
                                        const Hypothesis& h) {
  std::vector<CulpritShare> shares;
  const MapStep& step = map.steps[row];
  for (uint32_t c = step.cells_begin; c < step.cells_end; ++c) {
    const Cell& cell = map.cells[c];
    if (cell.value <= 0.0 || cell.value <= cell.expected || !MovesAsCulprit(h, step, cell)) {
      continue;
    }
    shares.push_back({cell.channel, cell.family, 1.0 - cell.expected / cell.value});
  }
  return shares;
}

// What one hypothesis replays: its window's groups, the culprit shares of each of its
// steps (by the run's step), and what each group gave.
struct ImpactReplay {
  using Shares = std::vector<CulpritShare>;
  Hypothesis* h;
  bool moves_step_time, of_rank;
  std::unordered_map<uint32_t, Shares> shares_of_step;  // none: nothing cut
  std::vector<double> saved, late_by_chance;            // per group of its window
  std::vector<int64_t> collectives, late;

  ImpactReplay(const DeviationMap& map, Hypothesis* hypothesis)
      : h(hypothesis),
        moves_step_time(MovesStepTime(h->kind)),
        of_rank(IsRankCause(h->kind) && h->rank >= 0) {
    for (uint32_t row = 0; row < map.steps.size(); ++row) {
      const MapStep& step = map.steps[row];
      if (step.group >= h->first_group && step.group <= h->last_group) {
        shares_of_step[step.step.value()] = CulpritShares(map, row, *h);
      }
    }
    const auto groups =
        static_cast<size_t>(std::max<int64_t>(0, h->last_group - h->first_group + 1));
    saved.assign(groups, 0.0);
    late_by_chance.assign(groups, 0.0);
    collectives.assign(groups, 0);
    late.assign(groups, 0);
  }

  bool Covers(int64_t group) const { return group >= h->first_group && group <= h->last_group; }

  // Per step of a group's graph, its shares (nullptr: nothing cut).
  std::vector<const Shares*> SharesOf(const ReplayGraph& graph) const {
    std::vector<const Shares*> shares(graph.steps.size(), nullptr);
    for (size_t s = 0; s < shares.size(); ++s) {
      const auto found = shares_of_step.find(graph.steps.step[s]);
      if (found != shares_of_step.end()) shares[s] = &found->second;
    }
    return shares;
  }

  // A node's cut: its step's culprit share of its cell; a collective's transfer is cut by
  // its transfer cell's share when there is one.
  static double Cut(const Shares* shares, const NodeCell& cell) {
    if (shares == nullptr) return 0.0;
    double cut = 0.0;
    for (const CulpritShare& share : *shares) {
      if (share.family != cell.family) continue;
      if (share.channel == Channel::kCollectiveTransfer && cell.channel == Channel::kCollective) {
        return share.share;
      }
      if (share.channel == cell.channel) cut = share.share;
    }
    return cut;
  }

  // A step's stall cut: its culprit share of the stall cell (the stretch it measures).
  static double StallCut(const Shares* shares) {
    if (shares == nullptr) return 0.0;
    for (const CulpritShare& share : *shares) {
      if (share.channel == Channel::kStall) return share.share;
    }
    return 0.0;
  }

  void ReplayGroup(const StepReplay& replay, int64_t group,
                   const StepReplay::PreparedGroup& prepared,
                   const std::vector<StepReplay::Arrival>& arrivals) {
    const auto i = static_cast<size_t>(group - h->first_group);
    if (moves_step_time) {
      const ReplayGraph& graph = prepared.graph;
      const std::vector<const Shares*> shares = SharesOf(graph);
      const ReplayedGroup times = replay.Replay(
          prepared,
          [&](uint32_t node) { return Cut(shares[graph.nodes.step[node]], graph.nodes.cell[node]); },
          [&](uint32_t step) { return StallCut(shares[step]); });
      saved[i] = std::max(0.0, times.measured_ns - times.replayed_ns);
    }
    if (!of_rank) return;
    for (const StepReplay::Arrival& arrival : arrivals) {
      if (std::find(arrival.ranks.begin(), arrival.ranks.end(), h->rank) == arrival.ranks.end()) {
        continue;
      }
      ++collectives[i];
      late[i] += arrival.last_rank == h->rank;
      late_by_chance[i] += 1.0 / static_cast<double>(arrival.ranks.size());
    }
  }

  // The window's figures summed in group order, and what they tell.
  void Finish(const CauseOptions& options) {
    if (moves_step_time) {
      h->impact_ns = 0.0;
      for (double ns : saved) h->impact_ns += ns;
      h->impact_replayed = true;
      const double share = h->step_baseline_ns > 0.0 ? h->impact_ns / h->step_baseline_ns : 0.0;
      h->cost_negligible = share < options.negligible_impact;
    }
    if (!of_rank) return;
    h->collectives = 0;
    h->collectives_late = 0;
    h->collectives_late_by_chance = 0.0;
    for (size_t i = 0; i < saved.size(); ++i) {
      h->collectives += collectives[i];
      h->collectives_late += late[i];
      h->collectives_late_by_chance += late_by_chance[i];
    }
    h->reached_collectives_last = IsRankCause(h->kind) &&
                                  h->collectives >= options.min_collectives_to_tell &&
                                  h->collectives_late >= 2.0 * h->collectives_late_by_chance;
  }
};

// Whether any of the impacts replays the group, and whether any reads its arrivals.
std::pair<bool, bool> Needs(const std::vector<ImpactReplay>& impacts, int64_t group) {
  bool replayed = false, arrivals_read = false;
  for (const ImpactReplay& impact : impacts) {
    replayed |= impact.Covers(group) && impact.moves_step_time;
    arrivals_read |= impact.Covers(group) && impact.of_rank;
  }
  return {replayed, arrivals_read};
}

// The range of groups the hypotheses' windows cover: [first, last].
std::pair<int64_t, int64_t> WindowsOf(const std::vector<Hypothesis*>& hypotheses) {
  int64_t first = std::numeric_limits<int64_t>::max(), last = std::numeric_limits<int64_t>::min();
  for (const Hypothesis* h : hypotheses) {
    if (h->last_group < h->first_group) continue;
    first = std::min(first, h->first_group);
    last = std::max(last, h->last_group);
  }
  return {first, last};
}

// Every group some hypothesis' window covers is prepared once and replayed for each of
// them, the groups on `threads` threads (each hypothesis' figures summed in group order,
// so the same for any count).
void ReplayAll(const StepReplay& replay, const DeviationMap& map,
               const std::vector<Hypothesis*>& hypotheses, const CauseOptions& options) {
  std::vector<ImpactReplay> impacts;
  for (Hypothesis* h : hypotheses) impacts.emplace_back(map, h);
  const std::pair<int64_t, int64_t> window = WindowsOf(hypotheses);
  const int64_t first = window.first;
  const auto groups = window.second >= first ? static_cast<size_t>(window.second - first + 1) : 0;
  base::ParallelFor(groups, options.threads, [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      const int64_t g = first + static_cast<int64_t>(i);
      const auto [replayed, arrivals_read] = Needs(impacts, g);
      if (!replayed && !arrivals_read) continue;
      ReplayGraph graph = replay.GroupGraph(g);
      const std::vector<StepReplay::Arrival> arrivals =
          arrivals_read ? StepReplay::LastArrivals(graph) : std::vector<StepReplay::Arrival>{};
      const StepReplay::PreparedGroup prepared =
          replayed ? StepReplay::Prepare(std::move(graph)) : StepReplay::PreparedGroup{};
      for (ImpactReplay& impact : impacts) {
        if (impact.Covers(g)) impact.ReplayGroup(replay, g, prepared, arrivals);
      }
    }
  });
  for (ImpactReplay& impact : impacts) impact.Finish(options);
}

// The ranked hypotheses worth showing (the first `count`) and the second.
std::vector<Hypothesis*> Shown(CauseAnalysis* analysis, size_t count) {
  std::vector<Hypothesis*> hypotheses;
  for (size_t i = 0; i < analysis->ranked.size() && i < count; ++i) {
    hypotheses.push_back(&analysis->ranked[i]);
  }
  if (analysis->has_second) hypotheses.push_back(&analysis->second);
  return hypotheses;
}

}  // namespace

void ReplayImpact(const StepReplay& replay, const DeviationMap& map, Hypothesis* h,
                  const CauseOptions& options) {
  ReplayAll(replay, map, {h}, options);
}

void ReplayImpacts(const model::Trace& trace, const localize::StepFeatures& features,
                   const DeviationMap& map, size_t count, CauseAnalysis* analysis,
                   const CauseOptions& options) {
  if (analysis->ranked.empty()) return;
  const StepReplay replay(trace, features, options);
  ReplayAll(replay, map, Shown(analysis, count), options);
}

void ReplayImpacts(const ReplayGraph& graph, const DeviationMap& map, size_t count,
                   CauseAnalysis* analysis, const CauseOptions& options) {
  if (analysis->ranked.empty()) return;
  const StepReplay replay(graph, options);
  ReplayAll(replay, map, Shown(analysis, count), options);
}

std::vector<int64_t> ReplayGroupsOf(const CauseAnalysis& analysis, size_t count) {
  std::set<int64_t> groups;
  auto add = [&](const Hypothesis& h) {
    const bool replayed = MovesStepTime(h.kind), arrivals_read = IsRankCause(h.kind) && h.rank >= 0;
    if (!replayed && !arrivals_read) return;
    for (int64_t g = h.first_group; g <= h.last_group; ++g) groups.insert(g);
  };
  for (size_t i = 0; i < analysis.ranked.size() && i < count; ++i) add(analysis.ranked[i]);
  if (!analysis.ranked.empty() && analysis.has_second) add(analysis.second);
  return {groups.begin(), groups.end()};
}

}  // namespace teller::cause
