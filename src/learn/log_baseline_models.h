// The log baselines' entry in the trainer plugin (learn/trainer_plugin.h): checks the
// inputs, seeds torch, fits one baseline (learn/log_baseline_nets.h), turns torch's
// exceptions into statuses and picks the threshold. Built into the plugin only.
#pragma once

#include "base/status.h"
#include "learn/log_baseline_data.h"

namespace teller::learn {

base::StatusOr<LogBaselineScores> FitLogBaseline(LogBaselineId id, const LogBaselineData& train,
                                                 const LogBaselineData& test,
                                                 const LogBaselineOptions& options);

}  // namespace teller::learn
