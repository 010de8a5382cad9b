#include "diagnose/cause_operators.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "base/median.h"

namespace teller::diagnose {
namespace {

// The node channel of a cell's instances (a collective's transfer is its kernels); none for
// cells that count no node.
std::optional<cause::Channel> NodeChannelOf(cause::Channel channel) {
  switch (channel) {
    case cause::Channel::kCollectiveTransfer:
      return cause::Channel::kCollective;
    case cause::Channel::kStepGap:
    case cause::Channel::kOrderBreaks:
    case cause::Channel::kFailedCalls:
    case cause::Channel::kStall:
      return std::nullopt;
    default:
      return channel;
  }
}

// One rank's cell of one kind: (rank, channel, family).
using CellKey = std::tuple<int32_t, cause::Channel, localize::OperatorFamily>;

constexpr double kNoCell = std::numeric_limits<double>::quiet_NaN();

// Whether a node counts in a cell of this kind (a collective's transfer cell counts its
// kernels).
bool CountsNode(const CellKey& key, const cause::NodeCell& cell) {
  return NodeChannelOf(std::get<1>(key)) == cell.channel && std::get<2>(key) == cell.family;
}

// Whether time grew beyond `base` as the labels call an instance changed (kMovedNameShare,
// kMovedNameNs).
bool Grew(double excess, double base) {
  return excess >= std::max(kMovedNameShare * base, kMovedNameNs);
}

// The operators found, by (victim, name).
using FoundOperators = std::map<std::pair<bool, base::StringId>, CauseOperator>;

// How an operator moved: its own time grew, it holds what grew, or it only started later.
enum class Moved : uint8_t { kGrew, kHoldsMoved, kStartedLater };

// Records that the operator (victim, name) moved in `group`, naming it at its first record.
void Record(const model::Trace& trace, bool victim, base::StringId name, model::Layer layer,
            Moved how, int64_t group, FoundOperators* found) {
  CauseOperator& op = (*found)[{victim, name}];
  if (op.name.empty()) {
    op.layer = layer;
    op.name = std::string(trace.strings.Get(name));
    op.victim = victim;
    op.holds_moved = how == Moved::kHoldsMoved;
    op.started_later = how == Moved::kStartedLater;
  }
  op.groups.push_back(group);
}

// A cell kind's instances' time by name, per row of its query (0 where it did not run).
struct CellNames {
  std::map<base::StringId, std::vector<double>> by_name;
  std::map<base::StringId, model::Layer> layer;
};

CellNames ReadCellNames(const model::Trace& trace, const std::vector<cause::NodeCell>& node_cells,
                        const OperatorCell& cell) {
  const CellKey key{cell.rank, cell.channel, cell.family};
  CellNames names;
  for (size_t i = 0; i < cell.rows.size(); ++i) {
    const size_t s = cell.rows[i].step;
    for (uint32_t n = trace.steps.node_begin[s].value(); n < trace.steps.node_end[s].value(); ++n) {
      if (!CountsNode(key, node_cells[n])) continue;
      // Step time is the step's own range (its other uncounted nodes are no operators).
      if (node_cells[n].channel == cause::Channel::kStepTime && trace.nodes.parent[n].valid()) {
        continue;
      }
      const model::EventRow event = trace.nodes.event[n];
      const base::StringId name = trace.events.name[event.value()];
      std::vector<double>& times = names.by_name[name];
      times.resize(cell.rows.size(), 0.0);
      times[i] += static_cast<double>(trace.events.dur_ns[event.value()]);
      names.layer[name] = trace.events.layer[event.value()];
    }
  }
  return names;
}

// A name's usual time and its cell's usual value: medians over the rows outside [first,
// last] where it ran, and how many there were.
struct UsualTime {
  size_t rows = 0;
  double time = 0.0;
  double cell_value = 0.0;
};

UsualTime UsualTimeOf(const OperatorCell& cell, const std::vector<double>& times, int64_t first,
                      int64_t last) {
  std::vector<double> name_times, cell_values;
  for (size_t i = 0; i < times.size(); ++i) {
    const int64_t group = cell.rows[i].group;
    if ((group >= first && group <= last) || times[i] <= 0.0 || std::isnan(cell.rows[i].value)) {
      continue;
    }
    name_times.push_back(times[i]);
    cell_values.push_back(cell.rows[i].value);
  }
  if (name_times.empty()) return {};
  return {name_times.size(), base::MedianInPlace(&name_times), base::MedianInPlace(&cell_values)};
}

// The share of the name's time in row i beyond what its cell expected there, when it moved
// (kMovedNameShare and kMovedNameNs); 0 when it did not. A name that never ran outside the
// window is new: all of it. One that ran in fewer than 3 such steps counts as moved by an
// unknown share (NaN).
double MovedShare(const OperatorCell& cell, const std::vector<double>& times, size_t i,
                  const UsualTime& usual) {
  if (usual.rows == 0) return 1.0;
  if (usual.rows < 3) return kNoCell;
  const double scale = usual.cell_value > 0.0 ? cell.rows[i].expected / usual.cell_value : 1.0;
  const double expected = usual.time * scale;
  const double excess = times[i] - expected;
  return Grew(excess, expected) ? excess / times[i] : 0.0;
}

// The cells that moved in the cause's window: each kind's role (a victim unless the cause
// predicts it of a culprit rank), and the (map step, kind) pairs. Beside the cells the cause
// predicts to move, any that moved far in the same steps waited with them (a host's
// synchronizations). A reorder's order breaks count too (no node: their kernels' order).
struct MovedCells {
  std::map<CellKey, bool> victim;
  std::set<std::pair<uint32_t, CellKey>> at;
};

MovedCells FindMovedCells(const cause::DeviationMap& map, const cause::Hypothesis& hypothesis) {
  MovedCells moved;
  std::set<uint32_t> rows;
  auto add = [&](const cause::Cell& cell, bool victim, double min_z, bool evidence) {
    const bool reordered = evidence && hypothesis.kind == cause::CauseKind::kReorder &&
                           cell.channel == cause::Channel::kOrderBreaks;
    if ((!NodeChannelOf(cell.channel) && !reordered) || cell.z() < min_z) return;
    const CellKey key{map.steps[cell.step_row].rank, cell.channel, cell.family};
    if (!moved.victim.emplace(key, victim).second) moved.victim[key] &= victim;
    moved.at.emplace(cell.step_row, key);
  };
  // A rank cause's evidence on another rank is what it predicts that rank waited, whether
  // or not that rank's waits summed above none over the window (its victims).
  auto is_victim = [&](int32_t rank) {
    return hypothesis.IsVictimRank(rank) ||
           (cause::IsRankCause(hypothesis.kind) && hypothesis.rank >= 0 && rank != hypothesis.rank);
  };
  for (uint32_t index : hypothesis.evidence) {
    const cause::Cell& cell = map.cells[index];
    add(cell, is_victim(map.steps[cell.step_row].rank), kMovedCellZ, true);
    rows.insert(cell.step_row);
  }
  for (uint32_t row : rows) {
    const cause::MapStep& step = map.steps[row];
    for (uint32_t c = step.cells_begin; c < step.cells_end; ++c) {
      const CellKey key{step.rank, map.cells[c].channel, map.cells[c].family};
      if (!moved.at.count({row, key})) add(map.cells[c], true, kMovedWithCauseZ, false);
    }
  }
  return moved;
}

// A name that moved in a step: its share of time beyond the expected (NaN unknown).
struct MovedName {
  CellKey key;
  base::StringId name;
  bool victim = false;
  double share = 0.0;
};

// The host ranges holding moved host work in a step whose time grew by it: a range grew by
// its moved calls' and ranges' excess, and moved when that is kMovedNameShare of the rest of
// its time and kMovedNameNs (device work runs beside its launching range, not in it).
void AddHoldingRanges(const model::Trace& trace, const std::vector<cause::NodeCell>& node_cells,
                      size_t s, int64_t group, const std::vector<MovedName>& names,
                      FoundOperators* found) {
  std::map<uint32_t, std::pair<double, bool>> grew;  // node -> (excess, a culprit's)
  for (uint32_t n = trace.steps.node_begin[s].value(); n < trace.steps.node_end[s].value(); ++n) {
    const model::EventRow event = trace.nodes.event[n];
    if (trace.threads.is_device[trace.events.thread[event.value()].value()]) continue;
    for (const MovedName& moved : names) {
      if (moved.name != trace.events.name[event.value()] || std::isnan(moved.share) ||
          !CountsNode(moved.key, node_cells[n])) {
        continue;
      }
      const double excess = moved.share * static_cast<double>(trace.events.dur_ns[event.value()]);
      for (model::NodeIndex p = trace.nodes.parent[n]; p.valid(); p = trace.nodes.parent[p.value()]) {
        auto& [total, culprit] = grew[p.value()];
        total += excess;
        culprit |= !moved.victim;
      }
    }
  }
  for (const auto& [n, growth] : grew) {
    const auto [excess, culprit] = growth;
    const model::EventRow event = trace.nodes.event[n];
    const double rest = static_cast<double>(trace.events.dur_ns[event.value()]) - excess;
    if (!Grew(excess, rest)) continue;
    // A range that moved in a cell of its own stays recorded as such.
    Record(trace, !culprit, trace.events.name[event.value()], trace.events.layer[event.value()],
           Moved::kHoldsMoved, group, found);
  }
}

// A step's compute kernels in the order they ran: (start, name).
std::vector<std::pair<model::TimeNs, base::StringId>> KernelsInOrder(
    const model::Trace& trace, const std::vector<cause::NodeCell>& node_cells, size_t s) {
  std::vector<std::pair<model::TimeNs, base::StringId>> kernels;
  for (uint32_t n = trace.steps.node_begin[s].value(); n < trace.steps.node_end[s].value(); ++n) {
    if (node_cells[n].channel != cause::Channel::kCompute) continue;
    const model::EventRow event = trace.nodes.event[n];
    kernels.emplace_back(trace.events.start_ns[event.value()], trace.events.name[event.value()]);
  }
  std::sort(kernels.begin(), kernels.end());
  return kernels;
}

// Kernels run in another order: in each row whose order breaks moved, the kernels that
// followed another kernel than they do in the rank's rows outside the window.
void AddReorderedKernels(const model::Trace& trace, const std::vector<cause::NodeCell>& node_cells,
                         const OperatorQuery& query, const OperatorCell& cell,
                         FoundOperators* found) {
  std::set<std::pair<base::StringId, base::StringId>> usual;
  for (const OperatorRow& row : cell.rows) {
    if (row.group >= query.first_group && row.group <= query.last_group) continue;
    const auto kernels = KernelsInOrder(trace, node_cells, row.step);
    for (size_t k = 1; k < kernels.size(); ++k) usual.emplace(kernels[k - 1].second, kernels[k].second);
  }
  for (const OperatorRow& row : cell.rows) {
    if (!row.moved) continue;
    const auto kernels = KernelsInOrder(trace, node_cells, row.step);
    for (size_t k = 1; k < kernels.size(); ++k) {
      if (usual.count({kernels[k - 1].second, kernels[k].second})) continue;
      Record(trace, false, kernels[k].second, model::Layer::kK, Moved::kGrew, row.group, found);
    }
  }
}

const cause::Cell* FindCell(const cause::DeviationMap& map, uint32_t row, const CellKey& key) {
  const cause::MapStep& step = map.steps[row];
  for (uint32_t c = step.cells_begin; c < step.cells_end; ++c) {
    const cause::Cell& cell = map.cells[c];
    if (cell.channel == std::get<1>(key) && cell.family == std::get<2>(key)) return &cell;
  }
  return nullptr;
}

}  // namespace

OperatorQuery QueryOfCause(const cause::DeviationMap& map, const cause::Hypothesis& hypothesis) {
  OperatorQuery query;
  query.first_group = hypothesis.first_group;
  query.last_group = hypothesis.last_group;
  query.later_kernels = hypothesis.kind == cause::CauseKind::kGpuSlow;
  if (hypothesis.evidence.empty()) return query;
  const MovedCells moved = FindMovedCells(map, hypothesis);
  std::map<int32_t, std::vector<uint32_t>> rows_of_rank;
  for (uint32_t row = 0; row < map.steps.size(); ++row) {
    rows_of_rank[map.steps[row].rank].push_back(row);
  }
  for (const auto& [key, victim] : moved.victim) {
    OperatorCell cell{std::get<0>(key), std::get<1>(key), std::get<2>(key), victim, {}};
    for (uint32_t row : rows_of_rank[cell.rank]) {
      const cause::Cell* map_cell = FindCell(map, row, key);
      cell.rows.push_back({map.steps[row].step.value(), map.steps[row].group,
                           map_cell != nullptr ? map_cell->value : kNoCell,
                           map_cell != nullptr ? map_cell->expected : kNoCell,
                           moved.at.count({row, key}) > 0});
    }
    query.cells.push_back(std::move(cell));
  }
  return query;
}

OperatorQuery QueryOfSteps(const OperatorQuery& query, uint32_t begin, uint32_t end) {
  OperatorQuery part{query.first_group, query.last_group, query.later_kernels, {}};
  for (const OperatorCell& cell : query.cells) {
    OperatorCell kept{cell.rank, cell.channel, cell.family, cell.victim, {}};
    for (const OperatorRow& row : cell.rows) {
      if (row.step < begin || row.step >= end) continue;
      kept.rows.push_back(row);
      kept.rows.back().step -= begin;
    }
    if (!kept.rows.empty()) part.cells.push_back(std::move(kept));
  }
  return part;
}

// Kernels that started later in their step on a culprit rank: in each row where one of the
// rank's culprit compute cells moved, a kernel (by name and its place among the name's
// instances) whose start within the step lies beyond its usual start (the median over the
// rank's rows outside the window) by kMovedNameShare of it and kMovedNameNs, as the labels
// call an instance moved.
void AddLaterKernels(const model::Trace& trace, const std::vector<cause::NodeCell>& node_cells,
                     const OperatorQuery& query, FoundOperators* found) {
  std::map<int32_t, std::vector<const OperatorCell*>> culprit_cells;  // by rank
  for (const OperatorCell& cell : query.cells) {
    if (!cell.victim && cell.channel == cause::Channel::kCompute) {
      culprit_cells[cell.rank].push_back(&cell);
    }
  }
  using Instance = std::pair<base::StringId, uint32_t>;  // name, place among its instances
  for (const auto& [rank, cells] : culprit_cells) {
    const std::vector<OperatorRow>& rows = cells.front()->rows;  // every row of the rank
    std::vector<std::map<Instance, double>> offsets(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      const size_t s = rows[i].step;
      std::map<base::StringId, uint32_t> seen;
      for (const auto& [start, name] : KernelsInOrder(trace, node_cells, s)) {
        offsets[i][{name, seen[name]++}] =
            static_cast<double>(start - trace.steps.start_ns[s]);
      }
    }
    std::map<Instance, std::vector<double>> outside;
    for (size_t i = 0; i < rows.size(); ++i) {
      if (rows[i].group >= query.first_group && rows[i].group <= query.last_group) continue;
      for (const auto& [instance, offset] : offsets[i]) outside[instance].push_back(offset);
    }
    for (size_t i = 0; i < rows.size(); ++i) {
      const bool moved = std::any_of(cells.begin(), cells.end(),
                                     [&](const OperatorCell* cell) { return cell->rows[i].moved; });
      if (!moved) continue;
      for (const auto& [instance, offset] : offsets[i]) {
        auto usual = outside.find(instance);
        if (usual == outside.end() || usual->second.size() < 3) continue;
        std::vector<double> values = usual->second;
        const double median = base::MedianInPlace(&values);
        if (!Grew(offset - median, median)) continue;
        Record(trace, false, instance.first, model::Layer::kK, Moved::kStartedLater, rows[i].group,
               found);
      }
    }
  }
}

std::vector<CauseOperator> FindOperatorsOfPart(const model::Trace& part,
                                               const std::vector<cause::NodeCell>& node_cells,
                                               const OperatorQuery& query) {
  FoundOperators found;
  std::map<std::pair<uint32_t, int64_t>, std::vector<MovedName>> moved_names;  // by step
  for (const OperatorCell& cell : query.cells) {
    if (cell.channel == cause::Channel::kOrderBreaks) continue;
    const CellKey key{cell.rank, cell.channel, cell.family};
    const CellNames names = ReadCellNames(part, node_cells, cell);
    for (const auto& [name, times] : names.by_name) {
      const UsualTime usual = UsualTimeOf(cell, times, query.first_group, query.last_group);
      for (size_t i = 0; i < times.size(); ++i) {
        if (times[i] <= 0.0 || !cell.rows[i].moved) continue;
        const double share = MovedShare(cell, times, i, usual);
        if (share == 0.0) continue;
        moved_names[{cell.rows[i].step, cell.rows[i].group}].push_back(
            {key, name, cell.victim, share});
        Record(part, cell.victim, name, names.layer.at(name), Moved::kGrew, cell.rows[i].group,
               &found);
      }
    }
  }
  for (const auto& [step, names] : moved_names) {
    AddHoldingRanges(part, node_cells, step.first, step.second, names, &found);
  }
  for (const OperatorCell& cell : query.cells) {
    if (cell.channel == cause::Channel::kOrderBreaks) {
      AddReorderedKernels(part, node_cells, query, cell, &found);
    }
  }
  if (query.later_kernels) AddLaterKernels(part, node_cells, query, &found);
  std::vector<CauseOperator> operators;
  for (auto& [key, op] : found) operators.push_back(std::move(op));
  return operators;
}

std::vector<CauseOperator> MergeOperators(const std::vector<std::vector<CauseOperator>>& parts) {
  std::map<std::pair<bool, std::string>, CauseOperator> merged;
  for (const std::vector<CauseOperator>& part : parts) {
    for (const CauseOperator& op : part) {
      auto [it, inserted] = merged.try_emplace({op.victim, op.name}, op);
      if (inserted) continue;
      CauseOperator& into = it->second;
      into.holds_moved &= op.holds_moved;
      into.started_later &= op.started_later;
      into.groups.insert(into.groups.end(), op.groups.begin(), op.groups.end());
    }
  }
  std::vector<CauseOperator> operators;
  for (auto& [key, op] : merged) {
    std::sort(op.groups.begin(), op.groups.end());
    op.groups.erase(std::unique(op.groups.begin(), op.groups.end()), op.groups.end());
    operators.push_back(std::move(op));
  }
  std::stable_sort(operators.begin(), operators.end(),
                   [](const CauseOperator& a, const CauseOperator& b) {
                     if (a.victim != b.victim) return !a.victim;
                     if (a.holds_moved != b.holds_moved) return !a.holds_moved;
                     if (a.started_later != b.started_later) return !a.started_later;
                     return a.groups.size() > b.groups.size();
                   });
  return operators;
}

bool SameCause(const cause::Hypothesis& a, const cause::Hypothesis& b) {
  return a.kind == b.kind && a.rank == b.rank && a.node == b.node && a.family == b.family &&
         a.first_group == b.first_group && a.last_group == b.last_group &&
         a.by_stall == b.by_stall && a.by_transfer == b.by_transfer && a.evidence == b.evidence;
}

CauseOperatorFinder::CauseOperatorFinder(const model::Trace& trace,
                                         const localize::StepFeatures& features,
                                         const cause::DeviationMap& map)
    : trace_(trace), features_(features), map_(map) {}

std::vector<CauseOperator> CauseOperatorFinder::Find(const cause::Hypothesis& hypothesis) {
  if (hypothesis.evidence.empty()) return {};
  if (node_cells_.empty()) node_cells_ = cause::NodeCells(trace_, features_);
  return MergeOperators({FindOperatorsOfPart(trace_, node_cells_, QueryOfCause(map_, hypothesis))});
}

}  // namespace teller::diagnose
