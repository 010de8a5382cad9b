// Plain-text views of a reconstructed trace: the summary, one call-chain tree, the
// counters. Pure functions of the model; the CLI prints what they return.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "model/trace.h"

namespace teller::report {

enum class TreeColumn { kLayer, kName, kStartNs, kDurNs, kDepth, kRank, kCorrelation };
base::StatusOr<std::vector<TreeColumn>> ParseTreeColumns(const std::string& list);

struct TreeOptions {
  // With columns: a tab-separated table with a header (stable, for golden tests).
  // Without: an indented tree for people.
  std::vector<TreeColumn> columns;
  int max_depth = 64;
  size_t max_nodes = 400;  // 0 = all
  // Start times relative to the step start, so output does not depend on the clock.
  bool relative_times = true;
};

std::string RenderSummary(const model::Trace& trace, size_t max_steps);
std::string RenderStepTree(const model::Trace& trace, model::StepIndex step,
                           const TreeOptions& options);
// Every step that served the request, each with its tree (the projection C_q(s)).
base::StatusOr<std::string> RenderRequestTrees(const model::Trace& trace,
                                               const std::string& request_id,
                                               const TreeOptions& options);
// Finds the step with this number (on the given rank, or the lowest rank).
base::StatusOr<model::StepIndex> FindStep(const model::Trace& trace, int64_t number, int32_t rank);
// describe: each counter's description (model/stat_list.h) on the line below it.
std::string RenderStats(const model::Trace& trace, bool describe = false);
// Names can hold tabs, newlines or terminal escapes: control characters become
// spaces and text past max_chars becomes "...".
std::string Printable(std::string_view text, size_t max_chars);

}  // namespace teller::report
