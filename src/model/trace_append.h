// Appending one imported trace to another, as if its file had been imported into it
// next: strings interned anew, row references shifted by the rows already there. What
// lets several trace files be imported on several threads and joined in file order
// (import/import_inputs.h).
#pragma once

#include "base/status.h"
#include "model/trace.h"

namespace teller::model {

// src must not be reconstructed yet (no nodes, steps, requests or matches): those
// are built over the joined trace. Sources, notes and counters are appended too.
base::Status AppendTrace(const Trace& src, Trace* dst);

}  // namespace teller::model
