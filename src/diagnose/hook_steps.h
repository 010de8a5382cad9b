// Whether the engine steps of a recorded run came from the Python hooks' STEP functions.
#pragma once

#include <string>

#include "model/trace.h"

namespace teller::diagnose {

// A bundle recorded with the Python hooks on (meta.json capture layer `python_hooks`)
// whose trace holds no STEP range: the hooks never reached the engine's step, so the
// steps came from elsewhere (engine annotations, execute_model frames, top-level ranges)
// or there are none. Returns the sentence `teller show` and the diagnosis notes carry,
// or "" when the hooks were off, the trace is no bundle, or a STEP range is there.
std::string HooksWithoutStepsNote(const model::Trace& trace);

}  // namespace teller::diagnose
