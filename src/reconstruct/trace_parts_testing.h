// Tests of the split path: a trace cut into parts (some of its processes each, own
// string pool, as if imported alone), the parts joined again as the first process of
// a distributed run joins them, and the parts reconstructed apart (cross_rank.h).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "base/status.h"
#include "model/trace.h"
#include "reconstruct/cross_rank.h"
#include "reconstruct/synthetic_trace.h"

namespace teller::reconstruct {

// The processes `chosen` (ascending) of an unreconstructed trace, with their threads,
// events, fields, collectives and log lines (and, with orphan_logs, the lines of no
// process), as if imported alone: own string pool.
model::Trace CopyProcesses(const model::Trace& from, const std::vector<uint32_t>& chosen,
                           bool orphan_logs = false);

// A random run for the split tests, by seed: 3-6 processes on 1-3 hosts with skewed clocks,
// 1-3 collectives a step on 1-3 communicators, with and without sequence numbers, some
// with shuffled rows; with `compositions`, kernels of 2-4 names, some steps reordered and
// some of another composition (an extra kernel).
SyntheticOptions RandomSplitOptions(uint64_t seed, int steps_per_process, bool compositions);

// Processes of `processes` dealt at random into `count` non-empty parts.
std::vector<std::vector<uint32_t>> DealProcesses(int processes, int count, std::mt19937_64* rng);

// The processes of `whole` dealt into 2 or 3 parts by seed (DealProcesses, CopyProcesses);
// with orphan_logs the first part also takes the log lines of no process.
std::vector<model::Trace> SplitIntoParts(const model::Trace& whole, uint64_t seed,
                                         bool orphan_logs = false);

// Row offsets of one part inside the joined trace (the parts appended in order).
struct PartBase {
  uint32_t process = 0, event = 0, log = 0;
};

// The parts appended in order, as the first process of a distributed run joins them;
// `bases` gets each part's offsets.
base::StatusOr<model::Trace> JoinParts(const std::vector<model::Trace>& parts,
                                       std::vector<PartBase>* bases);

// The split path over parts: prepare each, the records of the first `planned` parts,
// one plan, each part built from its share (a default share past `planned`).
base::StatusOr<CrossRankPlan> BuildParts(std::vector<model::Trace>* parts, size_t planned);

// The parts of a random run by seed (RandomSplitOptions with compositions), each built
// (BuildParts); why they could not be, as an error.
base::StatusOr<std::vector<model::Trace>> RandomBuiltParts(uint64_t seed,
                                                           int steps_per_process = 6);

}  // namespace teller::reconstruct
