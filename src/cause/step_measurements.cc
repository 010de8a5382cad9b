#include "cause/step_measurements.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

namespace teller::cause {

using localize::OperatorFamily;

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

// Index of `key` in an ascending column, or -1.
template <typename T>
int32_t IndexOf(const std::vector<T>& column, T key) {
  const auto found = std::lower_bound(column.begin(), column.end(), key);
  if (found == column.end() || *found != key) return -1;
  return static_cast<int32_t>(found - column.begin());
}

// Per event of the part, the merge's row of the match it stands for, else -1: as
// CollectiveMatchOfEvents, host members counting only for matches without device ones
// on any rank.
base::StatusOr<std::vector<int32_t>> MergedMatchOfEvents(const model::Trace& trace,
                                                         const MergedMeasurementSummary& merged) {
  const model::CollectiveMatchTable& matches = trace.collective_matches;
  std::vector<int32_t> of_event(trace.events.size(), -1);
  for (size_t i = 0; i < matches.size(); ++i) {
    const int32_t m = IndexOf(merged.match, matches.match[i].value());
    if (m < 0) return base::NotFound("measurements: match {} not merged", matches.match[i].value());
    const model::EventRow event = matches.event[i];
    const bool device = trace.threads.is_device[trace.events.thread[event.value()].value()] != 0;
    if (device || !merged.has_device[m]) of_event[event.value()] = m;
  }
  return of_event;
}

// Per step of the trace, its shape with the padded size of the merge.
base::StatusOr<std::vector<StepShape>> PaddedShapes(const model::Trace& trace,
                                                    const MergedMeasurementSummary& merged) {
  std::vector<StepShape> shapes = StepShapes(trace);
  for (size_t s = 0; s < shapes.size(); ++s) {
    const int64_t global = trace.steps.global_step[s];
    if (global < 0) continue;
    const int32_t g = IndexOf(merged.global_step, global);
    if (g < 0) return base::NotFound("measurements: global step {} not merged", global);
    shapes[s].padded_size = merged.largest_size[g];
  }
  return shapes;
}

// The rows of every step: its fields and its values as CSR.
StepMeasurements ToColumns(const model::Trace& trace, const std::vector<StepShape>& shapes,
                           const std::vector<StepValues>& values) {
  StepMeasurements rows;
  rows.cells_begin.push_back(0);
  for (size_t s = 0; s < trace.steps.size(); ++s) {
    rows.rank.push_back(trace.steps.rank[s]);
    rows.process.push_back(trace.steps.process[s].value());
    rows.number.push_back(trace.steps.number[s]);
    rows.group.push_back(GroupOf(trace, s));
    rows.start_ns.push_back(trace.steps.start_ns[s]);
    rows.size.push_back(shapes[s].size);
    rows.context.push_back(shapes[s].context);
    rows.requests.push_back(shapes[s].requests);
    rows.padded_size.push_back(shapes[s].padded_size);
    rows.context_spread.push_back(shapes[s].context_spread);
    for (const auto& [key, entry] : values[s]) {
      rows.channel.push_back(key.first);
      rows.family.push_back(key.second);
      rows.value.push_back(entry.first);
      rows.count.push_back(entry.second);
    }
    rows.cells_begin.push_back(static_cast<uint32_t>(rows.channel.size()));
  }
  return rows;
}

// A step's name without its digits ("execute_context_<n>(...)" steps share a context).
std::string NameWithoutDigits(std::string_view name) {
  std::string kept;
  for (char c : name) {
    if (c < '0' || c > '9') kept.push_back(c);
  }
  return kept;
}

// The index of `name` in the rows' pool, added when new.
uint32_t PoolIndex(std::string_view name, std::map<std::string, uint32_t, std::less<>>* index,
                   std::vector<std::string>* names) {
  auto found = index->find(name);
  if (found != index->end()) return found->second;
  const auto added = static_cast<uint32_t>(names->size());
  names->emplace_back(name);
  index->emplace(std::string(name), added);
  return added;
}

// A step's kind when the trace says nothing of its batch: the half-octave of the device
// work it ran (kernels, collectives, copies); 0 when it serves requests (the shapes
// follow its batch).
int32_t StructureBucket(const model::Trace& trace, size_t s) {
  if (trace.steps.requests_count[s] > 0) return 0;
  int64_t device_work = 0;
  for (uint32_t n = trace.steps.node_begin[s].value(); n < trace.steps.node_end[s].value(); ++n) {
    const model::Layer layer = trace.events.layer[trace.nodes.event[n].value()];
    device_work += model::IsDeviceWork(layer);
  }
  return 1 + static_cast<int32_t>(std::floor(2.0 * std::log2(1.0 + device_work)));
}

// Whether any node of the step ran on a device track.
bool RanDeviceWork(const model::Trace& trace, size_t s) {
  for (uint32_t n = trace.steps.node_begin[s].value(); n < trace.steps.node_end[s].value(); ++n) {
    const model::EventRow event = trace.nodes.event[n];
    if (trace.threads.is_device[trace.events.thread[event.value()].value()] != 0) return true;
  }
  return false;
}

// What chooses and groups the scored steps (StepMeasurements' second half).
void AddFitInputs(const model::Trace& trace, const localize::StepFeatures& features,
                  StepMeasurements* rows) {
  std::map<std::string, uint32_t, std::less<>> index;
  rows->families.assign(trace.steps.size(), 0);
  for (size_t row = 0; row < features.size(); ++row) {
    if (features.count[row] <= 0) continue;
    rows->families[features.step[row].value()] |= uint64_t{1}
                                                   << static_cast<unsigned>(features.family[row]);
  }
  for (size_t s = 0; s < trace.steps.size(); ++s) {
    rows->serving.push_back(trace.steps.requests_count[s] > 0 ? 1 : 0);
    rows->name.push_back(
        PoolIndex(NameWithoutDigits(trace.str(trace.steps.name[s])), &index, &rows->names));
    rows->phase.push_back(trace.steps.phase[s]);
    rows->structure_bucket.push_back(StructureBucket(trace, s));
    rows->device_work.push_back(RanDeviceWork(trace, s) ? 1 : 0);
  }
  for (size_t p = 0; p < trace.processes.size(); ++p) {
    rows->process_node.push_back(trace.processes.node[p]);
    const model::StringId host = trace.processes.host[p];
    rows->process_host.push_back(host.valid() ? PoolIndex(trace.str(host), &index, &rows->names)
                                              : StepMeasurements::kNoHost);
  }
  rows->has_step_requests = !trace.step_requests.empty();
  rows->has_tokens_arg = trace.strings.Find("tokens").valid();
}

template <typename T>
size_t Bytes(const std::vector<T>& column) {
  return column.size() * sizeof(T);
}

base::Status AddCollectiveTransfers(const model::Trace& trace, const std::vector<NodeCell>& cells,
                                    const MergedMeasurementSummary& merged,
                                    std::vector<StepValues>* values) {
  const base::StatusOr<std::vector<int32_t>> merged_of_event = MergedMatchOfEvents(trace, merged);
  if (!merged_of_event.ok()) return merged_of_event.status();
  for (size_t n = 0; n < trace.nodes.size(); ++n) {
    const model::EventRow event = trace.nodes.event[n];
    const int32_t m = (*merged_of_event)[event.value()];
    if (m < 0 || merged.members[m] < 2) continue;
    if (cells[n].channel != Channel::kCollective || !trace.nodes.step[n].valid()) continue;
    const int64_t end = trace.events.end_ns(event);
    auto& cell =
        (*values)[trace.nodes.step[n].value()][{Channel::kCollectiveTransfer, cells[n].family}];
    cell.first += static_cast<double>(std::max<int64_t>(0, end - merged.last_arrival_ns[m]));
    ++cell.second;
  }
  return base::OkStatus();
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
bool HadWorkWaiting(const model::Trace& trace, bool run_has_requests, uint32_t before,
                    uint32_t after) {
  if (!run_has_requests) return true;
  const uint32_t b = trace.steps.requests_begin[before], a = trace.steps.requests_begin[after];
  for (uint32_t i = b; i < b + trace.steps.requests_count[before]; ++i) {
    for (uint32_t j = a; j < a + trace.steps.requests_count[after]; ++j) {
      if (trace.step_requests[i] == trace.step_requests[j]) return true;
    }
  }
  return false;
}

// Channel values of every step of the trace.
base::StatusOr<std::vector<StepValues>> MeasureValues(const model::Trace& trace,
                                                      const localize::StepFeatures& features,
                                                      const MergedMeasurementSummary& merged) {
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
  base::Status transfers =
      AddCollectiveTransfers(trace, NodeCells(trace, features), merged, &values);
  if (!transfers.ok()) return transfers;
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
        HadWorkWaiting(trace, merged.any_step_requests, previous_step[trace.steps.rank[s]], s)) {
      values[s][{Channel::kStepGap, OperatorFamily::kUnnamed}] = {
          static_cast<double>(std::max<model::TimeNs>(0, start - previous->second)), 1};
    }
    previous_end[trace.steps.rank[s]] = std::max(end, start);
    previous_step[trace.steps.rank[s]] = s;
  }
  return values;
}

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

int64_t StepMeasurements::Find(size_t s, Channel cell_channel,
                               localize::OperatorFamily cell_family) const {
  const std::pair<Channel, OperatorFamily> key{cell_channel, cell_family};
  uint32_t low = cells_begin[s], high = cells_begin[s + 1];
  while (low < high) {
    const uint32_t mid = low + (high - low) / 2;
    if (std::pair(channel[mid], family[mid]) < key) {
      low = mid + 1;
    } else {
      high = mid;
    }
  }
  if (low == cells_begin[s + 1] || channel[low] != cell_channel || family[low] != cell_family) {
    return -1;
  }
  return low;
}

size_t StepMeasurements::ColumnBytes() const {
  size_t name_bytes = 0;
  for (const std::string& text : names) name_bytes += text.size();
  return Bytes(rank) + Bytes(process) + Bytes(number) + Bytes(group) + Bytes(start_ns) +
         Bytes(size) + Bytes(context) + Bytes(requests) + Bytes(padded_size) + Bytes(context_spread) +
         Bytes(cells_begin) +
         Bytes(channel) + Bytes(family) + Bytes(value) + Bytes(count) + Bytes(serving) +
         Bytes(name) + Bytes(phase) + Bytes(structure_bucket) + Bytes(families) +
         Bytes(device_work) + Bytes(process_node) + Bytes(process_host) + name_bytes;
}

size_t MeasurementSummary::ColumnBytes() const {
  return Bytes(match) + Bytes(device_members) + Bytes(host_members) + Bytes(device_last_start_ns) +
         Bytes(host_last_start_ns) + Bytes(global_step) + Bytes(largest_size);
}

size_t MergedMeasurementSummary::ColumnBytes() const {
  return Bytes(match) + Bytes(members) + Bytes(has_device) + Bytes(last_arrival_ns) +
         Bytes(global_step) + Bytes(largest_size);
}

MeasurementSummary SummarizeMeasurementInputs(const model::Trace& part) {
  struct Members {
    int32_t device = 0, host = 0;
    int64_t device_last = std::numeric_limits<int64_t>::min();
    int64_t host_last = std::numeric_limits<int64_t>::min();
  };
  std::map<uint32_t, Members> by_match;
  const model::CollectiveMatchTable& matches = part.collective_matches;
  for (size_t i = 0; i < matches.size(); ++i) {
    const uint32_t event = matches.event[i].value();
    const bool device = part.threads.is_device[part.events.thread[event].value()] != 0;
    Members& members = by_match[matches.match[i].value()];
    (device ? members.device : members.host) += 1;
    int64_t& last = device ? members.device_last : members.host_last;
    last = std::max(last, part.events.start_ns[event]);
  }
  MeasurementSummary summary;
  for (const auto& [match, members] : by_match) {
    summary.match.push_back(match);
    summary.device_members.push_back(members.device);
    summary.host_members.push_back(members.host);
    summary.device_last_start_ns.push_back(members.device_last);
    summary.host_last_start_ns.push_back(members.host_last);
  }
  summary.has_step_requests = !part.step_requests.empty();
  const std::vector<StepShape> shapes = StepShapes(part);
  std::map<int64_t, double> largest;  // as StepShapes: from 0
  for (size_t s = 0; s < shapes.size(); ++s) {
    const int64_t global = part.steps.global_step[s];
    if (global >= 0) largest[global] = std::max(largest[global], shapes[s].size);
  }
  for (const auto& [global, size] : largest) {
    summary.global_step.push_back(global);
    summary.largest_size.push_back(size);
  }
  return summary;
}

base::Status CheckMeasurementSummary(const MeasurementSummary& s) {
  const size_t matches = s.match.size();
  if (s.device_members.size() != matches || s.host_members.size() != matches ||
      s.device_last_start_ns.size() != matches || s.host_last_start_ns.size() != matches ||
      s.largest_size.size() != s.global_step.size()) {
    return base::DataLoss("measurement summary: columns of different lengths");
  }
  if (std::adjacent_find(s.match.begin(), s.match.end(), std::greater_equal<>()) != s.match.end() ||
      std::adjacent_find(s.global_step.begin(), s.global_step.end(), std::greater_equal<>()) !=
          s.global_step.end()) {
    return base::DataLoss("measurement summary: matches or global steps not ascending");
  }
  return base::OkStatus();
}

MergedMeasurementSummary MergeMeasurementSummaries(const std::vector<MeasurementSummary>& parts) {
  struct Members {
    int32_t device = 0, host = 0;
    int64_t device_last = std::numeric_limits<int64_t>::min();
    int64_t host_last = std::numeric_limits<int64_t>::min();
  };
  std::map<uint32_t, Members> by_match;
  std::map<int64_t, double> largest;
  for (const MeasurementSummary& part : parts) {
    for (size_t i = 0; i < part.match.size(); ++i) {
      Members& members = by_match[part.match[i]];
      members.device += part.device_members[i];
      members.host += part.host_members[i];
      members.device_last = std::max(members.device_last, part.device_last_start_ns[i]);
      members.host_last = std::max(members.host_last, part.host_last_start_ns[i]);
    }
    for (size_t g = 0; g < part.global_step.size(); ++g) {
      double& size = largest[part.global_step[g]];
      size = std::max(size, part.largest_size[g]);
    }
  }
  MergedMeasurementSummary merged;
  for (const MeasurementSummary& part : parts) {
    merged.any_step_requests = merged.any_step_requests || part.has_step_requests;
  }
  for (const auto& [match, members] : by_match) {
    const bool device = members.device > 0;
    merged.match.push_back(match);
    merged.has_device.push_back(device ? 1 : 0);
    merged.members.push_back(device ? members.device : members.host);
    merged.last_arrival_ns.push_back(device ? members.device_last : members.host_last);
  }
  for (const auto& [global, size] : largest) {
    merged.global_step.push_back(global);
    merged.largest_size.push_back(size);
  }
  return merged;
}

base::StatusOr<StepMeasurements> MeasureStepsOfPart(const model::Trace& part,
                                                    const localize::StepFeatures& features,
                                                    const MergedMeasurementSummary& merged) {
  base::StatusOr<std::vector<StepShape>> shapes = PaddedShapes(part, merged);
  if (!shapes.ok()) return shapes.status();
  base::StatusOr<std::vector<StepValues>> values = MeasureValues(part, features, merged);
  if (!values.ok()) return values.status();
  StepMeasurements rows = ToColumns(part, *shapes, *values);
  AddFitInputs(part, features, &rows);
  return rows;
}

StepMeasurements MeasureSteps(const model::Trace& trace, const localize::StepFeatures& features) {
  const MergedMeasurementSummary merged =
      MergeMeasurementSummaries({SummarizeMeasurementInputs(trace)});
  return *MeasureStepsOfPart(trace, features, merged);
}

namespace {

template <typename T>
void Append(const std::vector<T>& from, std::vector<T>* to) {
  to->insert(to->end(), from.begin(), from.end());
}

// Appends one part's per-step columns (not the cells' CSR nor the pooled ones).
void AppendStepColumns(const StepMeasurements& part, StepMeasurements* all) {
  Append(part.rank, &all->rank);
  Append(part.number, &all->number);
  Append(part.group, &all->group);
  Append(part.start_ns, &all->start_ns);
  Append(part.size, &all->size);
  Append(part.context, &all->context);
  Append(part.requests, &all->requests);
  Append(part.padded_size, &all->padded_size);
  Append(part.context_spread, &all->context_spread);
  Append(part.channel, &all->channel);
  Append(part.family, &all->family);
  Append(part.value, &all->value);
  Append(part.count, &all->count);
  Append(part.serving, &all->serving);
  Append(part.phase, &all->phase);
  Append(part.structure_bucket, &all->structure_bucket);
  Append(part.families, &all->families);
  Append(part.device_work, &all->device_work);
  Append(part.process_node, &all->process_node);
}

}  // namespace

StepMeasurements ConcatMeasurements(const std::vector<StepMeasurements>& parts) {
  StepMeasurements all;
  all.cells_begin.push_back(0);
  std::map<std::string, uint32_t, std::less<>> index;
  for (const StepMeasurements& part : parts) {
    const auto process_base = static_cast<uint32_t>(all.process_node.size());
    const auto cell_base = static_cast<uint32_t>(all.channel.size());
    for (uint32_t process : part.process) all.process.push_back(process_base + process);
    for (size_t s = 0; s < part.steps(); ++s) {
      all.cells_begin.push_back(cell_base + part.cells_begin[s + 1]);
      all.name.push_back(PoolIndex(part.names[part.name[s]], &index, &all.names));
    }
    for (uint32_t host : part.process_host) {
      all.process_host.push_back(host == StepMeasurements::kNoHost
                                     ? host
                                     : PoolIndex(part.names[host], &index, &all.names));
    }
    AppendStepColumns(part, &all);
    all.has_step_requests = all.has_step_requests || part.has_step_requests;
    all.has_tokens_arg = all.has_tokens_arg || part.has_tokens_arg;
  }
  return all;
}

base::StatusOr<std::vector<int32_t>> RunMatchOfEvents(const model::Trace& part,
                                                      const MergedMeasurementSummary& merged) {
  TELLER_ASSIGN_OR_RETURN(std::vector<int32_t> of_event, MergedMatchOfEvents(part, merged));
  for (int32_t& match : of_event) {
    if (match >= 0) match = static_cast<int32_t>(merged.match[static_cast<size_t>(match)]);
  }
  return of_event;
}

}  // namespace teller::cause
