// Transparent rules from evidence to a fault category: what an operator family points
// at, and what to check next. Log lines are read by the signature catalog
// (diagnose/log_reading.h).
#pragma once

#include <string_view>

#include "diagnose/diagnosis.h"
#include "localize/operator_family.h"

namespace teller::diagnose {

// The category an abnormal family points at on its own.
FaultCategory CategoryOfFamily(localize::OperatorFamily family);

// What to check next after a hang (cause/hang_report.h).
std::string_view NextActionOfHang(const cause::HangReport& hang);

// What to check next after a crash (cause/crash_report.h).
std::string_view NextActionOfCrash(const cause::CrashReport& crash);

// What to check next, per category.
std::string_view NextAction(FaultCategory category);

}  // namespace teller::diagnose
