// The log comparison methods' entry in the trainer plugin (learn/trainer_plugin.h): checks the
// inputs, seeds torch, fits one method (learn/log_comparison_nets.h), turns torch's
// exceptions into statuses and picks the threshold. Built into the plugin only.
#pragma once

#include "base/status.h"
#include "learn/log_comparison_data.h"

namespace teller::learn {

base::StatusOr<LogComparisonScores> FitLogComparison(LogComparisonId id,
                                                     const LogComparisonData& train,
                                                     const LogComparisonData& test,
                                                     const LogComparisonOptions& options);

}  // namespace teller::learn
