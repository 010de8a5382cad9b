// Which MPI process imports which unit of the inputs (fleet/fleet_open.h). Each unit
// goes to a process that can read it: the process whose contiguous block of units
// holds it when that one can (so a process takes neighbouring ranks, those on its own
// node when the files lie on local disks), else the least loaded one that can.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "import/import_inputs.h"

namespace teller::fleet {

// readable[process][unit]: the unit's files are there for that process. The owner of
// every unit, -1 where no process can read it.
std::vector<int32_t> AssignUnits(const std::vector<std::vector<bool>>& readable, size_t unit_count);

// The inputs as the whole job sees them, from seen[process][input] (import::SeeInput on
// each process: node-local disks show each process its own files): each input's files
// seen anywhere, in import order without repeats, a file's format as the first process
// that sees it told. Inputs no process sees go to `unseen` (their indexes).
import::SeenFiles MergeSeenInputs(const std::vector<std::vector<import::SeenFiles>>& seen,
                                  std::vector<size_t>* unseen);

}  // namespace teller::fleet
