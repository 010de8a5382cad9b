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

}  // namespace

void BuildStepTrees(model::Trace* trace, const BuildOptions& options, BuildState* state) {
  const model::EventTable& events = trace->events;
  const size_t n = events.size();
  const size_t processes = trace->processes.size();
  std::vector<StepCandidate>& candidates = state->steps;
  std::sort(candidates.begin(), candidates.end(),
            [&](const StepCandidate& a, const StepCandidate& b) {
              uint32_t pa = events.process[a.row].value(), pb = events.process[b.row].value();
              if (pa != pb) return pa < pb;
              if (events.start_ns[a.row] != events.start_ns[b.row]) {
                return events.start_ns[a.row] < events.start_ns[b.row];
              }
              return a.row < b.row;
            });
  const auto step_count = static_cast<uint32_t>(candidates.size());
  std::vector<uint32_t> process_begin(processes + 1, 0);
  std::vector<int64_t> step_start(step_count), step_end(step_count);
  // step_of: the step an event belongs to; kAncestor marks host ancestors of
  // step roots, which never join a step. parent: the tree parent, written over
  // state->up (host parent or launch) as events are placed.
  constexpr uint32_t kAncestor = kNone - 1;
  ScratchVector<uint32_t> step_of(n, kNone);
  ScratchVector<uint32_t>& parent = state->up;
  auto in_step = [&](uint32_t row) { return step_of[row] < kAncestor; };
  for (uint32_t s = 0; s < step_count; ++s) {
    uint32_t row = candidates[s].row;
    ++process_begin[events.process[row].value() + 1];
    step_start[s] = events.start_ns[row];
    step_end[s] = EndNs(events, row);
    step_of[row] = s;
  }
  for (size_t p = 0; p < processes; ++p) process_begin[p + 1] += process_begin[p];
  for (const StepCandidate& step : candidates) {
    for (uint32_t up = parent[step.row]; up != kNone && step_of[up] == kNone; up = parent[up]) {
      step_of[up] = kAncestor;
    }
    parent[step.row] = kNone;
  }

  // Host events: by nesting on their thread, else attached by the host window.
  StepWindows host_windows(step_start, step_end, process_begin);
  const model::ThreadTable& threads = trace->threads;
  for (size_t t = 0; t < threads.size(); ++t) {
    if (threads.is_device[t]) continue;
    uint32_t process = threads.process[t].value();
    for (uint32_t i = state->thread_begin[t]; i < state->thread_begin[t + 1]; ++i) {
      uint32_t row = state->order[i];
      if (step_of[row] == kAncestor) parent[row] = kNone;
      if (step_of[row] != kNone) continue;  // a step root or an ancestor of one
      uint32_t up = parent[row];
      if (up != kNone && in_step(up)) {
        step_of[row] = step_of[up];
        continue;
      }
      parent[row] = kNone;
      if (!options.attach_other_threads) continue;
      uint32_t s = host_windows.Find(process, events.start_ns[row]);
      if (s == kNone || events.thread[candidates[s].row].value() == t) continue;
      step_of[row] = s;
      parent[row] = candidates[s].row;
    }
  }
  // Bound device work goes where its launch went.
  for (size_t t = 0; t < threads.size(); ++t) {
    if (!threads.is_device[t]) continue;
    for (uint32_t i = state->thread_begin[t]; i < state->thread_begin[t + 1]; ++i) {
      uint32_t row = state->order[i];
      uint32_t launch = parent[row];
      if (launch != kNone && in_step(launch)) step_of[row] = step_of[launch];
    }
  }
  // A step ends when the last work launched in it ends.
  std::vector<int64_t> extended_end = step_end;
  for (uint32_t row = 0; row < n; ++row) {
    uint32_t s = step_of[row];
    if (s < kAncestor) extended_end[s] = std::max(extended_end[s], EndNs(events, row));
  }
  // Unbound device work and device annotations hang under the step by time.
  StepWindows device_windows(step_start, extended_end, process_begin);
  int64_t outside = 0;
  for (size_t t = 0; t < threads.size(); ++t) {
    bool device = threads.is_device[t];
    uint32_t process = threads.process[t].value();
    for (uint32_t i = state->thread_begin[t]; i < state->thread_begin[t + 1]; ++i) {
      uint32_t row = state->order[i];
      if (in_step(row)) continue;
      if (device && parent[row] == kNone) {
        uint32_t s = device_windows.Find(process, events.start_ns[row]);
        if (s != kNone) {
          step_of[row] = s;
          parent[row] = candidates[s].row;
          extended_end[s] = std::max(extended_end[s], EndNs(events, row));
          continue;
        }
      }
      parent[row] = kNone;  // bound to a launch outside every step, or nowhere
      ++outside;
    }
  }

  // Children of each event, ordered by start time. child_begin[p] first holds
  // the end of p's range; filling backwards moves it to the range's start.
  ScratchVector<uint32_t> child_begin(n + 1, 0);
  for (uint32_t row = 0; row < n; ++row) {
    if (parent[row] != kNone) ++child_begin[parent[row]];
  }
  for (size_t row = 0; row < n; ++row) child_begin[row + 1] += child_begin[row];
  ScratchVector<uint32_t> children(child_begin[n]);
  for (size_t t = threads.size(); t-- > 0;) {
    for (uint32_t i = state->thread_begin[t + 1]; i-- > state->thread_begin[t];) {
      uint32_t row = state->order[i];
      if (parent[row] != kNone) children[--child_begin[parent[row]]] = row;
    }
  }
  SortScratch scratch;
  for (uint32_t row = 0; row < n; ++row) {
    uint32_t count = child_begin[row + 1] - child_begin[row];
    if (count > 1) SortRowsByTime(events, children.data() + child_begin[row], count, &scratch);
  }

  // Pre-order walk per step, written straight into the node columns.
  model::NodeTable& nodes = trace->nodes;
  size_t node_total = 0;
  for (uint32_t row = 0; row < n; ++row) node_total += in_step(row);
  ReserveHuge(&nodes.event, node_total);
  ReserveHuge(&nodes.parent, node_total);
  ReserveHuge(&nodes.depth, node_total);
  ReserveHuge(&nodes.step, node_total);
  nodes.event.resize(node_total);
  nodes.parent.resize(node_total);
  nodes.depth.resize(node_total);
  nodes.step.resize(node_total);
  model::StepTable& steps = trace->steps;
  struct Frame {
    uint32_t row;
    uint32_t parent_node;
    uint32_t depth;
  };
  std::vector<Frame> stack;
  std::vector<int64_t> ordinal(processes, 0);
  for (size_t p = 0; p < processes && p < options.step_ordinal_base.size(); ++p) {
    ordinal[p] = options.step_ordinal_base[p];
  }
  int64_t deep = 0;
  std::array<int64_t, 4> by_source{};
  uint32_t next_node = 0;
  for (uint32_t s = 0; s < step_count; ++s) {
    const StepCandidate& step = candidates[s];
    uint32_t node_begin = next_node;
    stack.clear();
    stack.push_back(Frame{step.row, kNone, 0});
    while (!stack.empty()) {
      Frame frame = stack.back();
      stack.pop_back();
      uint32_t node = next_node++;
      nodes.event[node] = model::EventRow(frame.row);
      nodes.parent[node] = model::NodeIndex(frame.parent_node);
      if (frame.depth > UINT16_MAX) ++deep;
      nodes.depth[node] = static_cast<uint16_t>(std::min<uint32_t>(frame.depth, UINT16_MAX));
      nodes.step[node] = model::StepIndex(s);
      for (uint32_t c = child_begin[frame.row + 1]; c > child_begin[frame.row]; --c) {
        stack.push_back(Frame{children[c - 1], node, frame.depth + 1});
      }
    }
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
    steps.start_ns.push_back(step_start[s]);
    steps.end_ns.push_back(extended_end[s]);
    steps.node_begin.push_back(model::NodeIndex(node_begin));
    steps.node_end.push_back(model::NodeIndex(next_node));
    steps.requests_begin.push_back(0);
    steps.requests_count.push_back(0);
    steps.global_step.push_back(number);
    ++by_source[static_cast<size_t>(step.source)];
  }

  model::Stats& stats = trace->stats;
  stats.Set("reconstruct_steps", step_count);
  for (size_t source = 0; source < by_source.size(); ++source) {
    if (by_source[source] == 0) continue;
    stats.Set(std::string("reconstruct_steps_") +
                  std::string(model::StepSourceName(static_cast<model::StepSource>(source))),
              by_source[source]);
  }
  stats.Set("reconstruct_nodes", static_cast<int64_t>(next_node));
  stats.Set("reconstruct_events_outside_steps", outside);
  if (deep > 0) stats.Increment("reconstruct_depth_over_limit", deep);
}

}  // namespace teller::reconstruct::internal
