// The bytes of a replay graph (replay_graph.h): the groups a part was asked for and its
// steps, nodes and threads in them. Little-endian (base/byte_io.h): a 4-byte magic and a
// u32 version, then varints (zigzag where signed), most as the difference from the value
// before: the groups and the process count; per thread its process and whether it is a
// device stream; the (channel, family) cells the nodes use; the nodes' time unit (the
// largest divisor of every start difference and duration); then step by step its number,
// first node, group, rank and start (each after the previous step's), its end and longest
// stall, its node count and the threads its nodes run on, each node's start (after the
// last start on its thread in the step), duration, thread (its place among the step's),
// depth and cell, and sparse lists of the nodes with a collective match (the match after
// the previous one) and with a launch call (how many nodes before the node it lies).
// Decoding checks every count against the bytes left, every index against what it
// indexes, and the graph it makes (CheckReplayGraph); a short, oversized or foreign buffer
// is an error naming what was expected and the offset.
//
// Cost (bench/replay_graph_bench.cc): about 9-11 bytes a node and 1.9-3.8 KB a rank-step of
// a replayed group on `synth run` runs (6-64 ranks; 32 bytes a node and 6.8-12.7 KB in
// version 1's plain columns); encoding and decoding take about 20 and 35 ns a node.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "cause/replay_graph.h"

namespace teller::cause {

inline constexpr uint32_t kReplayGraphWireVersion = 2;

std::string EncodeReplayGraph(const ReplayGraph& graph);
base::StatusOr<ReplayGraph> DecodeReplayGraph(std::string_view bytes);

// The groups the first process asks the parts' graphs of (ascending).
std::string EncodeReplayGroups(const std::vector<int64_t>& groups);
base::StatusOr<std::vector<int64_t>> DecodeReplayGroups(std::string_view bytes);

}  // namespace teller::cause
