// What the impact replay (step_replay.h) reads of a run's steps, as columns: a replay
// graph. Per step its place in the run, group, rank, span and longest stall; per node its
// times, thread, depth, cell, collective match and launch call; per thread its process
// and whether it is a device stream. A process that holds some units of a run (a part:
// fleet/analysis_parts.h) cuts the graph of the groups the first process asks for from
// its parts, and the first process appends every part's in plan order: the replay of the
// appended graph is the joined trace's (the same nodes in the same order, the same
// matches), with no trace.
//
// Order: steps by their first node in the run, nodes by their place in the run (a step's
// nodes are contiguous, model/trace.h), so the graph's node order is the run's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "cause/deviation_map.h"
#include "model/trace.h"

namespace teller::cause {

struct ReplaySteps {
  std::vector<uint32_t> step;        // in the run (MapStep::step)
  std::vector<uint32_t> first_node;  // its first node in the run
  std::vector<int64_t> group;        // GroupOf
  std::vector<int32_t> rank;
  std::vector<int64_t> start_ns, end_ns;
  std::vector<int64_t> stall_begin_ns, stall_end_ns;  // LongestStall
  // CSR over the graph's nodes: step s holds [nodes_begin[s], nodes_begin[s + 1]).
  std::vector<uint32_t> nodes_begin{0};

  size_t size() const { return step.size(); }
};

struct ReplayNodes {
  static constexpr uint32_t kNone = UINT32_MAX;
  std::vector<int64_t> start_ns, dur_ns;
  std::vector<uint32_t> thread;  // into ReplayGraph::threads
  std::vector<uint16_t> depth;
  std::vector<NodeCell> cell;  // NodeCells
  std::vector<int32_t> match;  // CollectiveMatchOfEvents of its event, -1: none
  // Its launch call (a runtime or driver call that is its parent) when that is a node of a
  // step of the same group, else kNone.
  std::vector<uint32_t> launch;
  std::vector<uint32_t> step;  // the graph's step that holds it (not sent: the CSR says)

  size_t size() const { return start_ns.size(); }
};

struct ReplayThreads {
  std::vector<uint32_t> process;  // numbered within the graph
  std::vector<uint8_t> is_device;

  size_t size() const { return process.size(); }
};

struct ReplayGraph {
  ReplaySteps steps;
  ReplayNodes nodes;
  ReplayThreads threads;
  uint32_t processes = 0;
  // The groups it was cut for, ascending: a group here with no step has none in the run
  // (or in the part).
  std::vector<int64_t> groups;

  // The run's node of graph node n.
  uint32_t RunNode(uint32_t n) const {
    const uint32_t s = nodes.step[n];
    return steps.first_node[s] + (n - steps.nodes_begin[s]);
  }
  bool HoldsGroup(int64_t group) const;
};

// The graph of the trace's steps in `groups` (ascending), with the cell of each node
// (NodeCells) and the match of each event (CollectiveMatchOfEvents, or
// RunMatchOfEvents on a part: step_measurements.h). Its steps and nodes are numbered as in the trace.
ReplayGraph CutReplayGraph(const model::Trace& trace, const std::vector<NodeCell>& node_cells,
                           const std::vector<int32_t>& match_of_event,
                           const std::vector<int64_t>& groups);

// The graph of one group of a graph (its steps, threads and processes renumbered).
ReplayGraph CutGroup(const ReplayGraph& graph, int64_t group);

// Every part's graph appended in plan order, each cut for the same groups: steps and
// nodes numbered after the earlier parts' (`steps_before[k]`, `nodes_before[k]`: the run's
// steps and nodes of the parts before part k; one more entry: the run's), threads and
// processes after theirs. An error when the parts were cut for other groups or name a
// step or node their part does not have (CheckReplayGraph first).
base::StatusOr<ReplayGraph> ConcatReplayGraphs(const std::vector<ReplayGraph>& parts,
                                               const std::vector<uint32_t>& steps_before,
                                               const std::vector<uint32_t>& nodes_before);

// The first column where two graphs differ ("" when none): its name and row, or its length.
std::string ReplayGraphDifference(const ReplayGraph& a, const ReplayGraph& b);

// Whether a graph that crossed a process boundary is whole: columns of one length, the
// CSR ascending and within the nodes, threads and launches within range, groups
// ascending and each step's group among them.
base::Status CheckReplayGraph(const ReplayGraph& graph);

}  // namespace teller::cause
