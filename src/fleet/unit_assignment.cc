#include "fleet/unit_assignment.h"

#include <algorithm>

namespace teller::fleet {

std::vector<int32_t> AssignUnits(const std::vector<std::vector<bool>>& readable,
                                 size_t unit_count) {
  const size_t processes = readable.size();
  std::vector<int32_t> owner(unit_count, -1);
  std::vector<size_t> load(processes, 0);
  auto can_read = [&](size_t process, size_t unit) {
    return unit < readable[process].size() && readable[process][unit];
  };
  for (size_t unit = 0; unit < unit_count && processes > 0; ++unit) {
    const size_t block = unit * processes / unit_count;
    size_t chosen = processes;
    if (can_read(block, unit)) {
      chosen = block;
    } else {
      for (size_t process = 0; process < processes; ++process) {
        if (can_read(process, unit) && (chosen == processes || load[process] < load[chosen])) {
          chosen = process;
        }
      }
    }
    if (chosen == processes) continue;
    owner[unit] = static_cast<int32_t>(chosen);
    ++load[chosen];
  }
  return owner;
}

}  // namespace teller::fleet
