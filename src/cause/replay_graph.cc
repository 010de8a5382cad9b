#include "cause/replay_graph.h"

#include <algorithm>
#include <numeric>
#include <string_view>

#include <fmt/format.h>

#include "localize/operator_family.h"

namespace teller::cause {
namespace {

bool IsCall(model::Layer layer) {
  return layer == model::Layer::kRt || layer == model::Layer::kDrv;
}

// Compact numbers for the ids a graph meets, in order of first sight.
class Renumbering {
 public:
  explicit Renumbering(size_t ids) : number_(ids, ReplayNodes::kNone) {}
  // The id's number, and whether it is new.
  std::pair<uint32_t, bool> Of(uint32_t id) {
    if (number_[id] != ReplayNodes::kNone) return {number_[id], false};
    number_[id] = count_++;
    return {number_[id], true};
  }
  uint32_t count() const { return count_; }

 private:
  std::vector<uint32_t> number_;
  uint32_t count_ = 0;
};

// The graph's node that is the run's node, or kNone.
uint32_t GraphNodeOf(const ReplayGraph& graph, uint32_t run_node) {
  const std::vector<uint32_t>& first = graph.steps.first_node;
  const auto after = std::upper_bound(first.begin(), first.end(), run_node);
  if (after == first.begin()) return ReplayNodes::kNone;
  const auto s = static_cast<size_t>(after - first.begin() - 1);
  const uint32_t offset = run_node - first[s];
  const uint32_t size = graph.steps.nodes_begin[s + 1] - graph.steps.nodes_begin[s];
  return offset < size ? graph.steps.nodes_begin[s] + offset : ReplayNodes::kNone;
}

// The trace's steps in the groups, by first node.
std::vector<uint32_t> StepsOfGroups(const model::Trace& trace, const std::vector<int64_t>& groups) {
  std::vector<uint32_t> chosen;
  for (uint32_t s = 0; s < trace.steps.size(); ++s) {
    if (std::binary_search(groups.begin(), groups.end(), GroupOf(trace, s))) chosen.push_back(s);
  }
  std::stable_sort(chosen.begin(), chosen.end(), [&](uint32_t a, uint32_t b) {
    return trace.steps.node_begin[a].value() < trace.steps.node_begin[b].value();
  });
  return chosen;
}

void AddStep(const model::Trace& trace, uint32_t s, ReplaySteps* steps) {
  const auto [stall_begin, stall_end] = LongestStall(trace, s);
  steps->step.push_back(s);
  steps->first_node.push_back(trace.steps.node_begin[s].value());
  steps->group.push_back(GroupOf(trace, s));
  steps->rank.push_back(trace.steps.rank[s]);
  steps->start_ns.push_back(trace.steps.start_ns[s]);
  steps->end_ns.push_back(trace.steps.end_ns[s]);
  steps->stall_begin_ns.push_back(stall_begin);
  steps->stall_end_ns.push_back(stall_end);
}

// The launch call of each node: its parent when a call in a step of its group.
void LinkLaunches(const model::Trace& trace, ReplayGraph* graph) {
  ReplayNodes& nodes = graph->nodes;
  nodes.launch.assign(nodes.size(), ReplayNodes::kNone);
  for (uint32_t n = 0; n < nodes.size(); ++n) {
    const model::NodeIndex parent = trace.nodes.parent[graph->RunNode(n)];
    if (!parent.valid()) continue;
    const model::EventRow call = trace.nodes.event[parent.value()];
    if (!IsCall(trace.events.layer[call.value()])) continue;
    const uint32_t launch = GraphNodeOf(*graph, parent.value());
    if (launch != ReplayNodes::kNone &&
        graph->steps.group[nodes.step[launch]] == graph->steps.group[nodes.step[n]]) {
      nodes.launch[n] = launch;
    }
  }
}

}  // namespace

bool ReplayGraph::HoldsGroup(int64_t group) const {
  return std::binary_search(groups.begin(), groups.end(), group);
}

ReplayGraph CutReplayGraph(const model::Trace& trace, const std::vector<NodeCell>& node_cells,
                           const std::vector<int32_t>& match_of_event,
                           const std::vector<int64_t>& groups) {
  ReplayGraph graph;
  graph.groups = groups;
  Renumbering threads(trace.threads.size()), processes(trace.processes.size());
  for (uint32_t s : StepsOfGroups(trace, groups)) {
    AddStep(trace, s, &graph.steps);
    const auto graph_step = static_cast<uint32_t>(graph.steps.size() - 1);
    for (uint32_t n = trace.steps.node_begin[s].value(); n < trace.steps.node_end[s].value(); ++n) {
      const model::EventRow e = trace.nodes.event[n];
      const uint32_t thread = trace.events.thread[e.value()].value();
      const auto [number, is_new] = threads.Of(thread);
      if (is_new) {
        graph.threads.process.push_back(
            processes.Of(trace.threads.process[thread].value()).first);
        graph.threads.is_device.push_back(trace.threads.is_device[thread]);
      }
      graph.nodes.start_ns.push_back(trace.events.start_ns[e.value()]);
      graph.nodes.dur_ns.push_back(trace.events.dur_ns[e.value()]);
      graph.nodes.thread.push_back(number);
      graph.nodes.depth.push_back(trace.nodes.depth[n]);
      graph.nodes.cell.push_back(node_cells[n]);
      graph.nodes.match.push_back(match_of_event[e.value()]);
      graph.nodes.step.push_back(graph_step);
    }
    graph.steps.nodes_begin.push_back(static_cast<uint32_t>(graph.nodes.size()));
  }
  graph.processes = processes.count();
  LinkLaunches(trace, &graph);
  return graph;
}

ReplayGraph CutGroup(const ReplayGraph& graph, int64_t group) {
  ReplayGraph cut;
  cut.groups = {group};
  Renumbering threads(graph.threads.size()), processes(graph.processes);
  std::vector<uint32_t> node_of(graph.nodes.size(), ReplayNodes::kNone);
  const ReplaySteps& from = graph.steps;
  for (uint32_t s = 0; s < from.size(); ++s) {
    if (from.group[s] != group) continue;
    const auto cut_step = static_cast<uint32_t>(cut.steps.size());
    cut.steps.step.push_back(from.step[s]);
    cut.steps.first_node.push_back(from.first_node[s]);
    cut.steps.group.push_back(group);
    cut.steps.rank.push_back(from.rank[s]);
    cut.steps.start_ns.push_back(from.start_ns[s]);
    cut.steps.end_ns.push_back(from.end_ns[s]);
    cut.steps.stall_begin_ns.push_back(from.stall_begin_ns[s]);
    cut.steps.stall_end_ns.push_back(from.stall_end_ns[s]);
    for (uint32_t n = from.nodes_begin[s]; n < from.nodes_begin[s + 1]; ++n) {
      const uint32_t thread = graph.nodes.thread[n];
      const auto [number, is_new] = threads.Of(thread);
      if (is_new) {
        cut.threads.process.push_back(processes.Of(graph.threads.process[thread]).first);
        cut.threads.is_device.push_back(graph.threads.is_device[thread]);
      }
      node_of[n] = static_cast<uint32_t>(cut.nodes.size());
      cut.nodes.start_ns.push_back(graph.nodes.start_ns[n]);
      cut.nodes.dur_ns.push_back(graph.nodes.dur_ns[n]);
      cut.nodes.thread.push_back(number);
      cut.nodes.depth.push_back(graph.nodes.depth[n]);
      cut.nodes.cell.push_back(graph.nodes.cell[n]);
      cut.nodes.match.push_back(graph.nodes.match[n]);
      cut.nodes.launch.push_back(graph.nodes.launch[n]);
      cut.nodes.step.push_back(cut_step);
    }
    cut.steps.nodes_begin.push_back(static_cast<uint32_t>(cut.nodes.size()));
  }
  // A launch is of the same group: among the nodes kept.
  for (uint32_t& launch : cut.nodes.launch) {
    if (launch != ReplayNodes::kNone) launch = node_of[launch];
  }
  cut.processes = processes.count();
  return cut;
}

namespace {

// Part k's graph appended to `run`, its numbers after the earlier parts'.
void Append(const ReplayGraph& part, uint32_t steps_before, uint32_t nodes_before,
            ReplayGraph* run) {
  const auto node_base = static_cast<uint32_t>(run->nodes.size());
  const auto step_base = static_cast<uint32_t>(run->steps.size());
  const auto thread_base = static_cast<uint32_t>(run->threads.size());
  ReplaySteps& steps = run->steps;
  for (size_t s = 0; s < part.steps.size(); ++s) {
    steps.step.push_back(steps_before + part.steps.step[s]);
    steps.first_node.push_back(nodes_before + part.steps.first_node[s]);
    steps.nodes_begin.push_back(node_base + part.steps.nodes_begin[s + 1]);
  }
  for (auto [to, from] : {std::pair{&steps.group, &part.steps.group},
                          {&steps.start_ns, &part.steps.start_ns},
                          {&steps.end_ns, &part.steps.end_ns},
                          {&steps.stall_begin_ns, &part.steps.stall_begin_ns},
                          {&steps.stall_end_ns, &part.steps.stall_end_ns}}) {
    to->insert(to->end(), from->begin(), from->end());
  }
  steps.rank.insert(steps.rank.end(), part.steps.rank.begin(), part.steps.rank.end());
  ReplayNodes& nodes = run->nodes;
  nodes.start_ns.insert(nodes.start_ns.end(), part.nodes.start_ns.begin(), part.nodes.start_ns.end());
  nodes.dur_ns.insert(nodes.dur_ns.end(), part.nodes.dur_ns.begin(), part.nodes.dur_ns.end());
  nodes.depth.insert(nodes.depth.end(), part.nodes.depth.begin(), part.nodes.depth.end());
  nodes.cell.insert(nodes.cell.end(), part.nodes.cell.begin(), part.nodes.cell.end());
  nodes.match.insert(nodes.match.end(), part.nodes.match.begin(), part.nodes.match.end());
  for (size_t n = 0; n < part.nodes.size(); ++n) {
    nodes.thread.push_back(thread_base + part.nodes.thread[n]);
    nodes.step.push_back(step_base + part.nodes.step[n]);
    const uint32_t launch = part.nodes.launch[n];
    nodes.launch.push_back(launch == ReplayNodes::kNone ? launch : node_base + launch);
  }
  for (size_t t = 0; t < part.threads.size(); ++t) {
    run->threads.process.push_back(run->processes + part.threads.process[t]);
    run->threads.is_device.push_back(part.threads.is_device[t]);
  }
  run->processes += part.processes;
}

// Whether a part's graph names only the part's steps and nodes.
base::Status CheckWithinPart(const ReplayGraph& part, uint32_t steps, uint32_t nodes) {
  for (size_t s = 0; s < part.steps.size(); ++s) {
    const uint32_t size = part.steps.nodes_begin[s + 1] - part.steps.nodes_begin[s];
    if (part.steps.step[s] >= steps || part.steps.first_node[s] > nodes ||
        size > nodes - part.steps.first_node[s]) {
      return base::DataLoss("step {} of {} nodes from node {}, the part has {} steps and {} nodes",
                            part.steps.step[s], size, part.steps.first_node[s], steps, nodes);
    }
  }
  return base::OkStatus();
}

}  // namespace

base::StatusOr<ReplayGraph> ConcatReplayGraphs(const std::vector<ReplayGraph>& parts,
                                               const std::vector<uint32_t>& steps_before,
                                               const std::vector<uint32_t>& nodes_before) {
  if (steps_before.size() != parts.size() + 1 || nodes_before.size() != parts.size() + 1) {
    return base::Internal("{} replay graphs, {} step and {} node offsets", parts.size(),
                          steps_before.size(), nodes_before.size());
  }
  ReplayGraph run;
  if (!parts.empty()) run.groups = parts[0].groups;
  for (size_t k = 0; k < parts.size(); ++k) {
    if (parts[k].groups != run.groups) {
      return base::Internal("replay graph {} was cut for {} groups, the first for {}", k,
                            parts[k].groups.size(), run.groups.size());
    }
    TELLER_RETURN_IF_ERROR(CheckWithinPart(parts[k], steps_before[k + 1] - steps_before[k],
                                           nodes_before[k + 1] - nodes_before[k])
                               .WithContext("replay graph " + std::to_string(k)));
    Append(parts[k], steps_before[k], nodes_before[k], &run);
  }
  return run;
}

namespace {

template <typename A, typename B>
bool SameSize(const std::vector<A>& a, const std::vector<B>& b) {
  return a.size() == b.size();
}

base::Status CheckSteps(const ReplayGraph& graph) {
  const ReplaySteps& steps = graph.steps;
  const size_t count = steps.size();
  if (!SameSize(steps.first_node, steps.step) || !SameSize(steps.group, steps.step) ||
      !SameSize(steps.rank, steps.step) || !SameSize(steps.start_ns, steps.step) ||
      !SameSize(steps.end_ns, steps.step) || !SameSize(steps.stall_begin_ns, steps.step) ||
      !SameSize(steps.stall_end_ns, steps.step) || steps.nodes_begin.size() != count + 1) {
    return base::DataLoss("replay graph: step columns of different lengths");
  }
  if (steps.nodes_begin[0] != 0 || steps.nodes_begin[count] != graph.nodes.size()) {
    return base::DataLoss("replay graph: the steps hold {} nodes, the graph {}",
                          steps.nodes_begin[count], graph.nodes.size());
  }
  for (size_t s = 0; s < count; ++s) {
    if (steps.nodes_begin[s + 1] < steps.nodes_begin[s]) {
      return base::DataLoss("replay graph: step {}'s nodes end before they begin", s);
    }
    if (s > 0 && steps.first_node[s] < steps.first_node[s - 1]) {
      return base::DataLoss("replay graph: step {} begins before step {}", s, s - 1);
    }
    if (!graph.HoldsGroup(steps.group[s])) {
      return base::DataLoss("replay graph: step {} of group {}, not asked for", s, steps.group[s]);
    }
  }
  return base::OkStatus();
}

base::Status CheckNodes(const ReplayGraph& graph) {
  const ReplayNodes& nodes = graph.nodes;
  if (!SameSize(nodes.dur_ns, nodes.start_ns) || !SameSize(nodes.thread, nodes.start_ns) ||
      !SameSize(nodes.depth, nodes.start_ns) || !SameSize(nodes.cell, nodes.start_ns) ||
      !SameSize(nodes.match, nodes.start_ns) || !SameSize(nodes.launch, nodes.start_ns) ||
      !SameSize(nodes.step, nodes.start_ns)) {
    return base::DataLoss("replay graph: node columns of different lengths");
  }
  for (size_t n = 0; n < nodes.size(); ++n) {
    if (nodes.thread[n] >= graph.threads.size()) {
      return base::DataLoss("replay graph: node {} on thread {} of {}", n, nodes.thread[n],
                            graph.threads.size());
    }
    if (nodes.launch[n] != ReplayNodes::kNone && nodes.launch[n] >= nodes.size()) {
      return base::DataLoss("replay graph: node {} launched by node {} of {}", n, nodes.launch[n],
                            nodes.size());
    }
    if (static_cast<int>(nodes.cell[n].channel) >= kChannelCount ||
        static_cast<int>(nodes.cell[n].family) >= localize::kOperatorFamilyCount) {
      return base::DataLoss("replay graph: node {} in channel {} family {}", n,
                            static_cast<int>(nodes.cell[n].channel),
                            static_cast<int>(nodes.cell[n].family));
    }
  }
  return base::OkStatus();
}

}  // namespace

namespace {

bool operator!=(const NodeCell& a, const NodeCell& b) {
  return a.channel != b.channel || a.family != b.family;
}

// Compares columns in turn, keeping the first difference.
class Differences {
 public:
  template <typename T>
  Differences& Column(std::string_view name, const std::vector<T>& a, const std::vector<T>& b) {
    if (!first_.empty()) return *this;
    if (a.size() != b.size()) {
      first_ = fmt::format("{}: {} rows and {}", name, a.size(), b.size());
      return *this;
    }
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i] != b[i]) {
        first_ = fmt::format("{} differs at row {}", name, i);
        break;
      }
    }
    return *this;
  }
  std::string first() const { return first_; }

 private:
  std::string first_;
};

}  // namespace

std::string ReplayGraphDifference(const ReplayGraph& a, const ReplayGraph& b) {
  if (a.processes != b.processes) return fmt::format("{} processes and {}", a.processes, b.processes);
  Differences d;
  d.Column("groups", a.groups, b.groups)
      .Column("thread process", a.threads.process, b.threads.process)
      .Column("is_device", a.threads.is_device, b.threads.is_device)
      .Column("step", a.steps.step, b.steps.step)
      .Column("first_node", a.steps.first_node, b.steps.first_node)
      .Column("group", a.steps.group, b.steps.group)
      .Column("rank", a.steps.rank, b.steps.rank)
      .Column("step start_ns", a.steps.start_ns, b.steps.start_ns)
      .Column("end_ns", a.steps.end_ns, b.steps.end_ns)
      .Column("stall_begin_ns", a.steps.stall_begin_ns, b.steps.stall_begin_ns)
      .Column("stall_end_ns", a.steps.stall_end_ns, b.steps.stall_end_ns)
      .Column("nodes_begin", a.steps.nodes_begin, b.steps.nodes_begin)
      .Column("node start_ns", a.nodes.start_ns, b.nodes.start_ns)
      .Column("dur_ns", a.nodes.dur_ns, b.nodes.dur_ns)
      .Column("thread", a.nodes.thread, b.nodes.thread)
      .Column("depth", a.nodes.depth, b.nodes.depth)
      .Column("cell", a.nodes.cell, b.nodes.cell)
      .Column("match", a.nodes.match, b.nodes.match)
      .Column("launch", a.nodes.launch, b.nodes.launch);
  return d.first();
}

base::Status CheckReplayGraph(const ReplayGraph& graph) {
  if (!std::is_sorted(graph.groups.begin(), graph.groups.end()) ||
      std::adjacent_find(graph.groups.begin(), graph.groups.end()) != graph.groups.end()) {
    return base::DataLoss("replay graph: groups not ascending");
  }
  if (!SameSize(graph.threads.is_device, graph.threads.process)) {
    return base::DataLoss("replay graph: thread columns of different lengths");
  }
  for (size_t t = 0; t < graph.threads.size(); ++t) {
    if (graph.threads.process[t] >= graph.processes || graph.threads.is_device[t] > 1) {
      return base::DataLoss("replay graph: thread {} of process {} of {}", t,
                            graph.threads.process[t], graph.processes);
    }
  }
  TELLER_RETURN_IF_ERROR(CheckSteps(graph));
  return CheckNodes(graph);
}

}  // namespace teller::cause
