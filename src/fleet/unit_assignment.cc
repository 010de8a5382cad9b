#include "fleet/unit_assignment.h"

#include <algorithm>
#include <filesystem>
#include <map>

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

import::SeenFiles MergeSeenInputs(const std::vector<std::vector<import::SeenFiles>>& seen,
                                  std::vector<size_t>* unseen){size_t inputs = 0;
for (const auto& process : seen) inputs = std::max(inputs, process.size());
import::SeenFiles merged;
for (size_t input = 0; input < inputs; ++input) {
  // Ordered as import::SeeInput orders one process's files: a component at a time.
  std::map<std::filesystem::path, import::InputFormat> files;
  for (const auto& process : seen) {
    if (input >= process.size()) continue;
    const import::SeenFiles& here = process[input];
    for (size_t i = 0; i < here.files.size(); ++i) files.emplace(here.files[i], here.formats[i]);
  }
  if (files.empty() && unseen != nullptr) unseen->push_back(input);
  for (const auto& [path, format] : files) {
    merged.files.push_back(path.string());
    merged.formats.push_back(format);
  }
}
return merged;
}  // namespace teller::fleet

}  // namespace teller::fleet
