// Stage 4b: one call-chain tree per step. A step's tree holds its root range, the
// host events nested in it, the device work those events launched, top-level
// host work of the process's other threads that starts in the step's host window
// (BuildOptions::attach_other_threads), and unbound device work or device-side
// annotations of the process that start in the step's extended window. Nodes of
// one step are written contiguously in pre-order, children by start time.
#include <algorithm>
#include <array>
#include <string>

#include "reconstruct/build_state.h"

namespace teller::reconstruct::internal {
namespace {

// Steps of one process, sorted by start, with a running maximum of their ends.
// Finds the earliest-starting step whose [start, end) contains t.
class StepWindows {
 public:
  StepWindows(const std::vector<int64_t>& start_ns, const std::vector<int64_t>& end_ns,
              const std::vector<uint32_t>& process_begin)
      : start_ns_(start_ns), process_begin_(process_begin), running_end_(end_ns) {
    for (size_t p = 0; p + 1 < process_begin.size(); ++p) {
      for (uint32_t s = process_begin[p] + 1; s < process_begin[p + 1]; ++s) {
        running_end_[s] = std::max(running_end_[s], running_end_[s - 1]);
      }
    }
  }

  uint32_t Find(uint32_t process, int64_t t) const {
    auto begin = running_end_.begin() + process_begin_[process];
    auto end = running_end_.begin() + process_begin_[process + 1];
    auto it = std::upper_bound(begin, end, t);
    if (it == end) return kNone;
    auto s = static_cast<uint32_t>(it - running_end_.begin());
    return start_ns_[s] <= t ? s : kNone;
  }

 private:
  const std::vector<int64_t>& start_ns_;
  const std::vector<uint32_t>& process_begin_;
  std::vector<int64_t> running_end_;
};

// step_of: the step an event belongs to; kAncestor marks host ancestors of step
// roots, which never join a step.
constexpr uint32_t kAncestor = kNone - 1;

// Which step each event belongs to, and the steps' windows. parent (state->up) is
// written over as events are placed: it becomes the tree parent.
struct StepAssignment {
  StepAssignment(size_t events, size_t steps, size_t processes)
      : process_begin(processes + 1, 0), start(steps), end(steps), step_of(events, kNone) {}

  bool in_step(uint32_t row) const { return step_of[row] < kAncestor; }

  std::vector<uint32_t> process_begin;  // steps of process p: [process_begin[p], [p + 1])
  std::vector<int64_t> start;
  std::vector<int64_t> end;           // the step root's end
  std::vector<int64_t> extended_end;  // includes work launched in the step
  ScratchVector<uint32_t> step_of;
  int64_t outside = 0;  // events outside every step
};

void SortCandidates(const model::EventTable& events, std::vector<StepCandidate>* candidates) {
  std::sort(candidates->begin(), candidates->end(),
            [&](const StepCandidate& a, const StepCandidate& b) {
              uint32_t pa = events.process[a.row].value(), pb = events.process[b.row].value();
              if (pa != pb) return pa < pb;
              if (events.start_ns[a.row] != events.start_ns[b.row]) {
                return events.start_ns[a.row] < events.start_ns[b.row];
              }
              return a.row < b.row;
            });
}

// Step roots join their step; their host ancestors are marked and cut off.
void PlaceStepRoots(const model::EventTable& events, const std::vector<StepCandidate>& candidates,
                    ScratchVector<uint32_t>& parent, StepAssignment* a) {
  const size_t processes = a->process_begin.size() - 1;
  for (uint32_t s = 0; s < candidates.size(); ++s) {
    uint32_t row = candidates[s].row;
    ++a->process_begin[events.process[row].value() + 1];
    a->start[s] = events.start_ns[row];
    a->end[s] = EndNs(events, row);
    a->step_of[row] = s;
  }
  for (size_t p = 0; p < processes; ++p) a->process_begin[p + 1] += a->process_begin[p];
  for (const StepCandidate& step : candidates) {
    for (uint32_t up = parent[step.row]; up != kNone && a->step_of[up] == kNone; up = parent[up]) {
      a->step_of[up] = kAncestor;
    }
    parent[step.row] = kNone;
  }
}

// Host events: by nesting on their thread, else attached by the host window.
void PlaceHostEvents(const model::Trace& trace, const BuildOptions& options,
                     const std::vector<StepCandidate>& candidates, const BuildState& state,
                     ScratchVector<uint32_t>& parent, StepAssignment* a) {
  const model::EventTable& events = trace.events;
  const model::ThreadTable& threads = trace.threads;
  StepWindows host_windows(a->start, a->end, a->process_begin);
  for (size_t t = 0; t < threads.size(); ++t) {
    if (threads.is_device[t]) continue;
    uint32_t process = threads.process[t].value();
    for (uint32_t i = state.thread_begin[t]; i < state.thread_begin[t + 1]; ++i) {
      uint32_t row = state.order[i];
      if (a->step_of[row] == kAncestor) parent[row] = kNone;
      if (a->step_of[row] != kNone) continue;  // a step root or an ancestor of one
      uint32_t up = parent[row];
      if (up != kNone && a->in_step(up)) {
        a->step_of[row] = a->step_of[up];
        continue;
      }
      parent[row] = kNone;
      if (!options.attach_other_threads) continue;
      uint32_t s = host_windows.Find(process, events.start_ns[row]);
      if (s == kNone || events.thread[candidates[s].row].value() == t) continue;
      a->step_of[row] = s;
      parent[row] = candidates[s].row;
    }
  }
}

// Bound device work goes where its launch went; then a step ends when the last
// work launched in it ends.
void PlaceBoundDeviceWork(const model::Trace& trace, const BuildState& state,
                          const ScratchVector<uint32_t>& parent, StepAssignment* a) {
  const model::ThreadTable& threads = trace.threads;
  for (size_t t = 0; t < threads.size(); ++t) {
    if (!threads.is_device[t]) continue;
    for (uint32_t i = state.thread_begin[t]; i < state.thread_begin[t + 1]; ++i) {
      uint32_t row = state.order[i];
      uint32_t launch = parent[row];
      if (launch != kNone && a->in_step(launch)) a->step_of[row] = a->step_of[launch];
    }
  }
  a->extended_end = a->end;
  for (uint32_t row = 0; row < trace.events.size(); ++row) {
    uint32_t s = a->step_of[row];
    if (s < kAncestor) {
      a->extended_end[s] = std::max(a->extended_end[s], EndNs(trace.events, row));
    }
  }
}

// Unbound device work and device annotations hang under the step by time; what is
// left is outside every step.
void PlaceUnboundDeviceWork(const model::Trace& trace, const std::vector<StepCandidate>& candidates,
                            const BuildState& state, ScratchVector<uint32_t>& parent,
                            StepAssignment* a) {
  const model::EventTable& events = trace.events;
  const model::ThreadTable& threads = trace.threads;
  StepWindows device_windows(a->start, a->extended_end, a->process_begin);
  for (size_t t = 0; t < threads.size(); ++t) {
    bool device = threads.is_device[t];
    uint32_t process = threads.process[t].value();
    for (uint32_t i = state.thread_begin[t]; i < state.thread_begin[t + 1]; ++i) {
      uint32_t row = state.order[i];
      if (a->in_step(row)) continue;
      if (device && parent[row] == kNone) {
        uint32_t s = device_windows.Find(process, events.start_ns[row]);
        if (s != kNone) {
          a->step_of[row] = s;
          parent[row] = candidates[s].row;
          a->extended_end[s] = std::max(a->extended_end[s], EndNs(events, row));
          continue;
        }
      }
      parent[row] = kNone;  // bound to a launch outside every step, or nowhere
      ++a->outside;
    }
  }
}

// Children of each event, ordered by start time: children[child_begin[row],
// child_begin[row + 1]).
struct ChildLists {
  ScratchVector<uint32_t> child_begin;
  ScratchVector<uint32_t> children;
};

ChildLists BuildChildLists(const model::EventTable& events, const BuildState& state,
                           size_t thread_count, const ScratchVector<uint32_t>& parent) {
  const size_t n = events.size();
  // child_begin[p] first holds the end of p's range; filling backwards moves it to
  // the range's start.
  ChildLists lists{ScratchVector<uint32_t>(n + 1, 0), {}};
  ScratchVector<uint32_t>& child_begin = lists.child_begin;
  for (uint32_t row = 0; row < n; ++row) {
    if (parent[row] != kNone) ++child_begin[parent[row]];
  }
  for (size_t row = 0; row < n; ++row) child_begin[row + 1] += child_begin[row];
  lists.children.resize(child_begin[n]);
  for (size_t t = thread_count; t-- > 0;) {
    for (uint32_t i = state.thread_begin[t + 1]; i-- > state.thread_begin[t];) {
      uint32_t row = state.order[i];
      if (parent[row] != kNone) lists.children[--child_begin[parent[row]]] = row;
    }
  }
  SortScratch scratch;
  for (uint32_t row = 0; row < n; ++row) {
    uint32_t count = child_begin[row + 1] - child_begin[row];
    if (count > 1) {
      SortRowsByTime(events, lists.children.data() + child_begin[row], count, &scratch);
    }
  }
  return lists;
}

// What the node walk counts for the stats.
struct WalkCounts {
  int64_t deep = 0;  // nodes deeper than a depth column holds
  std::array<int64_t, 4> by_source{};
  uint32_t nodes = 0;
};

struct Frame {
  uint32_t row;
  uint32_t parent_node;
  uint32_t depth;
};

// Writes one step's tree in pre-order from next_node on; returns the node after it.
uint32_t WriteStepNodes(uint32_t root, uint32_t step, const ChildLists& lists, uint32_t next_node,
                        std::vector<Frame>& stack, model::NodeTable* nodes, int64_t* deep) {
  stack.clear();
  stack.push_back(Frame{root, kNone, 0});
  while (!stack.empty()) {
    Frame frame = stack.back();
    stack.pop_back();
    uint32_t node = next_node++;
    nodes->event[node] = model::EventRow(frame.row);
    nodes->parent[node] = model::NodeIndex(frame.parent_node);
    if (frame.depth > UINT16_MAX) ++*deep;
    nodes->depth[node] = static_cast<uint16_t>(std::min<uint32_t>(frame.depth, UINT16_MAX));
    nodes->step[node] = model::StepIndex(step);
    for (uint32_t c = lists.child_begin[frame.row + 1]; c > lists.child_begin[frame.row]; --c) {
      stack.push_back(Frame{lists.children[c - 1], node, frame.depth + 1});
    }
  }
  return next_node;
}

// Pre-order walk per step, written straight into the node columns, and one step row
// per step.
WalkCounts WriteStepTrees(const std::vector<StepCandidate>& candidates, const StepAssignment& a,
                          const ChildLists& lists, const BuildOptions& options,
                          model::Trace* trace) {
  const model::EventTable& events = trace->events;
  const size_t processes = trace->processes.size();
  model::NodeTable& nodes = trace->nodes;
  size_t node_total = 0;
  for (uint32_t row = 0; row < events.size(); ++row) node_total += a.in_step(row);
  ReserveHuge(&nodes.event, node_total);
  ReserveHuge(&nodes.parent, node_total);
  ReserveHuge(&nodes.depth, node_total);
  ReserveHuge(&nodes.step, node_total);
  nodes.event.resize(node_total);
  nodes.parent.resize(node_total);
  nodes.depth.resize(node_total);
  nodes.step.resize(node_total);
  model::StepTable& steps = trace->steps;
  std::vector<int64_t> ordinal(processes, 0);
  for (size_t p = 0; p < processes && p < options.step_ordinal_base.size(); ++p) {
    ordinal[p] = options.step_ordinal_base[p];
  }
  WalkCounts counts;
  std::vector<Frame> stack;
  for (uint32_t s = 0; s < candidates.size(); ++s) {
    const StepCandidate& step = candidates[s];
    uint32_t node_begin = counts.nodes;
    counts.nodes = WriteStepNodes(step.row, s, lists, counts.nodes, stack, &nodes, &counts.deep);
    model::ProcessIndex process = events.process[step.row];
    int64_t ordinal_in_process = ordinal[process.value()]++;
    int64_t number = step.number >= 0 ? step.number : ordinal_in_process;
    steps.event.push_back(model::EventRow(step.row));
    steps.process.push_back(process);
    steps.thread.push_back(events.thread[step.row]);
    steps.rank.push_back(trace->processes.rank[process.value()]);
    steps.number.push_back(number);
    steps.name.push_back(events.name[step.row]);
    steps.phase.push_back(step.phase);
    steps.source.push_back(step.source);
    steps.start_ns.push_back(a.start[s]);
    steps.end_ns.push_back(a.extended_end[s]);
    steps.node_begin.push_back(model::NodeIndex(node_begin));
    steps.node_end.push_back(model::NodeIndex(counts.nodes));
    steps.requests_begin.push_back(0);
    steps.requests_count.push_back(0);
    steps.global_step.push_back(number);
    ++counts.by_source[static_cast<size_t>(step.source)];
  }
  return counts;
}

void SetStepStats(uint32_t step_count, const WalkCounts& counts, int64_t outside,
                  model::Stats* stats) {
  stats->Set(model::stat::kReconstructSteps, step_count);
  for (size_t source = 0; source < counts.by_source.size(); ++source) {
    if (counts.by_source[source] == 0) continue;
    stats->Set(model::FamilyStatName(model::stat::kReconstructStepsBySource,
                                     model::StepSourceName(static_cast<model::StepSource>(source))),
               counts.by_source[source], model::stat::kReconstructStepsBySource.severity);
  }
  stats->Set(model::stat::kReconstructNodes, static_cast<int64_t>(counts.nodes));
  stats->Set(model::stat::kReconstructEventsOutsideSteps, outside);
  if (counts.deep > 0) stats->Increment(model::stat::kReconstructDepthOverLimit, counts.deep);
}

}  // namespace

void BuildStepTrees(model::Trace* trace, const BuildOptions& options, BuildState* state) {
  std::vector<StepCandidate>& candidates = state->steps;
  SortCandidates(trace->events, &candidates);
  const auto step_count = static_cast<uint32_t>(candidates.size());
  StepAssignment assignment(trace->events.size(), step_count, trace->processes.size());
  ScratchVector<uint32_t>& parent = state->up;
  PlaceStepRoots(trace->events, candidates, parent, &assignment);
  PlaceHostEvents(*trace, options, candidates, *state, parent, &assignment);
  PlaceBoundDeviceWork(*trace, *state, parent, &assignment);
  PlaceUnboundDeviceWork(*trace, candidates, *state, parent, &assignment);
  ChildLists lists = BuildChildLists(trace->events, *state, trace->threads.size(), parent);
  WalkCounts counts = WriteStepTrees(candidates, assignment, lists, options, trace);
  SetStepStats(step_count, counts, assignment.outside, &trace->stats);
}

}  // namespace teller::reconstruct::internal
