#include "cause/step_replay.h"

#include <algorithm>
#include <limits>
#include <map>
#include <tuple>
#include <unordered_map>

#include "base/parallel_for.h"

namespace teller::cause {

namespace {

// The gap kept between a kernel and the dependency that did not hold it back (its
// launch call, or the previous kernel on its stream): a launch or a stream switch.
constexpr double kInherentGapNs = 2000.0;
// Work that started this long after what it is known to follow, soon after other work
// ended, waited for that work through a dependency the trace does not show: a kernel
// for another stream's event (a collective's result), a host thread (idle this share of
// its step too) for another thread or rank (a pipeline stage's results, a reply).
constexpr double kWaitGapNs = 20000.0;
constexpr double kHostWaitStepShare = 0.05;
// A cut never removes all of a node's time.
constexpr double kMaxCut = 0.95;

bool IsCall(model::Layer layer) {
  return layer == model::Layer::kRt || layer == model::Layer::kDrv;
}

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

struct StepReplay::Point {
  int64_t t;
  uint8_t is_start;  // ends first at one instant
  uint16_t neg_depth;
  uint32_t node;
  bool operator<(const Point& o) const {
    return std::tie(t, is_start, neg_depth, node) < std::tie(o.t, o.is_start, o.neg_depth, o.node);
  }
};

StepReplay::StepReplay(const model::Trace& trace, const localize::StepFeatures& features)
    : trace_(trace),
      node_cells_(NodeCells(trace, features)),
      self_ns_(trace.nodes.size(), 0.0),
      match_of_event_(trace.events.size(), -1) {
  const model::NodeTable& nodes = trace.nodes;
  for (size_t n = 0; n < nodes.size(); ++n) {
    const model::EventRow event = nodes.event[n];
    self_ns_[n] += static_cast<double>(trace.events.dur_ns[event.value()]);
    const model::NodeIndex parent = nodes.parent[n];
    const bool device = trace.threads.is_device[trace.events.thread[event.value()].value()];
    if (parent.valid() && !device) {
      self_ns_[parent.value()] -= static_cast<double>(trace.events.dur_ns[event.value()]);
    }
  }
  for (uint32_t s = 0; s < trace.steps.size(); ++s) {
    const int64_t group =
        trace.steps.global_step[s] >= 0 ? trace.steps.global_step[s] : trace.steps.number[s];
    steps_of_group_[group].push_back(s);
  }
  const model::CollectiveMatchTable& matches = trace.collective_matches;
  for (size_t m = 0; m < matches.size(); ++m) {
    match_of_event_[matches.event[m].value()] = static_cast<int32_t>(matches.match[m].value());
  }
}

// One group's replay: the replayed clocks of the nodes reached so far.
struct StepReplay::State {
  State(const StepReplay& r, const std::function<double(uint32_t)>& c) : replay(r), cut(c) {}
  const StepReplay& replay;
  const std::function<double(uint32_t)>& cut;
  std::unordered_map<uint32_t, Clock> start_of;
  std::unordered_map<uint32_t, double> host_lead;  // per host thread: measured - replayed
  std::unordered_map<uint32_t, Clock> stream_end;  // per stream: its last kernel's end
  std::unordered_map<uint32_t, Clock> device_end;  // per process: its device's last end
  // Per process: the stream of its device's last end, and the last end on another stream.
  std::unordered_map<uint32_t, uint32_t> device_end_stream;
  std::unordered_map<uint32_t, Clock> device_other_end;
  std::unordered_map<uint32_t, Clock> work_end;    // per process: its last end of work
  std::unordered_map<uint32_t, Clock> thread_end;  // per host thread: its last end
  // The latest end of work on any thread, and the latest on a thread other than its.
  Clock last_end{kNever, kNever}, last_other_end{kNever, kNever};
  uint32_t last_end_thread = UINT32_MAX;
  std::unordered_map<int32_t, std::vector<uint32_t>> members;  // match -> nodes started

  const model::EventTable& events() const { return replay.trace_.events; }
  model::EventRow event(uint32_t n) const { return replay.trace_.nodes.event[n]; }
  uint32_t thread(uint32_t n) const { return events().thread[event(n).value()].value(); }
  bool IsDevice(uint32_t n) const { return replay.trace_.threads.is_device[thread(n)]; }

  void Start(uint32_t n, double t) {
    if (!IsDevice(n)) {
      start_of[n] = {t, HostStart(n, t)};
      return;
    }
    start_of[n] = {t, KernelStart(n, t)};
    const int32_t match = replay.match_of_event_[event(n).value()];
    if (match >= 0) members[match].push_back(n);
  }

  double HostStart(uint32_t n, double t) {
    double& lead = host_lead[thread(n)];
    auto previous = thread_end.find(thread(n));
    if (previous == thread_end.end()) return t - lead;
    const double gap = t - previous->second.measured;
    const Clock& other = last_end_thread == thread(n) ? last_other_end : last_end;
    const double since = t - other.measured;
    const model::StepIndex step = replay.trace_.nodes.step[n];
    const double step_ns = static_cast<double>(replay.trace_.steps.end_ns[step.value()] -
                                               replay.trace_.steps.start_ns[step.value()]);
    if (gap >= std::max(kWaitGapNs, kHostWaitStepShare * step_ns) &&
        other.measured >= previous->second.measured && since <= 0.5 * gap) {
      lead = t - std::max(previous->second.replayed, other.replayed + since);
    }
    return t - lead;
  }

  // A kernel starts after its stream's previous kernel and after its launch call; the
  // dependency that held it back keeps its gap, the other only a launch's.
  double KernelStart(uint32_t n, double t) {
    std::vector<std::pair<double, double>> deps;  // (measured slack, replayed time)
    auto previous = stream_end.find(thread(n));
    if (previous != stream_end.end() && previous->second.measured <= t) {
      deps.emplace_back(t - previous->second.measured, previous->second.replayed);
    }
    const model::NodeIndex parent = replay.trace_.nodes.parent[n];
    if (parent.valid() && IsCall(events().layer[event(parent.value()).value()])) {
      auto launch = start_of.find(parent.value());
      if (launch != start_of.end()) {
        deps.emplace_back(t - launch->second.measured, launch->second.replayed);
      }
    }
    if (deps.empty()) return t;
    // Held back by neither: it waited for another stream (an event: a collective's
    // result), which ended just before it.
    const double held = std::min_element(deps.begin(), deps.end())->first;
    const uint32_t process = events().process[event(n).value()].value();
    const Clock* other = OtherStreamEnd(process, thread(n));
    if (held >= kWaitGapNs && other != nullptr && t - other->measured <= 0.5 * held) {
      deps.emplace_back(t - other->measured, other->replayed);
    }
    const auto binding = std::min_element(deps.begin(), deps.end());
    double start = -std::numeric_limits<double>::max();
    for (auto it = deps.begin(); it != deps.end(); ++it) {
      const double slack = it == binding ? it->first : std::min(it->first, kInherentGapNs);
      start = std::max(start, it->second + slack);
    }
    return start;
  }

  void End(uint32_t n, double t) {
    const double dur = static_cast<double>(events().dur_ns[event(n).value()]);
    auto started = start_of.find(n);
    const Clock begin = started != start_of.end() ? started->second : Clock{t - dur, t - dur};
    const double share = std::clamp(cut(n), 0.0, kMaxCut);
    const uint32_t process = events().process[event(n).value()].value();
    const double end = IsDevice(n) ? DeviceEnd(n, t, begin, share, dur, process)
                                   : HostEnd(n, t, begin, share, dur, process);
    if (thread(n) != last_end_thread) last_other_end = last_end, last_end_thread = thread(n);
    last_end = {t, end};
    Clock& rank_end = work_end[process];
    rank_end.measured = std::max(rank_end.measured, t);
    rank_end.replayed = std::max(rank_end.replayed, end);
  }

  // The last end on the process' device on a stream other than this one.
  const Clock* OtherStreamEnd(uint32_t process, uint32_t stream) const {
    auto last = device_end.find(process);
    if (last == device_end.end()) return nullptr;
    if (device_end_stream.at(process) != stream) return &last->second;
    auto other = device_other_end.find(process);
    return other == device_other_end.end() ? nullptr : &other->second;
  }

  double HostEnd(uint32_t n, double t, Clock begin, double share, double dur, uint32_t process) {
    const Channel channel = replay.node_cells_[n].channel;
    const bool range = channel == Channel::kFrontend || channel == Channel::kBackend;
    const double removed = share * (range ? std::max(0.0, replay.self_ns_[n]) : dur);
    double end = t - host_lead[thread(n)] - removed;
    auto awaited = device_end.find(process);
    if (WaitsForDevice(channel) && awaited != device_end.end() &&
        awaited->second.measured >= begin.measured) {
      // It returned when the device finished: it ends as early as the device does.
      end = std::max(begin.replayed, awaited->second.replayed) + (t - awaited->second.measured) -
            removed;
    }
    end = std::max(end, begin.replayed);
    host_lead[thread(n)] = t - end;
    thread_end[thread(n)] = {t, end};
    return end;
  }

  double DeviceEnd(uint32_t n, double t, Clock begin, double share, double dur, uint32_t process) {
    double end = begin.replayed + dur * (1.0 - share);
    const int32_t match = replay.match_of_event_[event(n).value()];
    if (match >= 0) {
      // A collective ends when its last member has arrived and the transfer is done.
      // Its transfer is the collective's, shared by its members: the largest cut of any.
      double last_measured = 0.0, last_replayed = 0.0, transfer_cut = share;
      for (uint32_t member : members[match]) {
        last_measured = std::max(last_measured, start_of[member].measured);
        last_replayed = std::max(last_replayed, start_of[member].replayed);
        transfer_cut = std::max(transfer_cut, std::clamp(cut(member), 0.0, kMaxCut));
      }
      const double transfer = t - last_measured;
      if (transfer >= 0.0) {
        end = std::max(begin.replayed, last_replayed + transfer * (1.0 - transfer_cut));
      }
    }
    stream_end[thread(n)] = {t, end};
    auto last = device_end.find(process);
    if (last == device_end.end()) {
      device_end[process] = {t, end};
      device_end_stream[process] = thread(n);
    } else if (t >= last->second.measured) {
      if (device_end_stream[process] != thread(n)) device_other_end[process] = last->second;
      last->second = {t, end};
      device_end_stream[process] = thread(n);
    }
    return end;
  }
};

ReplayedGroup StepReplay::Replay(int64_t group,
                                 const std::function<double(uint32_t node)>& cut) const {
  ReplayedGroup result;
  auto found = steps_of_group_.find(group);
  if (found == steps_of_group_.end()) return result;
  const model::EventTable& events = trace_.events;
  std::vector<Point> points;
  // Times relative to the group's start: a double holds them to the nanosecond.
  int64_t origin = std::numeric_limits<int64_t>::max();
  for (uint32_t s : found->second) origin = std::min(origin, trace_.steps.start_ns[s]);
  for (uint32_t s : found->second) {
    for (uint32_t n = trace_.steps.node_begin[s].value(); n < trace_.steps.node_end[s].value();
         ++n) {
      const model::EventRow e = trace_.nodes.event[n];
      const uint16_t neg_depth = static_cast<uint16_t>(UINT16_MAX - trace_.nodes.depth[n]);
      points.push_back({events.start_ns[e.value()], 1, 0, n});
      // An instant is ended where it starts.
      if (events.dur_ns[e.value()] > 0) points.push_back({events.end_ns(e), 0, neg_depth, n});
    }
  }
  if (points.empty()) return result;
  std::sort(points.begin(), points.end());
  State state(*this, cut);
  for (const Point& point : points) {
    const double t = static_cast<double>(point.t - origin);
    if (!point.is_start) {
      state.End(point.node, t);
      continue;
    }
    state.Start(point.node, t);
    if (events.dur_ns[trace_.nodes.event[point.node].value()] <= 0) state.End(point.node, t);
  }
  double measured_end = 0.0, replayed_end = 0.0;
  for (const auto& [process, clock] : state.work_end) {
    measured_end = std::max(measured_end, clock.measured);
    replayed_end = std::max(replayed_end, clock.replayed);
  }
  result.measured_ns = std::max(0.0, measured_end);
  result.replayed_ns = std::max(0.0, replayed_end);
  return result;
}

std::vector<StepReplay::Arrival> StepReplay::LastArrivals(int64_t group) const {
  std::vector<Arrival> arrivals;
  auto found = steps_of_group_.find(group);
  if (found == steps_of_group_.end()) return arrivals;
  std::map<int32_t, std::pair<Arrival, int64_t>> by_match;  // -> (arrival, latest start)
  for (uint32_t s : found->second) {
    for (uint32_t n = trace_.steps.node_begin[s].value(); n < trace_.steps.node_end[s].value();
         ++n) {
      const model::EventRow e = trace_.nodes.event[n];
      const int32_t match = match_of_event_[e.value()];
      if (match < 0 || !trace_.threads.is_device[trace_.events.thread[e.value()].value()]) continue;
      auto& [arrival, latest] = by_match[match];
      const int64_t start = trace_.events.start_ns[e.value()];
      if (arrival.ranks.empty() || start > latest)
        latest = start, arrival.last_rank = trace_.steps.rank[s];
      arrival.ranks.push_back(trace_.steps.rank[s]);
    }
  }
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
         kind != CauseKind::kLaunchRetry;
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

}  // namespace

void ReplayImpact(const StepReplay& replay, const DeviationMap& map, Hypothesis* h, int threads) {
  std::unordered_map<uint32_t, uint32_t> row_of_step;
  for (uint32_t row = 0; row < map.steps.size(); ++row) {
    const MapStep& step = map.steps[row];
    if (step.group >= h->first_group && step.group <= h->last_group) {
      row_of_step[step.step.value()] = row;
    }
  }
  std::unordered_map<uint32_t, std::vector<CulpritShare>> shares_of_step;
  for (const auto& [step, row] : row_of_step) shares_of_step[step] = CulpritShares(map, row, *h);
  // Each group of the window replayed on its own (threads), summed in group order.
  const auto groups = static_cast<size_t>(std::max<int64_t>(0, h->last_group - h->first_group + 1));
  const bool moves_step_time = MovesStepTime(h->kind),
             of_rank = IsRankCause(h->kind) && h->rank >= 0;
  std::vector<double> saved(groups, 0.0), late_by_chance(groups, 0.0);
  std::vector<int64_t> collectives(groups, 0), late(groups, 0);
  base::ParallelFor(groups, threads, [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      const int64_t g = h->first_group + static_cast<int64_t>(i);
      if (moves_step_time) {
        const ReplayedGroup times = replay.Replay(g, [&](uint32_t node) {
          auto found = shares_of_step.find(replay.step_of_node(node));
          if (found == shares_of_step.end()) return 0.0;
          const NodeCell& cell = replay.node_cells()[node];
          // A collective's transfer is cut by its transfer cell's share when there is one.
          double cut = 0.0;
          for (const CulpritShare& share : found->second) {
            if (share.family != cell.family) continue;
            if (share.channel == Channel::kCollectiveTransfer &&
                cell.channel == Channel::kCollective) {
              return share.share;
            }
            if (share.channel == cell.channel) cut = share.share;
          }
          return cut;
        });
        saved[i] = std::max(0.0, times.measured_ns - times.replayed_ns);
      }
      if (!of_rank) continue;
      for (const StepReplay::Arrival& arrival : replay.LastArrivals(g)) {
        if (std::find(arrival.ranks.begin(), arrival.ranks.end(), h->rank) == arrival.ranks.end()) {
          continue;
        }
        ++collectives[i];
        late[i] += arrival.last_rank == h->rank;
        late_by_chance[i] += 1.0 / static_cast<double>(arrival.ranks.size());
      }
    }
  });
  if (moves_step_time) {
    h->impact_ns = 0.0;
    for (double ns : saved) h->impact_ns += ns;
    h->impact_replayed = true;
  }
  if (of_rank) {
    h->collectives = 0;
    h->collectives_late = 0;
    h->collectives_late_by_chance = 0.0;
    for (size_t i = 0; i < groups; ++i) {
      h->collectives += collectives[i];
      h->collectives_late += late[i];
      h->collectives_late_by_chance += late_by_chance[i];
    }
  }
}

void ReplayImpacts(const model::Trace& trace, const localize::StepFeatures& features,
                   const DeviationMap& map, size_t count, CauseAnalysis* analysis, int threads) {
  if (analysis->ranked.empty()) return;
  const StepReplay replay(trace, features);
  for (size_t i = 0; i < analysis->ranked.size() && i < count; ++i) {
    ReplayImpact(replay, map, &analysis->ranked[i], threads);
  }
  if (analysis->has_second) ReplayImpact(replay, map, &analysis->second, threads);
}

}  // namespace teller::cause
