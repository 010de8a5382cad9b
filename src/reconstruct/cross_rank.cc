// Stage 7, first half: collectives matched across ranks and one clock offset per host,
// computed over the parts' collective records only (cross_rank.h).
// Collectives match by (communicator, sequence); without sequence numbers, by their
// order within each (communicator, rank) when the op names agree. Collectives end
// together across ranks, so the median difference of matched end times between two
// hosts is their clock offset, and the median absolute deviation of what remains is
// the uncertainty. Processes on one host share a clock; the host of the lowest rank is
// the reference.
#include "reconstruct/cross_rank.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <string_view>
#include <unordered_map>

#include "fmt/format.h"
#include "reconstruct/build_state.h"

namespace teller::reconstruct {
namespace {

// Interns a part's strings into CollectiveRecords::names, once per string id.
class NameInterner {
 public:
  NameInterner(const model::Trace& part, std::vector<std::string>* names)
      : part_(part), names_(names) {}
  uint32_t Of(model::StringId id) {
    if (!id.valid()) return CollectiveRecords::kNoName;
    auto [it, added] = index_.emplace(id.value(), static_cast<uint32_t>(names_->size()));
    if (added) names_->emplace_back(part_.str(id));
    return it->second;
  }

 private:
  const model::Trace& part_;
  std::vector<std::string>* names_;
  std::unordered_map<uint32_t, uint32_t> index_;  // string id -> name
};

// The communicators first, by string id, so that their order is the trace's.
void InternCommunicators(const model::Trace& part, NameInterner* names) {
  std::vector<model::StringId> ids(part.collectives.communicator);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  for (model::StringId id : ids) names->Of(id);
}

}  // namespace

base::Status PreparePart(model::Trace* part) {
  if (part->reconstructed) {
    return base::InvalidArgument("reconstruct: the trace was reconstructed already");
  }
  TELLER_RETURN_IF_ERROR(internal::CheckTables(*part));
  internal::PairRanges(part);
  return base::OkStatus();
}

CollectiveRecords ExtractCollectiveRecords(const model::Trace& part) {
  CollectiveRecords records;
  NameInterner names(part, &records.names);
  InternCommunicators(part, &names);
  const model::ProcessTable& processes = part.processes;
  for (size_t p = 0; p < processes.size(); ++p) {
    const model::StringId host = processes.host[p];
    records.process_rank.push_back(processes.rank[p]);
    records.process_host.push_back(host == base::StringPool::kEmpty ? CollectiveRecords::kNoName
                                                                    : names.Of(host));
    records.process_node.push_back(processes.node[p]);
    records.process_pid.push_back(processes.os_pid[p]);
  }
  const model::EventTable& events = part.events;
  records.process_has_events.assign(processes.size(), 0);
  for (const model::ProcessIndex process : events.process) {
    if (process.valid() && process.value() < processes.size()) {
      records.process_has_events[process.value()] = 1;
    }
  }
  const model::CollectiveTable& collectives = part.collectives;
  for (uint32_t c = 0; c < collectives.size(); ++c) {
    const uint32_t row = collectives.event[c].value();
    if (events.phase[row] == model::EventPhase::kEnd) continue;
    records.collective.push_back(c);
    records.communicator.push_back(names.Of(collectives.communicator[c]));
    records.op.push_back(names.Of(collectives.op[c]));
    records.sequence.push_back(collectives.sequence[c]);
    records.process.push_back(events.process[row].value());
    records.start_ns.push_back(events.start_ns[row]);
    records.end_ns.push_back(internal::EndNs(events, row));
    records.host_side.push_back(part.threads.is_device[events.thread[row].value()] ? 0 : 1);
  }
  return records;
}

namespace {

bool NameInRange(const CollectiveRecords& records, uint32_t name) {
  return name == CollectiveRecords::kNoName || name < records.names.size();
}

}  // namespace

base::Status CheckCollectiveRecords(const CollectiveRecords& records) {
  const size_t processes = records.process_rank.size(), n = records.size();
  if (records.process_host.size() != processes || records.process_node.size() != processes ||
      records.process_pid.size() != processes || records.process_has_events.size() != processes ||
      records.communicator.size() != n || records.op.size() != n || records.sequence.size() != n ||
      records.process.size() != n || records.start_ns.size() != n || records.end_ns.size() != n ||
      records.host_side.size() != n) {
    return base::InvalidArgument("reconstruct: collective records have ragged columns");
  }
  for (uint32_t host : records.process_host) {
    if (!NameInRange(records, host)) return base::InvalidArgument("reconstruct: bad host name");
  }
  for (size_t r = 0; r < n; ++r) {
    if (records.process[r] >= processes || !NameInRange(records, records.communicator[r]) ||
        !NameInRange(records, records.op[r])) {
      return base::InvalidArgument("reconstruct: collective record {} is out of range", r);
    }
  }
  return base::OkStatus();
}

namespace {

// Every part's records on run-wide indexes: processes and records number part after
// part, names are run-wide ids (communicators in the order they first appear).
struct RunRecords {
  std::vector<uint32_t> process_begin;  // per part, then the total
  std::vector<uint32_t> record_begin;   // per part, then the total
  std::vector<int32_t> process_rank;
  std::vector<uint32_t> process_domain;  // clock domain
  std::vector<std::string> domain_name;
  std::vector<uint32_t> part_of_record;
  std::vector<uint32_t> communicator;
  std::vector<uint32_t> op;
  std::vector<int64_t> sequence;
  std::vector<uint32_t> process;
  std::vector<int64_t> start_ns;
  std::vector<int64_t> end_ns;
  std::vector<uint8_t> host_side;
  size_t processes() const { return process_rank.size(); }
};

// Run-wide ids of one kind of name (communicators, ops), numbered as first seen.
class RunNames {
 public:
  // Per name of the part, its run-wide id (kNoName where the column does not use it);
  // the column's names are seen in the order of the part's names.
  std::vector<uint32_t> OfColumn(const CollectiveRecords& part,
                                 const std::vector<uint32_t>& column) {
    std::vector<uint32_t> used(column);
    std::sort(used.begin(), used.end());
    used.erase(std::unique(used.begin(), used.end()), used.end());
    std::vector<uint32_t> run_id(part.names.size(), CollectiveRecords::kNoName);
    for (uint32_t name : used) {
      if (name == CollectiveRecords::kNoName) continue;
      auto [it, added] = ids_.emplace(part.names[name], static_cast<uint32_t>(ids_.size()));
      run_id[name] = it->second;
    }
    return run_id;
  }

 private:
  std::unordered_map<std::string, uint32_t> ids_;
};

uint32_t RunIdOf(const std::vector<uint32_t>& run_id, uint32_t name) {
  return name == CollectiveRecords::kNoName ? name : run_id[name];
}

// Clock domains: a host name, else a node index, else one shared unknown host; numbered
// in the order of the processes.
class ClockDomains {
 public:
  uint32_t Of(const CollectiveRecords& part, size_t p, RunRecords* run) {
    const uint32_t host = part.process_host[p];
    const int32_t node = part.process_node[p];
    std::string key = host != CollectiveRecords::kNoName ? "h" + part.names[host]
                      : node >= 0                        ? fmt::format("n{}", node)
                                                         : std::string("u");
    auto [it, added] = ids_.emplace(std::move(key), static_cast<uint32_t>(ids_.size()));
    if (added) {
      run->domain_name.push_back(host != CollectiveRecords::kNoName ? part.names[host]
                                 : node >= 0                        ? fmt::format("node {}", node)
                                                                    : std::string("unknown host"));
    }
    return it->second;
  }

 private:
  std::unordered_map<std::string, uint32_t> ids_;
};

void AppendProcesses(const CollectiveRecords& part, ClockDomains* domains, RunRecords* run) {
  for (size_t p = 0; p < part.process_rank.size(); ++p) {
    run->process_rank.push_back(part.process_rank[p]);
    run->process_domain.push_back(domains->Of(part, p, run));
  }
}

void AppendRecords(const CollectiveRecords& part, uint32_t part_index, uint32_t process_base,
                   RunNames* communicators, RunNames* ops, RunRecords* run) {
  const std::vector<uint32_t> communicator = communicators->OfColumn(part, part.communicator);
  const std::vector<uint32_t> op = ops->OfColumn(part, part.op);
  for (size_t r = 0; r < part.size(); ++r) {
    run->part_of_record.push_back(part_index);
    run->communicator.push_back(RunIdOf(communicator, part.communicator[r]));
    run->op.push_back(RunIdOf(op, part.op[r]));
    run->sequence.push_back(part.sequence[r]);
    run->process.push_back(process_base + part.process[r]);
    run->start_ns.push_back(part.start_ns[r]);
    run->end_ns.push_back(part.end_ns[r]);
    run->host_side.push_back(part.host_side[r]);
  }
}

RunRecords JoinRecords(const std::vector<CollectiveRecords>& parts) {
  RunRecords run;
  RunNames communicators, ops;
  ClockDomains domains;
  for (uint32_t k = 0; k < parts.size(); ++k) {
    const uint32_t process_base = static_cast<uint32_t>(run.processes());
    run.process_begin.push_back(process_base);
    run.record_begin.push_back(static_cast<uint32_t>(run.part_of_record.size()));
    AppendProcesses(parts[k], &domains, &run);
    AppendRecords(parts[k], k, process_base, &communicators, &ops, &run);
  }
  run.process_begin.push_back(static_cast<uint32_t>(run.processes()));
  run.record_begin.push_back(static_cast<uint32_t>(run.part_of_record.size()));
  return run;
}

// ---- Matching ----

struct Item {
  int64_t communicator;
  int64_t sequence;  // or the order within (communicator, member)
  int64_t member;    // rank, or 2^32 + process when the rank is unknown
  int64_t start_ns;
  uint32_t host_side;  // 0 device track, 1 host
  uint32_t record;
};

// The run's match table: rows of one match are contiguous, ids ascending.
struct RunMatches {
  std::vector<uint32_t> match;
  std::vector<uint32_t> record;
  size_t size() const { return match.size(); }
};

class MatchWriter {
 public:
  explicit MatchWriter(RunMatches* matches) : matches_(matches) {}

  // Writes the group [begin, end) as one match when it spans two members or more.
  bool Write(const std::vector<Item>& items, size_t begin, size_t end) {
    bool several = false;
    for (size_t i = begin + 1; i < end && !several; ++i) {
      several = items[i].member != items[begin].member;
    }
    if (!several) return false;
    const uint32_t id = next_id_++;
    for (size_t i = begin; i < end; ++i) {
      matches_->match.push_back(id);
      matches_->record.push_back(items[i].record);
    }
    return true;
  }
  uint32_t count() const { return next_id_; }

 private:
  RunMatches* matches_;
  uint32_t next_id_ = 0;
};

bool SameGroup(const Item& a, const Item& b) {
  return a.communicator == b.communicator && a.sequence == b.sequence;
}

bool ByGroup(const Item& a, const Item& b) {
  if (a.communicator != b.communicator) return a.communicator < b.communicator;
  if (a.sequence != b.sequence) return a.sequence < b.sequence;
  if (a.member != b.member) return a.member < b.member;
  if (a.host_side != b.host_side) return a.host_side < b.host_side;
  return a.start_ns < b.start_ns;
}

bool ByMemberTime(const Item& a, const Item& b) {
  if (a.communicator != b.communicator) return a.communicator < b.communicator;
  if (a.member != b.member) return a.member < b.member;
  if (a.host_side != b.host_side) return a.host_side < b.host_side;
  return a.start_ns < b.start_ns;
}

void SplitBySequence(const RunRecords& run, std::vector<Item>* with_sequence,
                     std::vector<Item>* by_order) {
  for (uint32_t r = 0; r < run.part_of_record.size(); ++r) {
    const uint32_t process = run.process[r];
    const int32_t rank = run.process_rank[process];
    Item item{
        run.communicator[r], run.sequence[r],  rank >= 0 ? rank : (int64_t{1} << 32) + process,
        run.start_ns[r],     run.host_side[r], r};
    (item.sequence >= 0 ? with_sequence : by_order)->push_back(item);
  }
}

void MatchBySequence(std::vector<Item>* items, MatchWriter* writer, CrossRankCounters* counters) {
  std::sort(items->begin(), items->end(), ByGroup);
  for (size_t i = 0; i < items->size();) {
    size_t j = i + 1;
    while (j < items->size() && SameGroup((*items)[i], (*items)[j])) ++j;
    if (!writer->Write(*items, i, j)) counters->unmatched += static_cast<int64_t>(j - i);
    i = j;
  }
}

// Numbers each (communicator, member)'s collectives in time order, device records
// when the member has any, else host records.
std::vector<Item> NumberByOrder(std::vector<Item>* by_order, CrossRankCounters* counters) {
  std::sort(by_order->begin(), by_order->end(), ByMemberTime);
  const std::vector<Item>& items = *by_order;
  std::vector<Item> ordered;
  for (size_t i = 0; i < items.size();) {
    size_t j = i;
    int64_t k = 0;
    for (; j < items.size() && items[j].communicator == items[i].communicator &&
           items[j].member == items[i].member;
         ++j) {
      if (items[j].host_side != items[i].host_side) {
        ++counters->unmatched;  // host records of a member whose device records are used
        continue;
      }
      Item item = items[j];
      item.sequence = k++;
      ordered.push_back(item);
    }
    i = j;
  }
  return ordered;
}

void MatchByOrder(const RunRecords& run, std::vector<Item>* by_order, MatchWriter* writer,
                  CrossRankCounters* counters) {
  std::vector<Item> ordered = NumberByOrder(by_order, counters);
  std::sort(ordered.begin(), ordered.end(), ByGroup);
  for (size_t i = 0; i < ordered.size();) {
    size_t j = i + 1;
    while (j < ordered.size() && SameGroup(ordered[i], ordered[j])) ++j;
    bool same_op = true;
    for (size_t k = i + 1; k < j; ++k) {
      same_op = same_op && run.op[ordered[k].record] == run.op[ordered[i].record];
    }
    if (!same_op) {
      ++counters->order_op_mismatch;
      counters->unmatched += static_cast<int64_t>(j - i);
    } else if (writer->Write(ordered, i, j)) {
      ++counters->matched_by_order;
    } else {
      counters->unmatched += static_cast<int64_t>(j - i);
    }
    i = j;
  }
}

RunMatches MatchRecords(const RunRecords& run, CrossRankCounters* counters) {
  std::vector<Item> with_sequence, by_order;
  SplitBySequence(run, &with_sequence, &by_order);
  RunMatches matches;
  MatchWriter writer(&matches);
  MatchBySequence(&with_sequence, &writer, counters);
  MatchByOrder(run, &by_order, &writer, counters);
  counters->matches = writer.count();
  return matches;
}

// ---- Clock alignment ----

int64_t Median(std::vector<int64_t>* values) {
  auto mid = values->begin() + static_cast<std::ptrdiff_t>(values->size() / 2);
  std::nth_element(values->begin(), mid, values->end());
  int64_t upper = *mid;
  if (values->size() % 2 == 1) return upper;
  int64_t lower = *std::max_element(values->begin(), mid);
  return lower + (upper - lower) / 2;
}

using DomainDifferences = std::map<std::pair<uint32_t, uint32_t>, std::vector<int64_t>>;

// Per match: one end time per process (device record first), median per domain,
// and the differences between each pair of domains.
DomainDifferences MatchedEndDifferences(const RunRecords& run, const RunMatches& matches,
                                        size_t domains) {
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
      const uint32_t r = matches.record[j];
      reps.push_back(Rep{run.process[r], run.host_side[r], run.start_ns[r], run.end_ns[r]});
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
      ends[run.process_domain[reps[k].process]].push_back(reps[k].end_ns);
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
uint32_t ReferenceDomain(const RunRecords& run) {
  uint32_t reference = run.process_domain[0];
  int32_t lowest = INT32_MAX;
  for (size_t p = 0; p < run.processes(); ++p) {
    const int32_t rank = run.process_rank[p];
    if (rank >= 0 && rank < lowest) {
      lowest = rank;
      reference = run.process_domain[p];
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

// The notes and the unaligned-host counter of an alignment.
void DescribeClockOffsets(const RunRecords& run, uint32_t reference, const DomainOffsets& offsets,
                          CrossRankPlan* plan) {
  const size_t domains = run.domain_name.size();
  int64_t unreached = 0;
  std::string detail;
  for (uint32_t d = 0; d < domains; ++d) {
    if (!offsets.reached[d]) {
      ++unreached;
      continue;
    }
    if (d == reference) continue;
    detail += fmt::format("{}{} {:+} ns (+/- {} ns)", detail.empty() ? "" : ", ",
                          run.domain_name[d], offsets.offset[d], offsets.uncertainty[d]);
  }
  if (!detail.empty()) {
    plan->notes.push_back(
        fmt::format("clocks of {} host(s) aligned to {} on matched collective end times: {}",
                    domains - 1 - unreached, run.domain_name[reference], detail));
  }
  if (unreached > 0) {
    plan->counters.unaligned_hosts = unreached;
    plan->notes.push_back(fmt::format(
        "{} host(s) share no matched collective with the reference host {}; their clocks are "
        "not aligned",
        unreached, run.domain_name[reference]));
  }
}

// Each part's processes' offsets, and every rank's (its first process's).
void WriteClockOffsets(const RunRecords& run, uint32_t reference, const DomainOffsets& offsets,
                       CrossRankPlan* plan) {
  std::map<int32_t, int64_t> offset_of_rank;
  for (size_t k = 0; k < plan->parts.size(); ++k) {
    CrossRankPlan::Part& part = plan->parts[k];
    for (uint32_t p = run.process_begin[k]; p < run.process_begin[k + 1]; ++p) {
      const uint32_t d = run.process_domain[p];
      const bool aligned = offsets.reached[d] && d != reference;
      part.clock_offset_ns.push_back(offsets.offset[d]);
      part.clock_uncertainty_ns.push_back(aligned ? offsets.uncertainty[d] : 0);
      part.clock_aligned.push_back(aligned ? 1 : 0);
      const int32_t rank = run.process_rank[p];
      if (rank >= 0) offset_of_rank.emplace(rank, offsets.offset[d]);
    }
  }
  for (CrossRankPlan::Part& part : plan->parts) {
    for (const auto& [rank, offset] : offset_of_rank) {
      part.rank.push_back(rank);
      part.rank_clock_offset_ns.push_back(offset);
    }
  }
}

void AlignRecordClocks(const RunRecords& run, const RunMatches& matches, CrossRankPlan* plan) {
  const size_t domains = run.domain_name.size();
  if (run.processes() == 0 || domains < 2) return;
  DomainDifferences differences = MatchedEndDifferences(run, matches, domains);
  const uint32_t reference = ReferenceDomain(run);
  const DomainOffsets offsets = SpanningOffsets(differences, domains, reference);
  WriteClockOffsets(run, reference, offsets, plan);
  DescribeClockOffsets(run, reference, offsets, plan);
}

// Hands each match row to the part that holds its collective.
void WriteMatches(const std::vector<CollectiveRecords>& parts, const RunRecords& run,
                  const RunMatches& matches, CrossRankPlan* plan) {
  for (size_t i = 0; i < matches.size(); ++i) {
    const uint32_t r = matches.record[i];
    const uint32_t k = run.part_of_record[r];
    CrossRankPlan::Part& part = plan->parts[k];
    part.match.push_back(model::CollectiveMatchId(matches.match[i]));
    part.match_collective.push_back(parts[k].collective[r - run.record_begin[k]]);
  }
}

}  // namespace

namespace {

// A process of a bundle that has events and no rank, where its rank goes.
struct UnrankedProcess {
  std::string_view host;
  int64_t pid = 0;
  size_t part = 0;
  size_t process = 0;
};

// One past the highest rank of parts [0, end): where a bundle's new ranks start.
int32_t NextFreeRank(const std::vector<CollectiveRecords>& parts, size_t end) {
  int32_t next = 0;
  for (size_t k = 0; k < end; ++k) {
    for (const int32_t rank : parts[k].process_rank) next = std::max(next, rank + 1);
  }
  return next;
}

// Numbers the unranked processes with events of the bundle of parts [first, end).
void NumberBundle(size_t first, size_t end, std::vector<CollectiveRecords>* parts,
                  std::vector<uint8_t>* changed) {
  std::vector<UnrankedProcess> unranked;
  for (size_t k = first; k < end; ++k) {
    const CollectiveRecords& records = (*parts)[k];
    for (size_t p = 0; p < records.process_rank.size(); ++p) {
      if (records.process_rank[p] >= 0 || !records.process_has_events[p]) continue;
      const uint32_t host = records.process_host[p];
      const std::string_view host_name =
          host == CollectiveRecords::kNoName ? std::string_view() : records.names[host];
      unranked.push_back({host_name, records.process_pid[p], k, p});
    }
  }
  if (unranked.size() < 2) return;
  std::stable_sort(unranked.begin(), unranked.end(), [](const auto& a, const auto& b) {
    return std::pair(a.host, a.pid) < std::pair(b.host, b.pid);
  });
  int32_t next_rank = NextFreeRank(*parts, end);
  for (const UnrankedProcess& process : unranked) {
    (*parts)[process.part].process_rank[process.process] = next_rank++;
    (*changed)[process.part] = 1;
  }
}

}  // namespace

std::vector<uint8_t> NumberUnrankedProcesses(const std::vector<int32_t>& bundle,
                                             std::vector<CollectiveRecords>* parts) {
  std::vector<uint8_t> changed(parts->size(), 0);
  if (bundle.size() != parts->size()) return changed;
  for (size_t first = 0; first < parts->size();) {
    size_t end = first + 1;
    while (end < parts->size() && bundle[end] == bundle[first]) ++end;
    if (bundle[first] >= 0) NumberBundle(first, end, parts, &changed);
    first = end;
  }
  return changed;
}

CrossRankPlan MatchCollectiveRecords(const std::vector<CollectiveRecords>& parts,
                                     bool align_clocks) {
  const RunRecords run = JoinRecords(parts);
  CrossRankPlan plan;
  plan.parts.resize(parts.size());
  const RunMatches matches = MatchRecords(run, &plan.counters);
  WriteMatches(parts, run, matches, &plan);
  if (align_clocks) AlignRecordClocks(run, matches, &plan);
  return plan;
}

namespace {

base::Status CheckPartPlan(const CrossRankPlan::Part& plan, const model::Trace& part) {
  const size_t processes = part.processes.size();
  if ((!plan.process_rank.empty() && plan.process_rank.size() != processes) ||
      (!plan.clock_offset_ns.empty() && plan.clock_offset_ns.size() != processes) ||
      plan.clock_uncertainty_ns.size() != plan.clock_offset_ns.size() ||
      plan.clock_aligned.size() != plan.clock_offset_ns.size() ||
      plan.rank.size() != plan.rank_clock_offset_ns.size() ||
      plan.match.size() != plan.match_collective.size()) {
    return base::InvalidArgument(
        "reconstruct: the cross-rank plan does not fit the part ({} processes, {} offsets)",
        processes, plan.clock_offset_ns.size());
  }
  for (uint32_t c : plan.match_collective) {
    if (c >= part.collectives.size()) {
      return base::InvalidArgument("reconstruct: the cross-rank plan names collective {} of {}", c,
                                   part.collectives.size());
    }
  }
  return base::OkStatus();
}

// The run's ranks of the part's processes, and of their log lines that had none (the
// fatal-signal lines), as BundleParts::NumberUnrankedProcesses sets them.
void SetProcessRanks(const CrossRankPlan::Part& plan, model::Trace* part) {
  if (plan.process_rank.empty()) return;
  part->processes.rank = plan.process_rank;
  model::LogTable& logs = part->logs;
  for (size_t row = 0; row < logs.size(); ++row) {
    const model::ProcessIndex process = logs.process[row];
    if (logs.rank[row] < 0 && process.valid() && process.value() < plan.process_rank.size()) {
      logs.rank[row] = plan.process_rank[process.value()];
    }
  }
}

void WritePartMatches(const CrossRankPlan::Part& plan, model::Trace* part) {
  model::CollectiveMatchTable& matches = part->collective_matches;
  for (size_t i = 0; i < plan.match.size(); ++i) {
    const model::EventRow event = part->collectives.event[plan.match_collective[i]];
    matches.match.push_back(plan.match[i]);
    matches.event.push_back(event);
    matches.rank.push_back(part->processes.rank[part->events.process[event.value()].value()]);
  }
}

// The offset of a log line: its process's, else its rank's; 0 when neither is known.
int64_t LogOffset(const CrossRankPlan::Part& plan, const model::LogTable& logs, size_t i) {
  const model::ProcessIndex process = logs.process[i];
  if (process.valid() && process.value() < plan.clock_offset_ns.size()) {
    return plan.clock_offset_ns[process.value()];
  }
  auto it = std::lower_bound(plan.rank.begin(), plan.rank.end(), logs.rank[i]);
  if (it == plan.rank.end() || *it != logs.rank[i]) return 0;
  return plan.rank_clock_offset_ns[static_cast<size_t>(it - plan.rank.begin())];
}

void ShiftEvents(const CrossRankPlan::Part& plan, model::Trace* part) {
  model::EventTable& events = part->events;
  for (size_t row = 0; row < events.size(); ++row) {
    const int64_t shift = plan.clock_offset_ns[events.process[row].value()];
    if (shift != 0) events.start_ns[row] += shift;
  }
}

void RecordProcessOffsets(const CrossRankPlan::Part& plan, model::Trace* part) {
  model::ProcessTable& processes = part->processes;
  for (size_t p = 0; p < processes.size(); ++p) {
    if (!plan.clock_aligned[p]) continue;
    processes.clock_offset_ns[p] += plan.clock_offset_ns[p];
    processes.clock_uncertainty_ns[p] =
        std::max(processes.clock_uncertainty_ns[p], plan.clock_uncertainty_ns[p]);
  }
}

}  // namespace

base::Status ApplyCrossRankPart(const CrossRankPlan::Part& plan, model::Trace* part) {
  TELLER_RETURN_IF_ERROR(CheckPartPlan(plan, *part));
  SetProcessRanks(plan, part);
  WritePartMatches(plan, part);
  if (plan.clock_offset_ns.empty()) return base::OkStatus();
  ShiftEvents(plan, part);
  ShiftLogLines(plan, &part->logs);
  RecordProcessOffsets(plan, part);
  return base::OkStatus();
}

void RecordCrossRankCounters(const CrossRankPlan& plan, model::Trace* trace) {
  const CrossRankCounters& counters = plan.counters;
  model::Stats& stats = trace->stats;
  stats.Set(model::stat::kReconstructCollectiveMatches, counters.matches);
  stats.Set(model::stat::kReconstructCollectivesUnmatched, counters.unmatched);
  if (counters.matched_by_order > 0) {
    stats.Set(model::stat::kReconstructCollectivesMatchedByOrder, counters.matched_by_order);
  }
  if (counters.order_op_mismatch > 0) {
    stats.Increment(model::stat::kReconstructCollectiveOrderOpMismatch, counters.order_op_mismatch);
  }
  if (counters.unaligned_hosts > 0) {
    stats.Set(model::stat::kReconstructClockUnalignedHosts, counters.unaligned_hosts);
  }
  trace->meta.notes.insert(trace->meta.notes.end(), plan.notes.begin(), plan.notes.end());
}

CrossRankPlan::Part JoinedShare(const CrossRankPlan& plan) {
  CrossRankPlan::Part joined;
  for (const CrossRankPlan::Part& part : plan.parts) {
    auto append = [](const auto& column, auto* to) {
      to->insert(to->end(), column.begin(), column.end());
    };
    append(part.clock_offset_ns, &joined.clock_offset_ns);
    append(part.clock_uncertainty_ns, &joined.clock_uncertainty_ns);
    append(part.clock_aligned, &joined.clock_aligned);
  }
  if (!plan.parts.empty()) {
    joined.rank = plan.parts[0].rank;
    joined.rank_clock_offset_ns = plan.parts[0].rank_clock_offset_ns;
  }
  return joined;
}

void ShiftLogLines(const CrossRankPlan::Part& plan, model::LogTable* logs) {
  if (plan.clock_offset_ns.empty()) return;
  for (size_t i = 0; i < logs->size(); ++i) {
    if (logs->ts_ns[i] != INT64_MIN) logs->ts_ns[i] += LogOffset(plan, *logs, i);
  }
}

}  // namespace teller::reconstruct
