// The operators a cause names: within each cell its window moved, the instances, by name,
// that moved (RootCause::operators). What an engineer looks up in the trace, and what the
// operator-set score compares with the labels' affected operators (evaluation.h).
#pragma once

#include <vector>

#include "cause/deviation_map.h"
#include "cause/hypotheses.h"
#include "diagnose/diagnosis.h"
#include "model/trace.h"

namespace teller::diagnose {

// A cell moved when it stands this many of its noise's sigmas above its baseline.
inline constexpr double kMovedCellZ = 2.0;
// A cell the cause does not predict moved with it, in a step where its own cells moved, when
// it stands this many sigmas above its baseline (stricter: nothing ties it to the cause).
inline constexpr double kMovedWithCauseZ = 6.0;
// Inside a moved cell, a name moved when its time in the step exceeds its expected time by
// this share and this much (the labels' definition of a changed instance, docs/format.md).
inline constexpr double kMovedNameShare = 0.1;
inline constexpr double kMovedNameNs = 2000.0;

// Per cause, its operators (RootCause::operators). A name's expected time in a step is its
// usual time (the median over the rank's steps outside the cause's window where it ran)
// scaled as its cell's expected time in the step stands to the cell's usual value; names
// without 3 such steps count wherever their cell moved. Times are durations, a host
// range's with the calls in it (what an engineer reads off the timeline).
// Cells of no operator (step time, a stall, order breaks, failed calls) name none.
//
// The work splits by rank, so the processes that hold a fleet's ranks can name them
// (fleet/analysis_parts.h): a cause's query (QueryOfCause: its window and, per moved cell
// kind of a rank, that rank's map rows), cut to a part's steps (QueryOfSteps), is answered
// on the part alone (FindOperatorsOfPart), and the parts' answers merge (MergeOperators).

// One map row of a rank: its step (in the trace or part that answers), global step, the
// cell's value and expected value (NaN without one), and whether the cause moved it there.
struct OperatorRow {
  uint32_t step = 0;
  int64_t group = -1;
  double value = 0.0;
  double expected = 0.0;
  bool moved = false;
  bool operator==(const OperatorRow&) const = default;
};
// A rank's cell kind the cause moved, a victim's unless it predicts it of a culprit rank;
// its rows are every map row of the rank, in order. Order breaks: the rows of a reorder.
struct OperatorCell {
  int32_t rank = -1;
  cause::Channel channel = cause::Channel::kCompute;
  localize::OperatorFamily family = localize::OperatorFamily::kUnnamed;
  bool victim = false;
  std::vector<OperatorRow> rows;
  bool operator==(const OperatorCell&) const = default;
};
struct OperatorQuery {
  int64_t first_group = -1;
  int64_t last_group = -1;
  // A GPU slower at every kernel: each kernel after the first slow one starts later by what
  // the slower ones before it added, which grows through the step as the step's time does;
  // the kernels that started later on its culprit rank are named too (a family's slowdown
  // adds a constant, which the steps' own spread of starts hides).
  bool later_kernels = false;
  std::vector<OperatorCell> cells;  // by (rank, channel, family)
  bool operator==(const OperatorQuery&) const = default;
};

// The cause's query over the whole map: rows' steps are the map's trace's.
OperatorQuery QueryOfCause(const cause::DeviationMap& map, const cause::Hypothesis& hypothesis);
// Its rows within steps [begin, end) of the map's trace, renumbered from begin (a part's
// steps once appended at begin); cells without such rows are left out.
OperatorQuery QueryOfSteps(const OperatorQuery& query, uint32_t begin, uint32_t end);
// The operators the query names in one part (or a whole trace): each with the groups it
// moved in; node_cells are cause::NodeCells of the part.
std::vector<CauseOperator> FindOperatorsOfPart(const model::Trace& part,
                                               const std::vector<cause::NodeCell>& node_cells,
                                               const OperatorQuery& query);
// The parts' operators as one cause's (RootCause::operators): per (role, name) its groups
// united, a holding range (or one that only started later) only where it was so in every
// part; culprits first, the ranges after the rest, then those that only started later, those
// that moved in more steps first, then by name.
std::vector<CauseOperator> MergeOperators(const std::vector<std::vector<CauseOperator>>& parts);

// Whether a hypothesis is the cause of OperatorsOfCause: its kind, place, window and
// evidence.
bool SameCause(const cause::Hypothesis& a, const cause::Hypothesis& b);

class CauseOperatorFinder {
 public:
  CauseOperatorFinder(const model::Trace& trace, const localize::StepFeatures& features,
                      const cause::DeviationMap& map);
  // The trace's node cells are read at the first cause with evidence (none for a healthy run).
  std::vector<CauseOperator> Find(const cause::Hypothesis& hypothesis);

 private:
  const model::Trace& trace_;
  const localize::StepFeatures& features_;
  const cause::DeviationMap& map_;
  std::vector<cause::NodeCell> node_cells_;  // cause::NodeCells, once read
};

}  // namespace teller::diagnose
