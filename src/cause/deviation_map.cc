#include "cause/deviation_map.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "base/median.h"
#include "cause/baseline_fit.h"
#include "localize/baseline.h"
#include "localize/step_features.h"

namespace teller::cause {

using localize::OperatorFamily;

std::string_view ChannelName(Channel channel) {
  static constexpr std::array<std::string_view, kChannelCount> kNames = {"compute",
                                                                         "device_copy",
                                                                         "collective",
                                                                         "launch",
                                                                         "collective_launch",
                                                                         "host_copy",
                                                                         "sync",
                                                                         "alloc",
                                                                         "runtime_other",
                                                                         "frontend",
                                                                         "backend",
                                                                         "step_gap",
                                                                         "step_time",
                                                                         "order_breaks",
                                                                         "failed_calls",
                                                                         "collective_transfer",
                                                                         "stall"};
  return kNames[static_cast<size_t>(channel)];
}

bool IsCountChannel(Channel channel) {
  return channel == Channel::kOrderBreaks || channel == Channel::kFailedCalls;
}

namespace {

// (channel, family) of one cell; family is kUnnamed except for compute.
using CellKey = std::pair<Channel, OperatorFamily>;
using StepValues = std::map<CellKey, std::pair<double, int64_t>>;  // -> (value, count)

Channel ChannelOfFamily(OperatorFamily family) {
  if (localize::IsComputeFamily(family)) return Channel::kCompute;
  if (localize::IsCollectiveFamily(family)) return Channel::kCollective;
  switch (family) {
    case OperatorFamily::kMemcpy:
    case OperatorFamily::kMemset:
      return Channel::kDeviceCopy;
    case OperatorFamily::kLaunch:
    case OperatorFamily::kGraphLaunch:
      return Channel::kLaunch;
    case OperatorFamily::kCopy:
      return Channel::kHostCopy;
    case OperatorFamily::kSync:
      return Channel::kSync;
    case OperatorFamily::kAlloc:
      return Channel::kAlloc;
    case OperatorFamily::kRuntimeOther:
      return Channel::kRuntimeOther;
    default:
      return Channel::kBackend;  // host ranges: measured by their own time (HostSelfTimes)
  }
}

bool IsHostRange(const model::Trace& trace, model::EventRow event) {
  const model::Layer layer = trace.events.layer[event.value()];
  return layer == model::Layer::kFe || layer == model::Layer::kBe;
}

// Per step, the own time of its framework ranges and of its backend ops: a range's
// duration less that of the host events directly inside it (the calls a slow launch,
// copy or allocator makes longer), so a slow call is not also a slow range.
void AddHostSelfTimes(const model::Trace& trace, std::vector<StepValues>* values) {
  std::vector<double> self(trace.nodes.size(), 0.0);
  for (size_t n = 0; n < trace.nodes.size(); ++n) {
    const model::EventRow event = trace.nodes.event[n];
    const bool device = trace.threads.is_device[trace.events.thread[event.value()].value()];
    if (device) continue;
    const double dur = static_cast<double>(trace.events.dur_ns[event.value()]);
    if (IsHostRange(trace, event)) self[n] += dur;
    const model::NodeIndex parent = trace.nodes.parent[n];
    if (parent.valid() && IsHostRange(trace, trace.nodes.event[parent.value()])) {
      self[parent.value()] -= dur;
    }
  }
  for (size_t n = 0; n < trace.nodes.size(); ++n) {
    const model::EventRow event = trace.nodes.event[n];
    if (!IsHostRange(trace, event) || !trace.nodes.parent[n].valid()) continue;
    const Channel channel = trace.events.layer[event.value()] == model::Layer::kFe
                                ? Channel::kFrontend
                                : Channel::kBackend;
    auto& cell = (*values)[trace.nodes.step[n].value()][{channel, OperatorFamily::kUnnamed}];
    cell.first += std::max(0.0, self[n]);
    ++cell.second;
  }
}

// Work a stall is the absence of: everything but step and framework ranges and markers
// (Python can stall inside a range; it does not launch or run anything meanwhile).
bool IsWork(model::Layer layer) {
  return layer != model::Layer::kStep && layer != model::Layer::kFe &&
         layer != model::Layer::kOther;
}

// Per step, its longest stretch without work (IsWork) on its rank, from its start to
// its end (which includes the device work it launched).
void AddStalls(const model::Trace& trace, std::vector<StepValues>* values) {
  for (uint32_t s = 0; s < trace.steps.size(); ++s) {
    const auto [start, end] = LongestStall(trace, s);
    (*values)[s][{Channel::kStall, OperatorFamily::kUnnamed}] = {static_cast<double>(end - start),
                                                                 1};
  }
}

// Per step, the runtime and driver calls that returned an error (a `result` arg other
// than 0), but cudaErrorNotReady (600): polling a stream or an event is no failure.
void AddFailedCalls(const model::Trace& trace, std::vector<StepValues>* values) {
  const base::StringId result_key = trace.FindArgKey("result");
  if (!result_key.valid()) return;
  constexpr int64_t kNotReady = 600;
  for (size_t n = 0; n < trace.nodes.size(); ++n) {
    const model::EventRow event = trace.nodes.event[n];
    const model::Layer layer = trace.events.layer[event.value()];
    if (layer != model::Layer::kRt && layer != model::Layer::kDrv) continue;
    int64_t result = 0;
    if (!trace.FindIntArg(event, result_key, &result) || result == 0 || result == kNotReady) {
      continue;
    }
    auto& cell =
        (*values)[trace.nodes.step[n].value()][{Channel::kFailedCalls, OperatorFamily::kUnnamed}];
    cell.first += 1.0;
    ++cell.second;
  }
}

// Per step, each collective family's transfer: for every collective matched across ranks
// (CollectiveMatchOfEvents), its end less the latest start of its members (when the last
// arrived).
void AddCollectiveTransfers(const model::Trace& trace, const std::vector<NodeCell>& cells,
                            std::vector<StepValues>* values) {
  const model::CollectiveMatchTable& matches = trace.collective_matches;
  if (matches.size() == 0) return;
  const std::vector<int32_t> match_of_event = CollectiveMatchOfEvents(trace);
  uint32_t match_count = 0;
  for (size_t i = 0; i < matches.size(); ++i) {
    match_count = std::max(match_count, matches.match[i].value() + 1);
  }
  std::vector<int64_t> last_arrival(match_count, std::numeric_limits<int64_t>::min());
  std::vector<int32_t> members(match_count, 0);
  for (size_t i = 0; i < matches.size(); ++i) {
    const int32_t m = match_of_event[matches.event[i].value()];
    if (m < 0) continue;
    last_arrival[m] = std::max(last_arrival[m], trace.events.start_ns[matches.event[i].value()]);
    ++members[m];
  }
  for (size_t n = 0; n < trace.nodes.size(); ++n) {
    const model::EventRow event = trace.nodes.event[n];
    const int32_t m = match_of_event[event.value()];
    if (m < 0 || members[m] < 2) continue;
    if (cells[n].channel != Channel::kCollective || !trace.nodes.step[n].valid()) continue;
    const int64_t end = trace.events.end_ns(event);
    auto& cell =
        (*values)[trace.nodes.step[n].value()][{Channel::kCollectiveTransfer, cells[n].family}];
    cell.first += static_cast<double>(std::max<int64_t>(0, end - last_arrival[m]));
    ++cell.second;
  }
}

// The runtime or driver call that launched a collective kernel node: its parent, unless
// that is a graph launch (which launches the whole graph, collectives among its kernels).
std::optional<model::NodeIndex> CollectiveLaunchCall(const model::Trace& trace, size_t n) {
  if (trace.events.layer[trace.nodes.event[n].value()] != model::Layer::kComm) return {};
  const model::NodeIndex parent = trace.nodes.parent[n];
  if (!parent.valid()) return {};
  const model::EventRow call = trace.nodes.event[parent.value()];
  const model::Layer layer = trace.events.layer[call.value()];
  if (layer != model::Layer::kRt && layer != model::Layer::kDrv) return {};
  if (trace.events.flags[call.value()] & model::kFlagGraphLaunch) return {};
  return parent;
}

// Launch time spent on collective kernels, per step, each launch call counted once.
struct LaunchTotals {
  int64_t ns = 0;
  int64_t calls = 0;
};
std::vector<LaunchTotals> CollectiveLaunches(const model::Trace& trace) {
  std::vector<LaunchTotals> by_step(trace.steps.size());
  std::vector<bool> counted(trace.nodes.size(), false);
  for (size_t n = 0; n < trace.nodes.size(); ++n) {
    const std::optional<model::NodeIndex> call = CollectiveLaunchCall(trace, n);
    if (!call || counted[call->value()]) continue;
    counted[call->value()] = true;
    LaunchTotals& totals = by_step[trace.nodes.step[n].value()];
    totals.ns += trace.events.dur_ns[trace.nodes.event[call->value()].value()];
    ++totals.calls;
  }
  return by_step;
}

// Whether the engine had work between two steps of a rank: the later one continues a
// request the earlier one served. An engine without requests in flight idles by
// design; one that stalls with requests in flight is paused. Without request ids,
// every gap counts.
bool HadWorkWaiting(const model::Trace& trace, uint32_t before, uint32_t after) {
  if (trace.step_requests.empty()) return true;
  const uint32_t b = trace.steps.requests_begin[before], a = trace.steps.requests_begin[after];
  for (uint32_t i = b; i < b + trace.steps.requests_count[before]; ++i) {
    for (uint32_t j = a; j < a + trace.steps.requests_count[after]; ++j) {
      if (trace.step_requests[i] == trace.step_requests[j]) return true;
    }
  }
  return false;
}

// Channel values of every step of the trace.
std::vector<StepValues> MeasureSteps(const model::Trace& trace,
                                     const localize::StepFeatures& features) {
  std::vector<StepValues> values(trace.steps.size());
  for (size_t row = 0; row < features.size(); ++row) {
    const OperatorFamily family = features.family[row];
    const Channel channel = ChannelOfFamily(family);
    if (channel == Channel::kBackend) continue;  // AddHostSelfTimes
    StepValues& step = values[features.step[row].value()];
    const bool by_family = channel == Channel::kCompute || channel == Channel::kCollective;
    auto& cell = step[{channel, by_family ? family : OperatorFamily::kUnnamed}];
    cell.first += static_cast<double>(features.total_ns[row]);
    cell.second += features.count[row];
    if (features.order_breaks[row] > 0) {
      auto& breaks = step[{Channel::kOrderBreaks, OperatorFamily::kUnnamed}];
      breaks.first += static_cast<double>(features.order_breaks[row]);
      breaks.second += features.order_breaks[row];
    }
  }
  AddHostSelfTimes(trace, &values);
  AddFailedCalls(trace, &values);
  AddStalls(trace, &values);
  AddCollectiveTransfers(trace, NodeCells(trace, features), &values);
  const std::vector<LaunchTotals> collective_launches = CollectiveLaunches(trace);
  for (size_t s = 0; s < values.size(); ++s) {
    const LaunchTotals& collective = collective_launches[s];
    if (collective.calls == 0) continue;
    auto& launch = values[s][{Channel::kLaunch, OperatorFamily::kUnnamed}];
    launch.first = std::max(0.0, launch.first - static_cast<double>(collective.ns));
    launch.second = std::max<int64_t>(0, launch.second - collective.calls);
    values[s][{Channel::kCollectiveLaunch, OperatorFamily::kUnnamed}] = {
        static_cast<double>(collective.ns), collective.calls};
  }
  // Step time and the idle gap before the step on its rank.
  std::map<int32_t, model::TimeNs> previous_end;
  std::vector<uint32_t> order(trace.steps.size());
  for (uint32_t s = 0; s < order.size(); ++s) order[s] = s;
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return std::tie(trace.steps.rank[a], trace.steps.start_ns[a]) <
           std::tie(trace.steps.rank[b], trace.steps.start_ns[b]);
  });
  std::map<int32_t, uint32_t> previous_step;
  for (uint32_t s : order) {
    const model::TimeNs start = trace.steps.start_ns[s], end = trace.steps.end_ns[s];
    values[s][{Channel::kStepTime, OperatorFamily::kUnnamed}] = {static_cast<double>(end - start),
                                                                 1};
    auto previous = previous_end.find(trace.steps.rank[s]);
    if (previous != previous_end.end() &&
        HadWorkWaiting(trace, previous_step[trace.steps.rank[s]], s)) {
      values[s][{Channel::kStepGap, OperatorFamily::kUnnamed}] = {
          static_cast<double>(std::max<model::TimeNs>(0, start - previous->second)), 1};
    }
    previous_end[trace.steps.rank[s]] = std::max(end, start);
    previous_step[trace.steps.rank[s]] = s;
  }
  return values;
}

// Steps a fault may be found in: serving has begun (when the trace says which steps
// serve requests), and not the rank's first such step (cold caches, lazy set-up).
std::vector<uint32_t> ScoredSteps(const model::Trace& trace) {
  const bool has_requests = !trace.step_requests.empty();
  model::TimeNs first_serving_ns = std::numeric_limits<model::TimeNs>::max();
  for (size_t s = 0; s < trace.steps.size(); ++s) {
    if (trace.steps.requests_count[s] > 0) {
      first_serving_ns = std::min(first_serving_ns, trace.steps.start_ns[s]);
    }
  }
  std::vector<uint32_t> order;
  for (uint32_t s = 0; s < trace.steps.size(); ++s) {
    if (has_requests && trace.steps.start_ns[s] < first_serving_ns) continue;
    order.push_back(s);
  }
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return std::tie(trace.steps.rank[a], trace.steps.start_ns[a]) <
           std::tie(trace.steps.rank[b], trace.steps.start_ns[b]);
  });
  std::vector<uint32_t> scored;
  std::set<int32_t> started;
  for (uint32_t s : order) {
    if (started.insert(trace.steps.rank[s]).second) continue;
    scored.push_back(s);
  }
  return scored;
}

// What a channel should measure, and whether it reads the step's padded size.
struct FittedChannel {
  ChannelBaseline baseline;
  bool padded = false;
  double Expected(const StepShape& shape) const {
    return baseline.Expected(padded ? Padded(shape) : shape);
  }
  double sigma() const { return baseline.sigma(); }
};

// Whether some step's padded size differs from its own (replicas of different batches).
bool AnyPadded(const std::vector<StepShape>& shapes) {
  return std::any_of(shapes.begin(), shapes.end(),
                     [](const StepShape& shape) { return shape.padded_size != shape.size; });
}

// Channels of the device's work (and what waits for it), which runs on a padded batch.
bool FollowsDeviceWork(Channel channel) {
  switch (channel) {
    case Channel::kCompute:
    case Channel::kDeviceCopy:
    case Channel::kCollective:
    case Channel::kCollectiveTransfer:
    case Channel::kSync:
    case Channel::kStepTime:
      return true;
    default:
      return false;
  }
}

// Device work and the step's time follow the batch: its tokens, its requests and, for
// attention, the KV context they carry (the linear model when the trace says how many
// tokens each step ran). Host work is a fixed cost per step plus a cost per sequence; a
// collective, and a wait for the device, a latency plus what grows with the tokens (the
// bytes moved, the work waited for) (baseline_fit.h).
ShapeModel ShapeModelOf(CellKey cell, bool has_tokens) {
  // Fewer tokens activate fewer experts, each loading its weights: expert kernels
  // saturate with the batch where attention and GEMMs grow along a line.
  if (cell.first == Channel::kCompute && cell.second == OperatorFamily::kMoe && has_tokens) {
    return ShapeModel::kSaturating;
  }
  switch (cell.first) {
    case Channel::kCompute:
      // Only attention reads the KV context and grows with a prefill's square.
      if (!has_tokens) return ShapeModel::kPowerLawInSize;
      return cell.second == OperatorFamily::kAttention ? ShapeModel::kLinearInTokens
                                                       : ShapeModel::kTokenWork;
    case Channel::kStepTime:
      return has_tokens ? ShapeModel::kLinearInTokens : ShapeModel::kPowerLawInSize;
    case Channel::kFrontend:
    case Channel::kBackend:
    case Channel::kStepGap:
    case Channel::kStall:
      return ShapeModel::kAffineInRequests;
    case Channel::kCollective:
    case Channel::kCollectiveTransfer:
    case Channel::kSync:
      return ShapeModel::kAffineInSize;
    default:
      return ShapeModel::kPowerLawInSize;
  }
}

// The smallest sigma of a channel's series: half a count, or the traces' timing resolution;
// a mean over n calls (calls: each step's), each timed to that resolution, is resolved to
// about that over sqrt(n): a launch 4 us longer is no finer than 1 us alone, but 2,000 in
// a step are.
double ResolutionOf(Channel channel, const DeviationOptions& options, std::vector<double>* calls) {
  if (IsCountChannel(channel)) return 0.5;
  if (calls->empty()) return options.time_floor_ns;
  return options.time_floor_ns / std::sqrt(std::max(1.0, base::MedianInPlace(calls)));
}

// Whether a short capture's level shift leaves a channel's baseline (its slow steps out):
// the rank's own work or idleness, not a wait: a collective's time holds the wait for its
// peers, a synchronization the wait for the device, the gap before a step the wait for the
// scheduler. A stall (nothing recorded on host or device) is the rank's own: a rank waiting
// for a peer sits in a collective or a synchronization. The step's time is no evidence,
// only the cost and a stall's noise, both measured against the rank's normal steps.
bool LevelShiftsLeftOut(Channel channel) {
  switch (channel) {
    case Channel::kCollective:
    case Channel::kSync:
    case Channel::kStepGap:
      return false;
    default:
      return true;
  }
}

// Leaves out of a rank's series (numbers: each sample's step number; span: how many
// steps the rank ran) a slower regime over a window of steps (a fault lasting half the
// run), so it does not become its own normal.
void DropSlowRegime(double resolution, const DeviationOptions& options, Channel channel,
                    ShapeModel model, const std::vector<int64_t>& numbers, int64_t span,
                    std::vector<StepShape>* shapes, std::vector<double>* samples) {
  localize::ShiftOptions shift;
  shift.min_scale = resolution;
  shift.relative_floor = options.relative_floor;
  shift.level_shifts = LevelShiftsLeftOut(channel);
  // Work that grows with the batch (host work per sequence, bytes per token) is searched
  // in what its first fit leaves unexplained: a decode draining is not a slow regime.
  std::vector<double> unexplained = *samples;
  if (model == ShapeModel::kAffineInRequests || model == ShapeModel::kAffineInSize) {
    const ChannelBaseline first(*shapes, *samples, resolution, model);
    std::vector<double> values = *samples;
    const double median = base::MedianInPlace(&values);
    for (size_t i = 0; i < unexplained.size(); ++i) {
      unexplained[i] += median - first.Expected((*shapes)[i]);
    }
  }
  const localize::SlowRegime regime =
      localize::FindSlowRegime(unexplained, numbers, span, options.max_slow_span, shift);
  if (regime.z <= 0.0) return;
  size_t kept = 0;
  for (size_t i = 0; i < samples->size(); ++i) {
    if (regime.slow[i]) continue;
    (*shapes)[kept] = (*shapes)[i];
    (*samples)[kept] = (*samples)[i];
    ++kept;
  }
  shapes->resize(kept);
  samples->resize(kept);
}

// Leaves out of a role's series (several ranks; groups: each sample's global step) the
// steps of a slower regime common to its ranks (a kernel family or a link slower on
// every rank for half the run), found in the median over the ranks of what a first fit
// leaves unexplained.
void DropCommonSlowRegime(double resolution, const DeviationOptions& options, ShapeModel model,
                          const std::vector<int64_t>& groups, std::vector<StepShape>* shapes,
                          std::vector<double>* samples) {
  if (samples->empty()) return;
  const ChannelBaseline first(*shapes, *samples, resolution, model);
  std::map<int64_t, std::vector<double>> by_group;
  for (size_t i = 0; i < samples->size(); ++i) {
    by_group[groups[i]].push_back((*samples)[i] - first.Expected((*shapes)[i]));
  }
  std::vector<double> series;
  std::vector<int64_t> positions;
  for (auto& [group, residuals] : by_group) {
    positions.push_back(group);
    series.push_back(base::MedianInPlace(&residuals));
  }
  localize::ShiftOptions shift;
  shift.min_scale = resolution;
  shift.relative_floor = options.relative_floor;
  shift.level_shifts = false;  // residuals: no level to weigh a step up against
  const int64_t span = positions.back() - positions.front() + 1;
  const localize::SlowRegime regime =
      localize::FindSlowRegime(series, positions, span, options.max_slow_span, shift);
  if (regime.z <= 0.0) return;
  std::set<int64_t> slow;
  for (size_t i = 0; i < positions.size(); ++i) {
    if (regime.slow[i]) slow.insert(positions[i]);
  }
  size_t kept = 0;
  for (size_t i = 0; i < samples->size(); ++i) {
    if (slow.count(groups[i])) continue;
    (*shapes)[kept] = (*shapes)[i];
    (*samples)[kept] = (*samples)[i];
    ++kept;
  }
  shapes->resize(kept);
  samples->resize(kept);
}

// How many steps each rank ran, first to last scored step number.
std::map<int32_t, int64_t> StepSpans(const model::Trace& trace,
                                     const std::vector<uint32_t>& scored) {
  std::map<int32_t, std::pair<int64_t, int64_t>> range;
  for (uint32_t s : scored) {
    const int64_t number = trace.steps.number[s];
    auto [it, inserted] = range.try_emplace(trace.steps.rank[s], number, number);
    it->second.first = std::min(it->second.first, number);
    it->second.second = std::max(it->second.second, number);
  }
  std::map<int32_t, int64_t> spans;
  for (const auto& [rank, ends] : range) spans[rank] = ends.second - ends.first + 1;
  return spans;
}

// The rank of each role context that one rank alone plays (-1: several ranks).
std::map<localize::BaselineKey, int32_t> OnlyRanks(
    const model::Trace& trace,
    const std::map<localize::BaselineKey, std::vector<uint32_t>>& steps_of) {
  std::map<localize::BaselineKey, int32_t> only;
  for (const auto& [key, steps] : steps_of) {
    if (key.rank >= 0 || steps.empty()) continue;
    int32_t rank = trace.steps.rank[steps.front()];
    for (uint32_t s : steps) {
      if (trace.steps.rank[s] != rank) rank = -1;
    }
    only[key] = rank;
  }
  return only;
}

// Channels of host calls, judged per call.
bool IsCallChannel(Channel channel) {
  return channel == Channel::kLaunch || channel == Channel::kCollectiveLaunch ||
         channel == Channel::kHostCopy || channel == Channel::kSync ||
         channel == Channel::kRuntimeOther;
}

// Baseline contexts of a step (step name and phase): its rank's own steps, and the
// steps of every rank of its role (ranks running the same operator families).
struct Contexts {
  std::vector<localize::BaselineKey> rank;
  std::vector<localize::BaselineKey> role;
};

// A step's kind when the trace says nothing of its batch (no requests, no tokens: Kineto
// and nsys captures as users have them): the half-octave of the device work it ran
// (kernels, collectives, copies). A benchmark that alternates two step bodies of 6 and 2
// kernels under one step name runs two kinds of step, not one whose every other step is
// slow. With a batch, 0: the shapes follow it.
int32_t StructureBucket(const model::Trace& trace, uint32_t s) {
  if (trace.steps.requests_count[s] > 0) return 0;
  int64_t device_work = 0;
  for (uint32_t n = trace.steps.node_begin[s].value(); n < trace.steps.node_end[s].value(); ++n) {
    const model::Layer layer = trace.events.layer[trace.nodes.event[n].value()];
    device_work += model::IsDeviceWork(layer);
  }
  return 1 + static_cast<int32_t>(std::floor(2.0 * std::log2(1.0 + device_work)));
}

// Steps whose batch the trace does not say: every step of a trace without token counts,
// and, with them, a data-parallel rank's dummy batch in a global step where another rank
// prefills: run to keep the collectives in step, it does a prefill's work while its
// tokens say none. (Dummy decodes beside decodes look like decodes: left as they are.)
std::vector<bool> BatchUnknown(const model::Trace& trace, const std::vector<uint32_t>& scored) {
  std::vector<bool> unknown(trace.steps.size(), false);
  if (!trace.strings.Find("tokens").valid()) {
    for (uint32_t s : scored) unknown[s] = true;
    return unknown;
  }
  std::set<int64_t> prefill_groups;
  for (uint32_t s : scored) {
    if (trace.steps.requests_count[s] > 0 && trace.steps.phase[s] == model::StepPhase::kPrefill)
      prefill_groups.insert(GroupOf(trace, s));
  }
  for (uint32_t s : scored) {
    unknown[s] = trace.steps.requests_count[s] == 0 && prefill_groups.count(GroupOf(trace, s));
  }
  return unknown;
}

// The steps whose batch is unknown split by StructureBucket. A kind with fewer than
// min_samples steps among the ranks of its role has no baseline of its own: it joins the
// steps with a batch when the role has enough of them, else (a capture without requests
// and one heavier step) the role keeps one baseline for all its steps.
void SplitByStructure(const model::Trace& trace, const std::vector<uint32_t>& scored,
                      const std::map<int32_t, int32_t>& roles, int64_t min_samples,
                      std::vector<localize::BaselineKey>* keys) {
  auto role_of = [&](int32_t rank) {
    auto role = roles.find(rank);
    return role == roles.end() ? -1 - rank : role->second;
  };
  auto kind_of = [&](uint32_t s) {
    localize::BaselineKey kind = (*keys)[s];
    kind.rank = role_of(trace.steps.rank[s]);
    return kind;
  };
  const std::vector<bool> unknown = BatchUnknown(trace, scored);
  std::map<localize::BaselineKey, int64_t> kinds;  // keyed by role
  for (uint32_t s : scored) {
    if (unknown[s]) (*keys)[s].batch_bucket = StructureBucket(trace, s);
    ++kinds[kind_of(s)];
  }
  std::map<int32_t, int64_t> with_batch;  // per role
  std::set<int32_t> kept_whole;           // roles
  for (const auto& [kind, steps] : kinds) {
    if (kind.batch_bucket == 0) with_batch[kind.rank] += steps;
  }
  for (const auto& [kind, steps] : kinds) {
    if (steps < min_samples && with_batch[kind.rank] < min_samples) kept_whole.insert(kind.rank);
  }
  for (uint32_t s : scored) {
    const auto kind = kinds.find(kind_of(s));
    if (kept_whole.count(kind->first.rank) || kind->second < min_samples)
      (*keys)[s].batch_bucket = 0;
  }
}

Contexts ContextKeys(const model::Trace& trace, const localize::StepFeatures& features,
                     const std::vector<uint32_t>& scored, int64_t min_samples) {
  const std::map<int32_t, int32_t> roles = localize::RankRoles(trace, features);
  Contexts keys{std::vector<localize::BaselineKey>(trace.steps.size()),
                std::vector<localize::BaselineKey>(trace.steps.size())};
  for (uint32_t s : scored) {
    keys.rank[s] = localize::ContextKey(trace, model::StepIndex(s), trace.steps.rank[s]);
    keys.rank[s].batch_bucket = 0;
  }
  SplitByStructure(trace, scored, roles, min_samples, &keys.rank);
  for (uint32_t s : scored) {
    auto role = roles.find(trace.steps.rank[s]);
    keys.role[s] = keys.rank[s];
    keys.role[s].rank = -2 - (role == roles.end() ? 0 : role->second);
  }
  return keys;
}

// Device work is judged against the rank's role: tensor-parallel peers run the same
// kernels on the same batch, so a fault on one rank (even one lasting half of its steps)
// stays out of the median; their steps end together. Host work, waits and gaps differ by rank (the
// rank that schedules does more), so each rank is its own baseline for them.
bool JudgedByRole(Channel channel) {
  return channel == Channel::kCompute || channel == Channel::kDeviceCopy ||
         channel == Channel::kStepTime || channel == Channel::kCollective ||
         channel == Channel::kCollectiveTransfer;
}

// The baseline of each (context, channel) of a run, fitted when first asked for.
class ChannelModels {
 public:
  using StepsOf = std::map<localize::BaselineKey, std::vector<uint32_t>>;
  ChannelModels(const model::Trace& trace, const std::vector<StepValues>& values,
                const std::vector<StepShape>& shapes, const StepsOf& steps_of,
                const std::map<localize::BaselineKey, int32_t>& only_rank_of,
                const std::map<int32_t, int64_t>& span_of, bool has_tokens,
                const DeviationOptions& options)
      : trace_(trace), values_(values), shapes_(shapes), steps_of_(steps_of),
        only_rank_of_(only_rank_of), span_of_(span_of), has_tokens_(has_tokens),
        options_(options) {}

  const FittedChannel& Of(const localize::BaselineKey& key, CellKey cell) {
    auto [it, inserted] = models_.try_emplace({key, cell});
    if (inserted) it->second = Fit(key, cell);
    return it->second;
  }

 private:
  // A context's series of one channel: per step, its value (per call for call channels),
  // shape, number and group.
  struct Series {
    std::vector<StepShape> shapes;
    std::vector<double> samples, calls;
    std::vector<int64_t> numbers, groups;
  };

  Series SeriesOf(const localize::BaselineKey& key, CellKey cell) const {
    Series series;
    auto steps = steps_of_.find(key);
    if (steps == steps_of_.end()) return series;
    for (uint32_t s : steps->second) {
      auto found = values_[s].find(cell);
      const double value = found == values_[s].end() ? 0.0 : found->second.first;
      if (IsCallChannel(cell.first)) {
        // Per call: a step that makes more calls (eager, not a CUDA graph) is not slower.
        if (found == values_[s].end() || found->second.second <= 0) continue;
        series.samples.push_back(value / static_cast<double>(found->second.second));
        series.calls.push_back(static_cast<double>(found->second.second));
      } else {
        series.samples.push_back(value);
      }
      series.shapes.push_back(shapes_[s]);
      series.numbers.push_back(trace_.steps.number[s]);
      series.groups.push_back(GroupOf(trace_, s));
    }
    return series;
  }

  FittedChannel Fit(const localize::BaselineKey& key, CellKey cell) {
    const Series series = SeriesOf(key, cell);
    std::vector<double> calls = series.calls;
    const double resolution = ResolutionOf(cell.first, options_, &calls);
    const ShapeModel model = ShapeModelOf(cell, has_tokens_);
    auto only = only_rank_of_.find(key);
    const int32_t only_rank = key.rank >= 0 ? key.rank : only == only_rank_of_.end() ? -1
                                                                                   : only->second;
    // Replicas that pad their batches to the largest: device work follows the padded size.
    // A role's channel keeps the better fit (the logits' all-gather follows its own
    // sequences where the GEMMs run padded); a rank's own channel, fitted for every rank,
    // follows the run's choice.
    const bool padded_differs = FollowsDeviceWork(cell.first) && AnyPadded(series.shapes);
    const bool rank_key = key.rank >= 0;
    auto fit_padded = [&] {
      std::vector<StepShape> padded;
      for (const StepShape& shape : series.shapes) padded.push_back(Padded(shape));
      return FittedChannel{FitSeries(series, padded, cell, model, resolution, only_rank), true};
    };
    if (padded_differs && rank_key && RunPads()) return fit_padded();
    FittedChannel own{FitSeries(series, series.shapes, cell, model, resolution, only_rank)};
    if (!padded_differs || rank_key) return own;
    FittedChannel alternative = fit_padded();
    return alternative.sigma() < own.sigma() ? alternative : own;
  }

  // Whether the run's replicas pad their batches to the largest (vLLM pads the replicas of
  // an MoE model): their device work follows the padded size. A property of the
  // deployment, so decided once: the roles' compute time per step, fitted on each size,
  // fits better on the padded one over most of the roles' steps.
  bool RunPads() {
    if (pads_) return *pads_;
    pads_ = false;
    size_t padded_better = 0, own_better = 0;
    for (const auto& [key, steps] : steps_of_) {
      if (key.rank >= 0) continue;  // roles only
      std::vector<StepShape> own, padded;
      std::vector<double> compute;
      for (uint32_t s : steps) {
        double total = 0.0;
        for (const auto& [cell, entry] : values_[s]) {
          if (cell.first == Channel::kCompute) total += entry.first;
        }
        own.push_back(shapes_[s]);
        padded.push_back(Padded(shapes_[s]));
        compute.push_back(total);
      }
      if (!AnyPadded(own)) continue;
      const ShapeModel model = has_tokens_ ? ShapeModel::kTokenWork : ShapeModel::kPowerLawInSize;
      const double floor = options_.time_floor_ns;
      const double own_sigma = ChannelBaseline(own, compute, floor, model).sigma();
      const double padded_sigma = ChannelBaseline(padded, compute, floor, model).sigma();
      (padded_sigma < own_sigma ? padded_better : own_better) += steps.size();
    }
    pads_ = padded_better > own_better;
    return *pads_;
  }

  ChannelBaseline FitSeries(const Series& series, std::vector<StepShape> shapes, CellKey cell,
                            ShapeModel model, double resolution, int32_t only_rank) const {
    std::vector<double> samples = series.samples;
    if (only_rank >= 0) {
      // One rank's series (its own key, or a role it alone plays): a slower regime over
      // a window of steps is left out, so a fault lasting half the run is not its normal.
      auto span = span_of_.find(only_rank);
      DropSlowRegime(resolution, options_, cell.first, model, series.numbers,
                     span == span_of_.end() ? 0 : span->second, &shapes, &samples);
    } else if (cell.first == Channel::kCompute || cell.first == Channel::kCollectiveTransfer) {
      // A family slower on every rank of the role over a window (a kernel slowdown, a
      // link's transfers) would be the role's normal too. Not the collectives' whole
      // time: a slow rank's peers wait in them together, and that is the slow rank's
      // cause, not a link's.
      DropCommonSlowRegime(resolution, options_, model, series.groups, &shapes, &samples);
    }
    return ChannelBaseline(shapes, samples, resolution, model);
  }

  const model::Trace& trace_;
  const std::vector<StepValues>& values_;
  const std::vector<StepShape>& shapes_;
  const StepsOf& steps_of_;
  const std::map<localize::BaselineKey, int32_t>& only_rank_of_;
  const std::map<int32_t, int64_t>& span_of_;
  const bool has_tokens_;
  const DeviationOptions& options_;
  std::optional<bool> pads_;
  std::map<std::pair<localize::BaselineKey, CellKey>, FittedChannel> models_;
};

}  // namespace

int64_t GroupOf(const model::Trace& trace, size_t s) {
  return trace.steps.global_step[s] >= 0 ? trace.steps.global_step[s] : trace.steps.number[s];
}

std::vector<NodeCell> NodeCells(const model::Trace& trace, const localize::StepFeatures& features) {
  std::vector<NodeCell> cells(trace.nodes.size());
  for (size_t row = 0; row < features.size(); ++row) {
    const OperatorFamily family = features.family[row];
    const Channel channel = ChannelOfFamily(family);
    const bool by_family = channel == Channel::kCompute || channel == Channel::kCollective;
    for (int64_t i = 0; i < features.count[row]; ++i) {
      const uint32_t n = features.instances[features.instances_begin[row] + i].value();
      cells[n] = {channel, by_family ? family : OperatorFamily::kUnnamed};
    }
  }
  for (size_t n = 0; n < trace.nodes.size(); ++n) {
    const model::EventRow event = trace.nodes.event[n];
    if (IsHostRange(trace, event)) {
      const bool inner = trace.nodes.parent[n].valid();
      const Channel channel = trace.events.layer[event.value()] == model::Layer::kFe
                                  ? Channel::kFrontend
                                  : Channel::kBackend;
      cells[n] = {inner ? channel : Channel::kStepTime, OperatorFamily::kUnnamed};
    }
    // The launch of a collective kernel (CollectiveLaunches).
    const std::optional<model::NodeIndex> call = CollectiveLaunchCall(trace, n);
    if (call && cells[call->value()].channel == Channel::kLaunch) {
      cells[call->value()].channel = Channel::kCollectiveLaunch;
    }
  }
  return cells;
}

std::vector<int32_t> CollectiveMatchOfEvents(const model::Trace& trace) {
  const model::CollectiveMatchTable& matches = trace.collective_matches;
  std::vector<int32_t> match_of_event(trace.events.size(), -1);
  auto is_device = [&](model::EventRow event) {
    return trace.threads.is_device[trace.events.thread[event.value()].value()] != 0;
  };
  uint32_t match_count = 0;
  for (size_t i = 0; i < matches.size(); ++i) {
    match_count = std::max(match_count, matches.match[i].value() + 1);
  }
  std::vector<uint8_t> has_device(match_count, 0);
  for (size_t i = 0; i < matches.size(); ++i) {
    if (is_device(matches.event[i])) has_device[matches.match[i].value()] = 1;
  }
  for (size_t i = 0; i < matches.size(); ++i) {
    const uint32_t m = matches.match[i].value();
    if (is_device(matches.event[i]) || !has_device[m]) {
      match_of_event[matches.event[i].value()] = static_cast<int32_t>(m);
    }
  }
  return match_of_event;
}

std::pair<model::TimeNs, model::TimeNs> LongestStall(const model::Trace& trace, uint32_t s) {
  const model::TimeNs begin = trace.steps.start_ns[s], end = trace.steps.end_ns[s];
  std::vector<std::pair<model::TimeNs, model::TimeNs>> spans;
  for (uint32_t n = trace.steps.node_begin[s].value(); n < trace.steps.node_end[s].value(); ++n) {
    const model::EventRow event = trace.nodes.event[n];
    if (!IsWork(trace.events.layer[event.value()])) continue;
    const model::TimeNs start = std::max(begin, trace.events.start_ns[event.value()]);
    const model::TimeNs stop = std::min(end, trace.events.end_ns(event));
    if (stop > start) spans.emplace_back(start, stop);
  }
  std::sort(spans.begin(), spans.end());
  model::TimeNs covered = begin;
  std::pair<model::TimeNs, model::TimeNs> longest{begin, begin};
  auto consider = [&](model::TimeNs from, model::TimeNs to) {
    if (to - from > longest.second - longest.first) longest = {from, to};
  };
  for (const auto& [start, stop] : spans) {
    consider(covered, start);
    covered = std::max(covered, stop);
  }
  consider(covered, end);
  return longest;
}

DeviationMap BuildDeviationMap(const model::Trace& trace, const DeviationOptions& options) {
  return BuildDeviationMap(trace, localize::ComputeStepFeatures(trace), options);
}

DeviationMap BuildDeviationMap(const model::Trace& trace, const localize::StepFeatures& features,
                               const DeviationOptions& options) {
  DeviationMap map;
  if (trace.steps.size() == 0) return map;
  const std::vector<StepValues> values = MeasureSteps(trace, features);
  const std::vector<uint32_t> scored = ScoredSteps(trace);
  map.skipped_steps = static_cast<int64_t>(trace.steps.size() - scored.size());
  const Contexts keys = ContextKeys(trace, features, scored, options.min_samples);
  std::map<localize::BaselineKey, std::vector<uint32_t>> steps_of;
  for (uint32_t s : scored) {
    steps_of[keys.rank[s]].push_back(s);
    steps_of[keys.role[s]].push_back(s);
  }
  std::map<int32_t, int64_t> span_of = StepSpans(trace, scored);
  std::map<localize::BaselineKey, int32_t> only_rank_of = OnlyRanks(trace, steps_of);
  const std::vector<StepShape> shapes = StepShapes(trace);
  const bool has_tokens = std::any_of(shapes.begin(), shapes.end(),
                                      [](const StepShape& shape) { return shape.context > 0.0; });
  // Channels present in any step of a context: absent ones count as zeros.
  std::map<localize::BaselineKey, std::set<CellKey>> channels_of;
  for (const auto& [key, steps] : steps_of) {
    for (uint32_t s : steps) {
      for (const auto& entry : values[s]) channels_of[key].insert(entry.first);
    }
  }
  ChannelModels models(trace, values, shapes, steps_of, only_rank_of, span_of, has_tokens, options);
  // The rank's own steps when it has enough of them, else its role's.
  auto key_of = [&](uint32_t s, Channel channel) -> const localize::BaselineKey& {
    const bool own = !JudgedByRole(channel) &&
                     static_cast<int64_t>(steps_of[keys.rank[s]].size()) >= options.min_samples;
    return own ? keys.rank[s] : keys.role[s];
  };
  const std::vector<int32_t> nodes = NodeOfProcesses(trace);
  for (size_t p = 0; p < nodes.size(); ++p) {
    if (nodes[p] < 0 || !trace.processes.host[p].valid()) continue;
    if (map.node_names.size() <= static_cast<size_t>(nodes[p])) map.node_names.resize(nodes[p] + 1);
    if (map.node_names[nodes[p]].empty())
      map.node_names[nodes[p]] = std::string(trace.str(trace.processes.host[p]));
  }
  std::set<int32_t> ranks;
  for (uint32_t s : scored) {
    if (static_cast<int64_t>(steps_of[keys.role[s]].size()) < options.min_samples) {
      ++map.skipped_steps;
      continue;
    }
    MapStep step;
    step.step = model::StepIndex(s);
    step.rank = trace.steps.rank[s];
    step.node = nodes[trace.steps.process[s].value()];
    step.number = trace.steps.number[s];
    step.group = GroupOf(trace, s);
    step.start_ns = trace.steps.start_ns[s];
    step.cells_begin = static_cast<uint32_t>(map.cells.size());
    const CellKey step_time{Channel::kStepTime, OperatorFamily::kUnnamed};
    const FittedChannel& step_baseline = models.Of(key_of(s, Channel::kStepTime), step_time);
    const double step_floor = options.step_floor * step_baseline.Expected(shapes[s]);
    std::set<CellKey> channels = channels_of[keys.rank[s]];
    for (const CellKey& cell_key : channels_of[keys.role[s]]) {
      if (JudgedByRole(cell_key.first)) channels.insert(cell_key);
    }
    for (const CellKey& cell_key : channels) {
      const FittedChannel& baseline = models.Of(key_of(s, cell_key.first), cell_key);
      Cell cell;
      cell.step_row = static_cast<uint32_t>(map.steps.size());
      cell.channel = cell_key.first;
      cell.family = cell_key.second;
      auto found = values[s].find(cell_key);
      if (found != values[s].end()) {
        cell.value = found->second.first;
        cell.count = found->second.second;
      }
      // Calls: what one call takes, times the calls the step made.
      const double calls = IsCallChannel(cell.channel) ? static_cast<double>(cell.count) : 1.0;
      cell.expected = calls * baseline.Expected(shapes[s]);
      const double relative_floor = cell.channel == Channel::kCollectiveTransfer
                                        ? options.transfer_relative_floor
                                        : options.relative_floor;
      cell.sigma = std::max(calls * baseline.sigma(), relative_floor * std::abs(cell.expected));
      // A healthy run's calls do not fail, however many steps of this one saw failures.
      if (cell.channel == Channel::kFailedCalls) cell.expected = 0.0, cell.sigma = 0.25;
      // A stall is judged no finer than the step it lies in: idle stretches that take
      // two or three set lengths (a data loader's wait) tie most steps at one length,
      // and their spread reads as none. The step of its own rank, in its normal (its slow
      // regime left out): its role's series holds every rank's steps of a fault's window,
      // which one rank's stall makes its peers wait through too.
      if (cell.channel == Channel::kStall) {
        const bool own = static_cast<int64_t>(steps_of[keys.rank[s]].size()) >= options.min_samples;
        const FittedChannel& own_step = models.Of(own ? keys.rank[s] : keys.role[s], step_time);
        cell.sigma = std::max(cell.sigma, own_step.sigma());
      }
      // A channel usually absent is judged on the step's scale.
      if (!IsCountChannel(cell.channel) && cell.expected <= 0.0) {
        cell.sigma = std::max(cell.sigma, step_floor);
      }
      map.cells.push_back(cell);
    }
    step.cells_end = static_cast<uint32_t>(map.cells.size());
    map.steps.push_back(step);
    ranks.insert(step.rank);
    for (uint32_t n = trace.steps.node_begin[s].value();
         n < trace.steps.node_end[s].value() && !map.device_work; ++n) {
      const model::EventRow event = trace.nodes.event[n];
      map.device_work = trace.threads.is_device[trace.events.thread[event.value()].value()] != 0;
    }
  }
  map.ranks.assign(ranks.begin(), ranks.end());
  return map;
}

std::vector<int32_t> NodeOfProcesses(const model::Trace& trace) {
  std::vector<int32_t> nodes(trace.processes.size(), -1);
  std::map<model::StringId, int32_t> by_host;
  for (size_t p = 0; p < nodes.size(); ++p) {
    nodes[p] = trace.processes.node[p];
    if (nodes[p] >= 0 || !trace.processes.host[p].valid()) continue;
    nodes[p] = by_host.try_emplace(trace.processes.host[p], static_cast<int32_t>(by_host.size()))
                   .first->second;
  }
  return nodes;
}

}  // namespace teller::cause
