#include "cause/replay_graph_wire.h"

#include <algorithm>

#include "base/byte_io.h"

namespace teller::cause {
namespace {

constexpr std::string_view kGraphMagic = "TLRG";
constexpr std::string_view kGroupsMagic = "TLRW";

base::Status DecodeSteps(base::WireReader* in, ReplaySteps* steps) {
  TELLER_RETURN_IF_ERROR(in->Column("step", &steps->step));
  TELLER_RETURN_IF_ERROR(in->Column("first_node", &steps->first_node));
  TELLER_RETURN_IF_ERROR(in->Column("group", &steps->group));
  TELLER_RETURN_IF_ERROR(in->Column("rank", &steps->rank));
  TELLER_RETURN_IF_ERROR(in->Column("start_ns", &steps->start_ns));
  TELLER_RETURN_IF_ERROR(in->Column("end_ns", &steps->end_ns));
  TELLER_RETURN_IF_ERROR(in->Column("stall_begin_ns", &steps->stall_begin_ns));
  TELLER_RETURN_IF_ERROR(in->Column("stall_end_ns", &steps->stall_end_ns));
  return in->Column("nodes_begin", &steps->nodes_begin);
}

base::Status DecodeNodes(base::WireReader* in, ReplayNodes* nodes) {
  TELLER_RETURN_IF_ERROR(in->Column("node start_ns", &nodes->start_ns));
  TELLER_RETURN_IF_ERROR(in->Column("dur_ns", &nodes->dur_ns));
  TELLER_RETURN_IF_ERROR(in->Column("thread", &nodes->thread));
  TELLER_RETURN_IF_ERROR(in->Column("depth", &nodes->depth));
  TELLER_RETURN_IF_ERROR(in->Column("cell", &nodes->cell));
  TELLER_RETURN_IF_ERROR(in->Column("match", &nodes->match));
  return in->Column("launch", &nodes->launch);
}

// Each node's step from the steps' offsets, once they are whole.
base::Status SetNodeSteps(const base::WireReader& in, ReplayGraph* graph) {
  const std::vector<uint32_t>& begin = graph->steps.nodes_begin;
  if (begin.size() != graph->steps.size() + 1 || begin.front() != 0 ||
      begin.back() != graph->nodes.start_ns.size() || !std::is_sorted(begin.begin(), begin.end())) {
    return in.Bad("nodes_begin not a row per step and one, ascending from 0 to the nodes");
  }
  graph->nodes.step.resize(graph->nodes.start_ns.size());
  for (uint32_t s = 0; s < graph->steps.size(); ++s) {
    std::fill(graph->nodes.step.begin() + begin[s], graph->nodes.step.begin() + begin[s + 1], s);
  }
  return base::OkStatus();
}

}  // namespace

std::string EncodeReplayGraph(const ReplayGraph& graph) {
  base::WireWriter out(kGraphMagic, kReplayGraphWireVersion);
  out.Column(graph.groups);
  out.Value<uint32_t>(graph.processes);
  out.Column(graph.threads.process);
  out.Column(graph.threads.is_device);
  const ReplaySteps& steps = graph.steps;
  out.Column(steps.step);
  out.Column(steps.first_node);
  out.Column(steps.group);
  out.Column(steps.rank);
  out.Column(steps.start_ns);
  out.Column(steps.end_ns);
  out.Column(steps.stall_begin_ns);
  out.Column(steps.stall_end_ns);
  out.Column(steps.nodes_begin);
  const ReplayNodes& nodes = graph.nodes;
  out.Column(nodes.start_ns);
  out.Column(nodes.dur_ns);
  out.Column(nodes.thread);
  out.Column(nodes.depth);
  out.Column(nodes.cell);
  out.Column(nodes.match);
  out.Column(nodes.launch);
  return out.Take();
}

base::StatusOr<ReplayGraph> DecodeReplayGraph(std::string_view bytes) {
  static const std::string kWhat = "replay graph";
  base::WireReader in(bytes, kWhat);
  ReplayGraph graph;
  TELLER_RETURN_IF_ERROR(in.Header(kGraphMagic, kReplayGraphWireVersion));
  TELLER_RETURN_IF_ERROR(in.Column("groups", &graph.groups));
  TELLER_RETURN_IF_ERROR(in.Value(&graph.processes, "the process count"));
  TELLER_RETURN_IF_ERROR(in.Column("thread process", &graph.threads.process));
  TELLER_RETURN_IF_ERROR(in.Column("is_device", &graph.threads.is_device));
  TELLER_RETURN_IF_ERROR(DecodeSteps(&in, &graph.steps));
  TELLER_RETURN_IF_ERROR(DecodeNodes(&in, &graph.nodes));
  TELLER_RETURN_IF_ERROR(in.End());
  TELLER_RETURN_IF_ERROR(SetNodeSteps(in, &graph));
  const base::Status whole = CheckReplayGraph(graph);
  if (!whole.ok()) return in.Bad(whole.message());
  return graph;
}

std::string EncodeReplayGroups(const std::vector<int64_t>& groups) {
  base::WireWriter out(kGroupsMagic, kReplayGraphWireVersion);
  out.Column(groups);
  return out.Take();
}

base::StatusOr<std::vector<int64_t>> DecodeReplayGroups(std::string_view bytes) {
  static const std::string kWhat = "replay groups";
  base::WireReader in(bytes, kWhat);
  std::vector<int64_t> groups;
  TELLER_RETURN_IF_ERROR(in.Header(kGroupsMagic, kReplayGraphWireVersion));
  TELLER_RETURN_IF_ERROR(in.Column("groups", &groups));
  TELLER_RETURN_IF_ERROR(in.End());
  if (std::adjacent_find(groups.begin(), groups.end(), std::greater_equal<int64_t>()) !=
      groups.end()) {
    return in.Bad("groups not distinct and ascending");
  }
  return groups;
}

}  // namespace teller::cause
