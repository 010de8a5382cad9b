// Structural checks of a model::Trace: equal column lengths, enums in range, every
// reference (string id, row index) either invalid or inside its table. SaveTrace runs
// it before writing and LoadTrace after reading, so a store always reloads and a
// loaded trace never indexes out of bounds.
#pragma once

#include "base/status.h"
#include "model/trace.h"

namespace teller::store {

// Returns InvalidArgument naming the table, column and row of the first problem.
base::Status CheckTrace(const model::Trace& trace);

}  // namespace teller::store
