// The tuned values of one diagnosis by name: `teller diagnose --tune NAME=VALUE` sets
// them, the diagnosis JSON records them (`tuning`). The names, defaults and origins are
// base/tuning_list.h's; the values are fields of DiagnoseOptions and its deviation and
// causes options.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "base/tuning.h"
#include "diagnose/diagnosis.h"

namespace teller::diagnose {

// Sets one value (ParseTuningOverride has checked its name and type).
base::Status ApplyTuning(const base::TuningOverride& tuned, DiagnoseOptions* options);

// Every tuned value the options hold, by name, in the registry's order.
std::vector<std::pair<std::string, double>> TuningOf(const DiagnoseOptions& options);

}  // namespace teller::diagnose
