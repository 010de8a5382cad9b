#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "fleet/fleet_open.h"

namespace teller::fleet {

std::vector<std::string> MissingNotes(const std::vector<MissingUnit>& missing) {
  std::vector<std::string> notes;
  for (const MissingUnit& unit : missing) {
    const std::string who = unit.rank >= 0 ? fmt::format("rank {}", unit.rank) : "a process";
    notes.push_back(
        fmt::format("{} ({}) was left out: {}. Its steps, kernels and collectives are not in this "
                    "diagnosis; a fault on it shows only as its peers waiting for it",
                    who, unit.path, unit.reason));
  }
  return notes;
}

std::string FiguresJson(const std::vector<ProcessFigures>& figures) {
  nlohmann::json processes = nlohmann::json::array();
  uint64_t exchanged = 0;
  for (const ProcessFigures& f : figures) {
    processes.push_back({{"process", f.process},
                         {"units", f.units},
                         {"import_s", f.import_seconds},
                         {"unit_wait_s", f.unit_wait_seconds},
                         {"cpu_s", f.cpu_seconds},
                         {"max_rss_bytes", f.max_rss_bytes},
                         {"bytes_sent", f.bytes_sent},
                         {"bytes_received", f.bytes_received}});
    exchanged += f.bytes_sent;
  }
  return "teller: fleet " +
         nlohmann::json{{"processes", processes}, {"bytes_exchanged", exchanged}}.dump();
}

}  // namespace teller::fleet
