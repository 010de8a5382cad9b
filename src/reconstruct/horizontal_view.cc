// Stage 7, second half: collective kernels with no collective row at all (vLLM's custom
// all-reduce, NVLS multimem; or, in a step without collective kernels, the hooked host
// calls of a CPU job), once the steps are built, match across ranks by (global step,
// their ordinal in the rank's step) when every rank of the step ran the same sequence
// of their names. The first half, matching collective rows and aligning clocks, runs
// over collective records (cross_rank.cc).
#include <algorithm>
#include <tuple>
#include <vector>

#include "reconstruct/build_state.h"

namespace teller::reconstruct::internal {
namespace {

// A collective kernel without a collective row, in its rank's step.
struct StepKernel {
  int64_t global_step;
  int64_t member;  // rank, or 2^32 + process when the rank is unknown
  int64_t start_ns;
  uint32_t row;
  bool operator<(const StepKernel& o) const {
    return std::tie(global_step, member, start_ns, row) <
           std::tie(o.global_step, o.member, o.start_ns, o.row);
  }
};

// Whether node n of a step has a COMM-layer ancestor inside the step.
bool InsideCommRange(const model::Trace& trace, uint32_t n) {
  for (model::NodeIndex p = trace.nodes.parent[n]; p.valid(); p = trace.nodes.parent[p.value()]) {
    if (trace.events.layer[trace.nodes.event[p.value()].value()] == model::Layer::kComm) return true;
  }
  return false;
}

// The COMM-layer events of every step with a global step that have no row in
// trace.collectives, by (global step, member, start): the device kernels, or, in a step
// with none (a CPU job: gloo, or collectives seen only through hooked calls), the
// outermost host COMM ranges, which block until the collective completes.
std::vector<StepKernel> StepKernelsWithoutRows(const model::Trace& trace) {
  const model::EventTable& events = trace.events;
  std::vector<uint8_t> has_row(events.size(), 0);
  for (uint32_t c = 0; c < trace.collectives.size(); ++c) {
    has_row[trace.collectives.event[c].value()] = 1;
  }
  std::vector<StepKernel> kernels;
  std::vector<StepKernel> host_ranges;
  const model::StepTable& steps = trace.steps;
  for (size_t s = 0; s < steps.size(); ++s) {
    if (steps.global_step[s] < 0) continue;
    const uint32_t process = steps.process[s].value();
    const int32_t rank = trace.processes.rank[process];
    const int64_t member = rank >= 0 ? rank : (int64_t{1} << 32) + process;
    bool device_comm = false;
    host_ranges.clear();
    for (uint32_t n = steps.node_begin[s].value(); n < steps.node_end[s].value(); ++n) {
      const uint32_t row = trace.nodes.event[n].value();
      const model::ThreadIndex thread = events.thread[row];
      if (events.layer[row] != model::Layer::kComm || has_row[row] || !thread.valid() ||
          events.phase[row] == model::EventPhase::kEnd) {
        continue;
      }
      const StepKernel kernel{steps.global_step[s], member, events.start_ns[row], row};
      if (trace.threads.is_device[thread.value()]) {
        kernels.push_back(kernel);
        device_comm = true;
      } else if (!InsideCommRange(trace, n)) {
        host_ranges.push_back(kernel);
      }
    }
    if (!device_comm) kernels.insert(kernels.end(), host_ranges.begin(), host_ranges.end());
  }
  std::sort(kernels.begin(), kernels.end());
  return kernels;
}

// Whether the members' runs [begin, end) of one global step (each run one member's
// kernels in time order) have the same length and the same names.
bool SameNameSequences(const model::Trace& trace, const std::vector<StepKernel>& kernels,
                       const std::vector<size_t>& runs) {
  const size_t length = runs[1] - runs[0];
  for (size_t m = 1; m + 1 < runs.size(); ++m) {
    if (runs[m + 1] - runs[m] != length) return false;
    for (size_t k = 0; k < length; ++k) {
      if (trace.events.name[kernels[runs[m] + k].row] !=
          trace.events.name[kernels[runs[0] + k].row]) {
        return false;
      }
    }
  }
  return true;
}

}  // namespace

void MatchCollectivesByStepOrder(model::Trace* trace) {
  const std::vector<StepKernel> kernels = StepKernelsWithoutRows(*trace);
  model::CollectiveMatchTable& matches = trace->collective_matches;
  uint32_t next_id = 0;
  for (size_t i = 0; i < matches.size(); ++i) {
    next_id = std::max(next_id, matches.match[i].value() + 1);
  }
  int64_t matched = 0, skipped = 0;
  std::vector<size_t> runs;  // start of each member's run, then the group's end
  for (size_t i = 0; i < kernels.size();) {
    size_t j = i;
    runs.clear();
    for (; j < kernels.size() && kernels[j].global_step == kernels[i].global_step; ++j) {
      if (j == i || kernels[j].member != kernels[j - 1].member) runs.push_back(j);
    }
    runs.push_back(j);
    const size_t members = runs.size() - 1;
    if (members >= 2 && !SameNameSequences(*trace, kernels, runs)) {
      skipped += static_cast<int64_t>(j - i);
    } else if (members >= 2) {
      for (size_t k = 0; k < runs[1] - runs[0]; ++k, ++matched) {
        const model::CollectiveMatchId id(next_id++);
        for (size_t m = 0; m < members; ++m) {
          const uint32_t row = kernels[runs[m] + k].row;
          matches.match.push_back(id);
          matches.event.push_back(model::EventRow(row));
          matches.rank.push_back(trace->processes.rank[trace->events.process[row].value()]);
        }
      }
    }
    i = j;
  }
  model::Stats& stats = trace->stats;
  if (matched > 0) {
    stats.Set(model::stat::kReconstructCollectiveMatches,
              stats.Get(model::stat::kReconstructCollectiveMatches) + matched);
    stats.Set(model::stat::kReconstructCollectivesMatchedByStepOrder, matched);
  }
  if (skipped > 0) stats.Set(model::stat::kReconstructCollectivesStepOrderSkipped, skipped);
}

}  // namespace teller::reconstruct::internal
