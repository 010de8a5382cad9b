// Transparent rules from evidence to a fault category: what an operator family points
// at. Log lines are read by the signature catalog (diagnose/log_reading.h); what to check
// next is diagnose/wording.h's.
#pragma once

#include <string_view>

#include "diagnose/diagnosis.h"
#include "localize/operator_family.h"

namespace teller::diagnose {

// The category an abnormal family points at on its own.
FaultCategory CategoryOfFamily(localize::OperatorFamily family);

}  // namespace teller::diagnose
