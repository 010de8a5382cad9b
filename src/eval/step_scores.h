// One method's step scores turned into its figures (shared by the rows of
// eval/paper_tables.cc and eval/single_stream_row.cc).
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "eval/paper_tables.h"

namespace teller::eval {

// Fills step metrics (overall and per engine), ranking metrics and low-prior figures
// from scores; a record is flagged when its score reaches `threshold`.
base::Status ScoreSteps(const std::vector<double>& scores, const std::vector<int>& labels,
                        const std::vector<std::string>& engines, double threshold,
                        const EvalOptions& options, MethodResult* out);

}  // namespace teller::eval
