// Transparent rules from evidence to a fault category: what an operator family
// points at, and which log lines name a cause. The learned model (issue 6)
// replaces them; they stay as its fallback.
#pragma once

#include <string_view>

#include "diagnose/diagnosis.h"
#include "localize/operator_family.h"

namespace teller::diagnose {

// The category an abnormal family points at on its own.
FaultCategory CategoryOfFamily(localize::OperatorFamily family);

struct LogRule {
  std::string_view pattern;  // case-insensitive substring
  FaultCategory category;
  double weight;  // vote weight of one matching line (a rule votes once)
};

// The first rule whose pattern the line contains, or nullptr.
const LogRule* MatchLogRule(std::string_view text);

// What to check next, per category.
std::string_view NextAction(FaultCategory category);

}  // namespace teller::diagnose
