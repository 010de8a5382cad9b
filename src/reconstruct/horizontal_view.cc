// Stage 7: the horizontal view. Collectives match across ranks by
// (communicator, sequence); without sequence numbers, by their order within each
// (communicator, rank) when the op names agree; collective kernels with no collective
// row at all (vLLM's custom all-reduce, NVLS multimem; or, in a step without collective
// kernels, the hooked host calls of a CPU job), once the steps are built, by
// (global step, their ordinal in the rank's step) when every rank of the step ran the
// same sequence of their names. Then one clock offset per host:
// collectives end together across ranks, so the median difference of matched
// end times between two hosts is their clock offset, and the median absolute
// deviation of what remains is the uncertainty. Processes on one host share a
// clock; the host of the lowest rank is the reference.
#include <algorithm>
#include <cstdlib>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "fmt/format.h"
#include "reconstruct/build_state.h"

namespace teller::reconstruct::internal {
namespace {

struct Item {
  int64_t communicator;
  int64_t sequence;  // or the order within (communicator, member)
  int64_t member;    // rank, or 2^32 + process when the rank is unknown
  int64_t start_ns;
  uint32_t host_side;  // 0 device track, 1 host
  uint32_t collective;
};

int64_t Median(std::vector<int64_t>* values) {
  auto mid = values->begin() + static_cast<std::ptrdiff_t>(values->size() / 2);
  std::nth_element(values->begin(), mid, values->end());
  int64_t upper = *mid;
  if (values->size() % 2 == 1) return upper;
  int64_t lower = *std::max_element(values->begin(), mid);
  return lower + (upper - lower) / 2;
}

class MatchWriter {
 public:
  explicit MatchWriter(model::Trace* trace) : trace_(trace) {}

  // Writes the group [begin, end) as one match when it spans two members or more.
  bool Write(const std::vector<Item>& items, size_t begin, size_t end) {
    bool several = false;
    for (size_t i = begin + 1; i < end && !several; ++i) {
      several = items[i].member != items[begin].member;
    }
    if (!several) return false;
    model::CollectiveMatchTable& matches = trace_->collective_matches;
    model::CollectiveMatchId id(next_id_++);
    for (size_t i = begin; i < end; ++i) {
      model::EventRow event = trace_->collectives.event[items[i].collective];
      matches.match.push_back(id);
      matches.event.push_back(event);
      matches.rank.push_back(trace_->processes.rank[trace_->events.process[event.value()].value()]);
    }
    return true;
  }
  uint32_t count() const { return next_id_; }

 private:
  model::Trace* trace_;
  uint32_t next_id_ = 0;
};

}  // namespace

void MatchCollectives(model::Trace* trace) {
  const model::CollectiveTable& collectives = trace->collectives;
  const model::EventTable& events = trace->events;
  std::vector<Item> with_sequence, by_order;
  for (uint32_t c = 0; c < collectives.size(); ++c) {
    uint32_t row = collectives.event[c].value();
    if (events.phase[row] == model::EventPhase::kEnd) continue;
    uint32_t process = events.process[row].value();
    int32_t rank = trace->processes.rank[process];
    Item item{collectives.communicator[c].value(),
              collectives.sequence[c],
              rank >= 0 ? rank : (int64_t{1} << 32) + process,
              events.start_ns[row],
              trace->threads.is_device[events.thread[row].value()] ? 0u : 1u,
              c};
    (item.sequence >= 0 ? with_sequence : by_order).push_back(item);
  }
  MatchWriter writer(trace);
  int64_t unmatched = 0;
  auto same_group = [](const Item& a, const Item& b) {
    return a.communicator == b.communicator && a.sequence == b.sequence;
  };
  auto by_group = [](const Item& a, const Item& b) {
    if (a.communicator != b.communicator) return a.communicator < b.communicator;
    if (a.sequence != b.sequence) return a.sequence < b.sequence;
    if (a.member != b.member) return a.member < b.member;
    if (a.host_side != b.host_side) return a.host_side < b.host_side;
    return a.start_ns < b.start_ns;
  };
  std::sort(with_sequence.begin(), with_sequence.end(), by_group);
  for (size_t i = 0; i < with_sequence.size();) {
    size_t j = i + 1;
    while (j < with_sequence.size() && same_group(with_sequence[i], with_sequence[j])) ++j;
    if (!writer.Write(with_sequence, i, j)) unmatched += static_cast<int64_t>(j - i);
    i = j;
  }

  // No sequence numbers: number each (communicator, member)'s collectives in time
  // order, device records when the member has any, else host records.
  std::sort(by_order.begin(), by_order.end(), [](const Item& a, const Item& b) {
    if (a.communicator != b.communicator) return a.communicator < b.communicator;
    if (a.member != b.member) return a.member < b.member;
    if (a.host_side != b.host_side) return a.host_side < b.host_side;
    return a.start_ns < b.start_ns;
  });
  std::vector<Item> ordered;
  for (size_t i = 0; i < by_order.size();) {
    size_t j = i;
    int64_t k = 0;
    for (; j < by_order.size() && by_order[j].communicator == by_order[i].communicator &&
           by_order[j].member == by_order[i].member;
         ++j) {
      if (by_order[j].host_side != by_order[i].host_side) {
        ++unmatched;  // host records of a member whose device records are used
        continue;
      }
      Item item = by_order[j];
      item.sequence = k++;
      ordered.push_back(item);
    }
    i = j;
  }
  std::sort(ordered.begin(), ordered.end(), by_group);
  int64_t matched_by_order = 0, op_mismatch = 0;
  for (size_t i = 0; i < ordered.size();) {
    size_t j = i + 1;
    while (j < ordered.size() && same_group(ordered[i], ordered[j])) ++j;
    bool same_op = true;
    for (size_t k = i + 1; k < j; ++k) {
      same_op =
          same_op && collectives.op[ordered[k].collective] == collectives.op[ordered[i].collective];
    }
    if (!same_op) {
      ++op_mismatch;
      unmatched += static_cast<int64_t>(j - i);
    } else if (writer.Write(ordered, i, j)) {
      ++matched_by_order;
    } else {
      unmatched += static_cast<int64_t>(j - i);
    }
    i = j;
  }
  model::Stats& stats = trace->stats;
  stats.Set(model::stat::kReconstructCollectiveMatches, writer.count());
  stats.Set(model::stat::kReconstructCollectivesUnmatched, unmatched);
  if (matched_by_order > 0) {
    stats.Set(model::stat::kReconstructCollectivesMatchedByOrder, matched_by_order);
  }
  if (op_mismatch > 0) {
    stats.Increment(model::stat::kReconstructCollectiveOrderOpMismatch, op_mismatch);
  }
}

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

namespace {

// Clock domains: a host name, else a node index, else one shared unknown host.
struct ClockDomains {
  std::vector<uint32_t> of_process;
  std::vector<std::string> name;
  size_t size() const { return name.size(); }
};

ClockDomains FindClockDomains(const model::Trace& trace) {
  const size_t processes = trace.processes.size();
  std::map<int64_t, uint32_t> domain_of_key;
  ClockDomains domains;
  domains.of_process.resize(processes);
  for (size_t p = 0; p < processes; ++p) {
    model::StringId host = trace.processes.host[p];
    int32_t node = trace.processes.node[p];
    int64_t key = host != base::StringPool::kEmpty ? int64_t{host.value()}
                  : node >= 0                      ? (int64_t{1} << 33) + node
                                                   : int64_t{1} << 34;
    auto [it, added] = domain_of_key.emplace(key, static_cast<uint32_t>(domain_of_key.size()));
    if (added) {
      domains.name.push_back(host != base::StringPool::kEmpty ? std::string(trace.str(host))
                             : node >= 0                      ? fmt::format("node {}", node)
                                                              : std::string("unknown host"));
    }
    domains.of_process[p] = it->second;
  }
  return domains;
}

using DomainDifferences = std::map<std::pair<uint32_t, uint32_t>, std::vector<int64_t>>;

// Per match: one end time per process (device record first), median per domain,
// and the differences between each pair of domains.
DomainDifferences MatchedEndDifferences(const model::Trace& trace,
                                        const std::vector<uint32_t>& domain, size_t domains) {
  const model::EventTable& events = trace.events;
  const model::CollectiveMatchTable& matches = trace.collective_matches;
  DomainDifferences differences;
  struct Rep {
    uint32_t process;
    uint32_t host_side;
    int64_t start_ns;
    int64_t end_ns;
  };
  std::vector<Rep> reps;
  std::vector<std::vector<int64_t>> ends(domains);
  std::vector<int64_t> domain_end(domains);
  for (size_t i = 0; i < matches.size();) {
    size_t j = i;
    reps.clear();
    for (; j < matches.size() && matches.match[j] == matches.match[i]; ++j) {
      uint32_t row = matches.event[j].value();
      reps.push_back(Rep{events.process[row].value(),
                         trace.threads.is_device[events.thread[row].value()] ? 0u : 1u,
                         events.start_ns[row], EndNs(events, row)});
    }
    i = j;
    std::sort(reps.begin(), reps.end(), [](const Rep& a, const Rep& b) {
      if (a.process != b.process) return a.process < b.process;
      if (a.host_side != b.host_side) return a.host_side < b.host_side;
      return a.start_ns < b.start_ns;
    });
    for (auto& list : ends) list.clear();
    for (size_t k = 0; k < reps.size(); ++k) {
      if (k > 0 && reps[k].process == reps[k - 1].process) continue;  // first per process
      ends[domain[reps[k].process]].push_back(reps[k].end_ns);
    }
    for (uint32_t d = 0; d < domains; ++d) {
      if (!ends[d].empty()) domain_end[d] = Median(&ends[d]);
    }
    for (uint32_t a = 0; a < domains; ++a) {
      if (ends[a].empty()) continue;
      for (uint32_t b = a + 1; b < domains; ++b) {
        if (!ends[b].empty()) differences[{a, b}].push_back(domain_end[a] - domain_end[b]);
      }
    }
  }
  return differences;
}

// Reference: the domain of the lowest known rank (else of process 0).
uint32_t ReferenceDomain(const model::Trace& trace, const std::vector<uint32_t>& domain) {
  uint32_t reference = domain[0];
  int32_t lowest = INT32_MAX;
  for (size_t p = 0; p < trace.processes.size(); ++p) {
    int32_t rank = trace.processes.rank[p];
    if (rank >= 0 && rank < lowest) {
      lowest = rank;
      reference = domain[p];
    }
  }
  return reference;
}

// Each domain's offset from the reference (add to its times) and its uncertainty;
// reached is 0 for domains no chain of matches connects to the reference.
struct DomainOffsets {
  std::vector<uint8_t> reached;
  std::vector<int64_t> offset;
  std::vector<int64_t> uncertainty;
};

DomainOffsets SpanningOffsets(DomainDifferences& differences, size_t domains, uint32_t reference) {
  // Edge (a, b): offset of b relative to a (add to b's times), its residual, weight.
  struct Edge {
    uint32_t a, b;
    int64_t offset_ns, residual_ns;
    size_t samples;
  };
  std::vector<Edge> edges;
  for (auto& [pair, values] : differences) {
    int64_t offset = Median(&values);
    std::vector<int64_t> deviations(values.size());
    for (size_t k = 0; k < values.size(); ++k) deviations[k] = std::llabs(values[k] - offset);
    edges.push_back(Edge{pair.first, pair.second, offset, Median(&deviations), values.size()});
  }
  // Grow from the reference along the edges with the most matches (Prim).
  DomainOffsets out{std::vector<uint8_t>(domains, 0), std::vector<int64_t>(domains, 0),
                    std::vector<int64_t>(domains, 0)};
  std::vector<uint8_t>& reached = out.reached;
  std::vector<int64_t>& offset = out.offset;
  std::vector<int64_t>& uncertainty = out.uncertainty;
  reached[reference] = 1;
  for (;;) {
    const Edge* best = nullptr;
    for (const Edge& edge : edges) {
      if (reached[edge.a] == reached[edge.b]) continue;
      if (!best || edge.samples > best->samples) best = &edge;
    }
    if (!best) break;
    if (reached[best->a]) {  // b + offset = a
      offset[best->b] = offset[best->a] + best->offset_ns;
      uncertainty[best->b] = uncertainty[best->a] + best->residual_ns;
      reached[best->b] = 1;
    } else {
      offset[best->a] = offset[best->b] - best->offset_ns;
      uncertainty[best->a] = uncertainty[best->b] + best->residual_ns;
      reached[best->a] = 1;
    }
  }
  return out;
}

// Shifts events and logs of each aligned host.
void ShiftEventsAndLogs(const std::vector<uint32_t>& domain, const std::vector<int64_t>& offset,
                        model::Trace* trace) {
  const size_t processes = trace->processes.size();
  model::EventTable& events = trace->events;
  for (size_t row = 0; row < events.size(); ++row) {
    int64_t shift = offset[domain[events.process[row].value()]];
    if (shift != 0) events.start_ns[row] += shift;
  }
  std::map<int32_t, uint32_t> domain_of_rank;
  for (size_t p = 0; p < processes; ++p) {
    if (trace->processes.rank[p] >= 0) domain_of_rank.emplace(trace->processes.rank[p], domain[p]);
  }
  model::LogTable& logs = trace->logs;
  for (size_t i = 0; i < logs.size(); ++i) {
    if (logs.ts_ns[i] == INT64_MIN) continue;
    uint32_t d = kNone;
    if (logs.process[i].valid() && logs.process[i].value() < processes) {
      d = domain[logs.process[i].value()];
    } else if (auto it = domain_of_rank.find(logs.rank[i]); it != domain_of_rank.end()) {
      d = it->second;
    }
    if (d != kNone) logs.ts_ns[i] += offset[d];
  }
}

// Records the offsets on the processes, in a note, and unreached hosts in a counter.
void RecordClockOffsets(const ClockDomains& domains, uint32_t reference,
                        const DomainOffsets& offsets, model::Trace* trace) {
  int64_t unreached = 0;
  std::string detail;
  for (uint32_t d = 0; d < domains.size(); ++d) {
    if (!offsets.reached[d]) {
      ++unreached;
      continue;
    }
    if (d == reference) continue;
    detail += fmt::format("{}{} {:+} ns (+/- {} ns)", detail.empty() ? "" : ", ", domains.name[d],
                          offsets.offset[d], offsets.uncertainty[d]);
  }
  for (size_t p = 0; p < trace->processes.size(); ++p) {
    uint32_t d = domains.of_process[p];
    if (!offsets.reached[d] || d == reference) continue;
    trace->processes.clock_offset_ns[p] += offsets.offset[d];
    trace->processes.clock_uncertainty_ns[p] =
        std::max(trace->processes.clock_uncertainty_ns[p], offsets.uncertainty[d]);
  }
  if (!detail.empty()) {
    trace->meta.notes.push_back(
        fmt::format("clocks of {} host(s) aligned to {} on matched collective end times: {}",
                    domains.size() - 1 - unreached, domains.name[reference], detail));
  }
  if (unreached > 0) {
    trace->stats.Set(model::stat::kReconstructClockUnalignedHosts, unreached);
    trace->meta.notes.push_back(fmt::format(
        "{} host(s) share no matched collective with the reference host {}; their clocks are "
        "not aligned",
        unreached, domains.name[reference]));
  }
}

}  // namespace

void AlignClocks(model::Trace* trace) {
  if (trace->processes.size() == 0) return;
  const ClockDomains domains = FindClockDomains(*trace);
  if (domains.size() < 2) return;
  DomainDifferences differences = MatchedEndDifferences(*trace, domains.of_process, domains.size());
  const uint32_t reference = ReferenceDomain(*trace, domains.of_process);
  const DomainOffsets offsets = SpanningOffsets(differences, domains.size(), reference);
  ShiftEventsAndLogs(domains.of_process, offsets.offset, trace);
  RecordClockOffsets(domains, reference, offsets, trace);
}

}  // namespace teller::reconstruct::internal
