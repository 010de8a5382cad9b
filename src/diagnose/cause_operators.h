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
