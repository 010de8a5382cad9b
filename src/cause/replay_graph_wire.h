// The bytes of a replay graph (replay_graph.h): the groups a part was asked for and its
// steps, nodes and threads in them, as columns. Little-endian (base/byte_io.h): a 4-byte
// magic and a u32 version, the groups, the process count, then each column (a u64 row
// count and its values). Decoding checks every count against the bytes left and the graph
// it makes (CheckReplayGraph); a short, oversized or foreign buffer is an error naming
// what was expected and the offset.
//
// Cost: 32 bytes a node (start, duration, thread, depth, cell, match, launch), 56 a step,
// 5 a thread, and 8 a column's row count: about 2.5 KB a rank-step of a replayed group on
// the small simulated runs of fleet_test, 6.8 KB on `synth run`'s default model.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "cause/replay_graph.h"

namespace teller::cause {

inline constexpr uint32_t kReplayGraphWireVersion = 1;

std::string EncodeReplayGraph(const ReplayGraph& graph);
base::StatusOr<ReplayGraph> DecodeReplayGraph(std::string_view bytes);

// The groups the first process asks the parts' graphs of (ascending).
std::string EncodeReplayGroups(const std::vector<int64_t>& groups);
base::StatusOr<std::vector<int64_t>> DecodeReplayGroups(std::string_view bytes);

}  // namespace teller::cause
