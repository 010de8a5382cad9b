// Stage 7, second half: collective kernels with no collective row at all (vLLM's custom
// all-reduce, NVLS multimem; or, in a step without collective kernels, the hooked host
// calls of a CPU job), once the steps are built, match across ranks by (global step,
// their ordinal in the rank's step) when every rank of the step ran the same sequence
// of their names. The first half, matching collective rows and aligning clocks, runs
// over collective records (cross_rank.cc); this half likewise over step-order records,
// so that parts of a trace built apart match as the joined trace does (cross_rank.h).
#include <algorithm>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "reconstruct/build_state.h"
#include "reconstruct/cross_rank.h"

namespace teller::reconstruct::internal {
namespace {

// A collective kernel without a collective row, in its rank's step.
struct StepKernel {
  int64_t global_step;
  int64_t member;  // rank, or 2^32 + process when the rank is unknown
  int64_t start_ns;
  uint32_t row;
  uint32_t process;  // the step's process
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
      const StepKernel kernel{steps.global_step[s], member, events.start_ns[row], row, process};
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

}  // namespace
}  // namespace teller::reconstruct::internal

namespace teller::reconstruct {
namespace {

// One event of the records of every part, in the joined trace's terms.
struct RunKernel {
  int64_t global_step;
  int64_t member;  // rank, or 2^32 + the joined process index when the rank is unknown
  int64_t start_ns;
  uint32_t part;
  uint32_t event;  // the part's row
  uint32_t name;   // run-wide name id
  bool operator<(const RunKernel& o) const {
    return std::tie(global_step, member, start_ns, part, event) <
           std::tie(o.global_step, o.member, o.start_ns, o.part, o.event);
  }
};

// Every part's events, by (global step, member, start, joined row): the joined trace's
// order, since the joined rows number part after part.
std::vector<RunKernel> RunKernels(const std::vector<StepOrderRecords>& parts) {
  std::unordered_map<std::string_view, uint32_t> name_ids;
  std::vector<RunKernel> kernels;
  int64_t process_base = 0;
  for (uint32_t p = 0; p < parts.size(); ++p) {
    const StepOrderRecords& records = parts[p];
    std::vector<uint32_t> run_name(records.names.size());
    for (size_t i = 0; i < records.names.size(); ++i) {
      const uint32_t next = static_cast<uint32_t>(name_ids.size());
      run_name[i] = name_ids.emplace(records.names[i], next).first->second;
    }
    for (size_t i = 0; i < records.size(); ++i) {
      const int64_t member = records.rank[i] >= 0
                                 ? records.rank[i]
                                 : (int64_t{1} << 32) + process_base + records.process[i];
      kernels.push_back({records.global_step[i], member, records.start_ns[i], p,
                         records.event[i], run_name[records.name[i]]});
    }
    process_base += records.processes;
  }
  std::sort(kernels.begin(), kernels.end());
  return kernels;
}

// Whether the members' runs [begin, end) of one global step (each run one member's
// kernels in time order) have the same length and the same names.
bool SameNameSequences(const std::vector<RunKernel>& kernels, const std::vector<size_t>& runs) {
  const size_t length = runs[1] - runs[0];
  for (size_t m = 1; m + 1 < runs.size(); ++m) {
    if (runs[m + 1] - runs[m] != length) return false;
    for (size_t k = 0; k < length; ++k) {
      if (kernels[runs[m] + k].name != kernels[runs[0] + k].name) return false;
    }
  }
  return true;
}

void AppendStepOrderMatches(const StepOrderPlan::Part& plan, model::Trace* part) {
  model::CollectiveMatchTable& matches = part->collective_matches;
  for (size_t i = 0; i < plan.event.size(); ++i) {
    const uint32_t row = plan.event[i];
    matches.match.push_back(plan.match[i]);
    matches.event.push_back(model::EventRow(row));
    matches.rank.push_back(part->processes.rank[part->events.process[row].value()]);
  }
}

}  // namespace

StepOrderRecords ExtractStepOrderRecords(const model::Trace& part) {
  StepOrderRecords records;
  records.processes = static_cast<uint32_t>(part.processes.size());
  std::unordered_map<uint32_t, uint32_t> name_index;  // string id -> records' name
  for (const internal::StepKernel& kernel : internal::StepKernelsWithoutRows(part)) {
    const model::StringId id = part.events.name[kernel.row];
    const auto [it, added] =
        name_index.emplace(id.value(), static_cast<uint32_t>(records.names.size()));
    if (added) records.names.emplace_back(part.str(id));
    records.global_step.push_back(kernel.global_step);
    records.rank.push_back(part.processes.rank[kernel.process]);
    records.process.push_back(kernel.process);
    records.start_ns.push_back(kernel.start_ns);
    records.event.push_back(kernel.row);
    records.name.push_back(it->second);
  }
  return records;
}

base::Status CheckStepOrderRecords(const StepOrderRecords& records) {
  const size_t n = records.size();
  if (records.global_step.size() != n || records.rank.size() != n ||
      records.process.size() != n || records.start_ns.size() != n || records.name.size() != n) {
    return base::InvalidArgument("step order records: columns differ in length");
  }
  for (size_t i = 0; i < n; ++i) {
    if (records.process[i] >= records.processes || records.name[i] >= records.names.size()) {
      return base::InvalidArgument("step order records: row {} out of range", i);
    }
  }
  return base::OkStatus();
}

uint32_t FirstStepOrderMatchId(const CrossRankPlan& plan) {
  uint32_t next_id = 0;
  for (const CrossRankPlan::Part& part : plan.parts) {
    for (model::CollectiveMatchId id : part.match) next_id = std::max(next_id, id.value() + 1);
  }
  return next_id;
}

StepOrderPlan MatchStepOrderRecords(const std::vector<StepOrderRecords>& parts,
                                    uint32_t first_match_id) {
  const std::vector<RunKernel> kernels = RunKernels(parts);
  StepOrderPlan plan;
  plan.parts.resize(parts.size());
  uint32_t next_id = first_match_id;
  std::vector<size_t> runs;  // start of each member's run, then the group's end
  for (size_t i = 0; i < kernels.size();) {
    size_t j = i;
    runs.clear();
    for (; j < kernels.size() && kernels[j].global_step == kernels[i].global_step; ++j) {
      if (j == i || kernels[j].member != kernels[j - 1].member) runs.push_back(j);
    }
    runs.push_back(j);
    const size_t members = runs.size() - 1;
    if (members >= 2 && !SameNameSequences(kernels, runs)) {
      plan.skipped += static_cast<int64_t>(j - i);
    } else if (members >= 2) {
      for (size_t k = 0; k < runs[1] - runs[0]; ++k, ++plan.matched) {
        const model::CollectiveMatchId id(next_id++);
        for (size_t m = 0; m < members; ++m) {
          const RunKernel& kernel = kernels[runs[m] + k];
          plan.parts[kernel.part].match.push_back(id);
          plan.parts[kernel.part].event.push_back(kernel.event);
        }
      }
    }
    i = j;
  }
  return plan;
}

base::Status ApplyStepOrderMatches(const StepOrderPlan::Part& plan, model::Trace* part) {
  if (plan.match.size() != plan.event.size()) {
    return base::InvalidArgument("step order plan: columns differ in length");
  }
  for (uint32_t row : plan.event) {
    if (row >= part->events.size()) {
      return base::InvalidArgument("step order plan: event {} of {}", row, part->events.size());
    }
  }
  AppendStepOrderMatches(plan, part);
  return base::OkStatus();
}

void RecordStepOrderCounters(const StepOrderPlan& plan, model::Trace* trace) {
  model::Stats& stats = trace->stats;
  if (plan.matched > 0) {
    stats.Set(model::stat::kReconstructCollectiveMatches,
              stats.Get(model::stat::kReconstructCollectiveMatches) + plan.matched);
    stats.Set(model::stat::kReconstructCollectivesMatchedByStepOrder, plan.matched);
  }
  if (plan.skipped > 0) {
    stats.Set(model::stat::kReconstructCollectivesStepOrderSkipped, plan.skipped);
  }
}

}  // namespace teller::reconstruct

namespace teller::reconstruct::internal {

void MatchCollectivesByStepOrder(model::Trace* trace) {
  uint32_t next_id = 0;
  for (model::CollectiveMatchId id : trace->collective_matches.match) {
    next_id = std::max(next_id, id.value() + 1);
  }
  const StepOrderPlan plan = MatchStepOrderRecords({ExtractStepOrderRecords(*trace)}, next_id);
  AppendStepOrderMatches(plan.parts[0], trace);
  RecordStepOrderCounters(plan, trace);
}

}  // namespace teller::reconstruct::internal
