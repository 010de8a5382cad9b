// Which MPI process imports which unit of the inputs (fleet/fleet_open.h). Each unit
// goes to a process that can read it: the process whose contiguous block of units
// holds it when that one can (so a process takes neighbouring ranks, those on its own
// node when the files lie on local disks), else the least loaded one that can.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace teller::fleet {

// readable[process][unit]: the unit's files are there for that process. The owner of
// every unit, -1 where no process can read it.
std::vector<int32_t> AssignUnits(const std::vector<std::vector<bool>>& readable, size_t unit_count);

}  // namespace teller::fleet
