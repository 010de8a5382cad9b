#include <fmt/format.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "fleet/fleet_open.h"

namespace teller::fleet {

namespace {

// "8-11, 14": the ranks in order, runs of consecutive ones as ranges.
std::string RankRanges(std::vector<int32_t> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string text;
  for (size_t i = 0; i < ranks.size();) {
    size_t end = i + 1;
    while (end < ranks.size() && ranks[end] == ranks[end - 1] + 1) ++end;
    if (!text.empty()) text += ", ";
    text += end - i > 1 ? fmt::format("{}-{}", ranks[i], ranks[end - 1]) : fmt::to_string(ranks[i]);
    i = end;
  }
  return text;
}

// What the lost process's units were: "ranks 8-11 (4 units: run/proc-8 ...)".
std::string LostUnitsText(const std::vector<MissingUnit>& units) {
  std::vector<int32_t> ranks;
  for (const MissingUnit& unit : units) {
    if (unit.rank >= 0) ranks.push_back(unit.rank);
  }
  const std::string who = ranks.empty()      ? std::string("its units")
                          : ranks.size() > 1 ? "ranks " + RankRanges(ranks)
                                             : "rank " + RankRanges(ranks);
  const std::string more = units.size() > 1 ? fmt::format(" and {} more", units.size() - 1) : "";
  return fmt::format("{} ({} unit{}: {}{})", who, units.size(), units.size() > 1 ? "s" : "",
                     units.front().path, more);
}

std::string LostNote(const LostProcess& lost) {
  if (lost.units.empty()) {
    return fmt::format("process {} {} after sending its units; the diagnosis has all of them",
                       lost.process, lost.why);
  }
  return fmt::format(
      "process {} {}: {} are unknown to this diagnosis. Their steps, kernels and collectives "
      "are not in it; a fault on them shows only as their peers waiting for them",
      lost.process, lost.why, LostUnitsText(lost.units));
}

}  // namespace

std::vector<std::string> MissingNotes(const std::vector<MissingUnit>& missing,
                                      const std::vector<LostProcess>& lost) {
  std::vector<std::string> notes;
  for (const MissingUnit& unit : missing) {
    const std::string who = unit.rank >= 0 ? fmt::format("rank {}", unit.rank) : "a process";
    notes.push_back(
        fmt::format("{} ({}) was left out: {}. Its steps, kernels and collectives are not in this "
                    "diagnosis; a fault on it shows only as its peers waiting for it",
                    who, unit.path, unit.reason));
  }
  for (const LostProcess& process : lost) notes.push_back(LostNote(process));
  return notes;
}

std::vector<std::pair<std::string, std::string>> PartsSources(const FleetTrace& fleet) {
  auto source = [](bool from_parts, const std::string& why) {
    return from_parts ? std::string("parts") : "the joined trace: " + why;
  };
  return {{"deviation_map", source(fleet.deviation_map.has_value(), fleet.deviation_map_note)},
          {"findings", source(fleet.feature_rows.has_value(), fleet.feature_rows_note)},
          {"requests", source(fleet.request_rows.has_value(), fleet.request_rows_note)},
          {"logs", source(fleet.logs_note.empty(), fleet.logs_note)},
          {"counters", source(fleet.run_counters_note.empty(), fleet.run_counters_note)},
          {"crash", source(fleet.crash.has_value(), fleet.crash_note)},
          {"oom", source(fleet.oom.has_value(), fleet.oom_note)},
          {"request_causes", source(fleet.request_causes.has_value(), fleet.request_causes_note)},
          {"hang", source(fleet.hang.has_value(), fleet.hang_note)},
          {"replay", source(fleet.replay_graph.has_value(), fleet.replay_graph_note)},
          {"cause_operators",
           source(fleet.cause_operators.has_value(),
                  !fleet.deviation_map_note.empty() ? fleet.deviation_map_note
                  : !fleet.replay_graph_note.empty()
                      ? fleet.replay_graph_note
                      : "the causes were fitted with other options than the diagnosis's")}};
}

std::string FiguresJson(const std::vector<ProcessFigures>& figures,
                        const std::vector<std::pair<std::string, std::string>>& sources) {
  nlohmann::json processes = nlohmann::json::array();
  uint64_t exchanged = 0, summaries = 0;
  int64_t steps = 0;
  for (const ProcessFigures& f : figures) {
    processes.push_back({{"process", f.process},
                         {"units", f.units},
                         {"import_s", f.import_seconds},
                         {"unit_wait_s", f.unit_wait_seconds},
                         {"cpu_s", f.cpu_seconds},
                         {"max_rss_bytes", f.max_rss_bytes},
                         {"bytes_sent", f.bytes_sent},
                         {"bytes_received", f.bytes_received},
                         {"analysis_s", f.analysis_seconds},
                         {"analysis_steps", f.analysis_steps},
                         {"summary_bytes_sent", f.summary_bytes_sent},
                         {"summary_bytes_received", f.summary_bytes_received}});
    exchanged += f.bytes_sent;
    summaries += f.summary_bytes_sent;
    steps += f.analysis_steps;
  }
  nlohmann::json all = {{"processes", processes},
                        {"bytes_exchanged", exchanged},
                        {"summary_bytes_exchanged", summaries},
                        {"analysis_steps", steps}};
  for (const auto& [what, source] : sources) all[what] = source;
  return "teller: fleet " + all.dump();
}

}  // namespace teller::fleet
