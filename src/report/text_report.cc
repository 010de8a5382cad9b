#include "report/text_report.h"

#include <algorithm>
#include <array>
#include <map>
#include <span>
#include <sstream>

#include <fmt/format.h>

#include "base/text_format.h"
#include "diagnose/hook_steps.h"
#include "reconstruct/request_projection.h"

namespace teller::report {
namespace {

using model::EventRow;
using model::Layer;
using model::NodeIndex;
using model::StepIndex;
using model::Trace;

std::string Cell(const Trace& trace, NodeIndex node, TreeColumn column, int64_t origin_ns) {
  EventRow row = trace.nodes.event[node.value()];
  uint32_t r = row.value();
  switch (column) {
    case TreeColumn::kLayer:
      return std::string(model::LayerName(trace.events.layer[r]));
    case TreeColumn::kName:
      return Printable(trace.str(trace.events.name[r]), 200);
    case TreeColumn::kStartNs:
      return std::to_string(trace.events.start_ns[r] - origin_ns);
    case TreeColumn::kDurNs:
      return std::to_string(trace.events.dur_ns[r]);
    case TreeColumn::kDepth:
      return std::to_string(trace.nodes.depth[node.value()]);
    case TreeColumn::kRank:
      return std::to_string(trace.processes.rank[trace.events.process[r].value()]);
    case TreeColumn::kCorrelation: {
      auto cid = trace.events.correlation[r];
      return cid.valid() ? std::to_string(cid.value()) : "-";
    }
  }
  return "";
}

constexpr std::array<std::pair<std::string_view, TreeColumn>, 7> kColumnNames = {{
    {"layer", TreeColumn::kLayer},
    {"name", TreeColumn::kName},
    {"start_ns", TreeColumn::kStartNs},
    {"dur_ns", TreeColumn::kDurNs},
    {"depth", TreeColumn::kDepth},
    {"rank", TreeColumn::kRank},
    {"correlation", TreeColumn::kCorrelation},
}};

std::string_view ColumnName(TreeColumn column) {
  for (const auto& [name, value] : kColumnNames) {
    if (value == column) return name;
  }
  return "?";
}

// Request ids of a step; ids longer than max_id_chars are cut (with "..").
std::string StepRequests(const Trace& trace, StepIndex step, size_t max_ids,
                         size_t max_id_chars = 200) {
  uint32_t begin = trace.steps.requests_begin[step.value()];
  uint32_t count = trace.steps.requests_count[step.value()];
  std::string out;
  for (uint32_t i = 0; i < count && i < max_ids; ++i) {
    if (!out.empty()) out += ",";
    std::string_view id = trace.str(trace.requests.id[trace.step_requests[begin + i].value()]);
    out +=
        id.size() > max_id_chars ? std::string(id.substr(0, max_id_chars)) + ".." : std::string(id);
  }
  if (count > max_ids) out += fmt::format(",... ({} in all)", count);
  return out.empty() ? "-" : out;
}

}  // namespace

std::string Printable(std::string_view text, size_t max_chars) {
  std::string out;
  out.reserve(std::min(text.size(), max_chars));
  for (char c : text) {
    if (out.size() >= max_chars) {
      out += "...";
      break;
    }
    unsigned char u = static_cast<unsigned char>(c);
    out += (u < 0x20 || u == 0x7f) ? ' ' : c;
  }
  return out;
}

base::StatusOr<std::vector<TreeColumn>> ParseTreeColumns(const std::string& list) {
  std::vector<TreeColumn> columns;
  std::stringstream stream(list);
  std::string name;
  while (std::getline(stream, name, ',')) {
    bool found = false;
    for (const auto& [known, value] : kColumnNames) {
      if (known == name) {
        columns.push_back(value);
        found = true;
      }
    }
    if (!found) {
      return base::InvalidArgument(
          "unknown column '{}' (expected layer, name, start_ns, dur_ns, depth, rank, correlation)",
          name);
    }
  }
  return columns;
}

namespace {

// The tree of a step, or of part of it: nodes in pre-order, all of that step.
std::string RenderNodes(const Trace& trace, StepIndex step, std::span<const NodeIndex> nodes,
                        const TreeOptions& options) {
  std::string out;
  uint32_t s = step.value();
  int64_t origin = options.relative_times ? trace.steps.start_ns[s] : 0;
  size_t shown = 0, hidden = 0;
  if (!options.columns.empty()) {
    for (size_t i = 0; i < options.columns.size(); ++i) {
      out += (i ? "\t" : "") + std::string(ColumnName(options.columns[i]));
    }
    out += "\n";
  } else {
    out += fmt::format("step {} on rank {} ({}, {}) requests: {}\n", trace.steps.number[s],
                       trace.steps.rank[s], model::StepPhaseName(trace.steps.phase[s]),
                       base::FormatDuration(trace.steps.end_ns[s] - trace.steps.start_ns[s]),
                       StepRequests(trace, step, 8));
  }
  for (NodeIndex node : nodes) {
    uint32_t n = node.value();
    int depth = trace.nodes.depth[n];
    if (depth > options.max_depth || (options.max_nodes && shown >= options.max_nodes)) {
      ++hidden;
      continue;
    }
    ++shown;
    if (!options.columns.empty()) {
      for (size_t i = 0; i < options.columns.size(); ++i) {
        out += (i ? "\t" : "") + Cell(trace, node, options.columns[i], origin);
      }
      out += "\n";
      continue;
    }
    uint32_t r = trace.nodes.event[n].value();
    out += fmt::format(
        "{:{}}{:<4} {}  [{}]\n", "", 2 * depth, model::LayerName(trace.events.layer[r]),
        Printable(trace.str(trace.events.name[r]), 100), base::FormatDuration(trace.events.dur_ns[r]));
  }
  if (hidden) out += fmt::format("... {} more nodes (raise --max-nodes or --max-depth)\n", hidden);
  return out;
}

}  // namespace

std::string RenderStepTree(const Trace& trace, StepIndex step, const TreeOptions& options) {
  uint32_t begin = trace.steps.node_begin[step.value()].value();
  uint32_t end = trace.steps.node_end[step.value()].value();
  std::vector<NodeIndex> nodes;
  nodes.reserve(end - begin);
  for (uint32_t n = begin; n < end; ++n) nodes.push_back(NodeIndex(n));
  return RenderNodes(trace, step, nodes, options);
}

base::StatusOr<std::string> RenderRequestTrees(const Trace& trace, const std::string& request_id,
                                               const TreeOptions& options) {
  model::RequestIndex request = reconstruct::FindRequest(trace, request_id);
  if (!request.valid()) {
    return base::NotFound(
        "request '{}' is not in this trace ({} requests; `teller show` lists them)", request_id,
        trace.requests.size());
  }
  std::string out;
  for (StepIndex step : reconstruct::StepsOfRequest(trace, request)) {
    out += RenderNodes(trace, step, reconstruct::ProjectRequest(trace, request, step), options);
  }
  return out;
}

base::StatusOr<StepIndex> FindStep(const Trace& trace, int64_t number, int32_t rank) {
  int64_t best = -1;
  for (size_t s = 0; s < trace.steps.size(); ++s) {
    if (trace.steps.number[s] != number) continue;
    if (rank >= 0 && trace.steps.rank[s] != rank) continue;
    if (best < 0 || trace.steps.rank[s] < trace.steps.rank[best]) best = static_cast<int64_t>(s);
  }
  if (best < 0) {
    return base::NotFound("no step {}{} in this trace ({} steps)", number,
                          rank >= 0 ? fmt::format(" on rank {}", rank) : "", trace.steps.size());
  }
  return StepIndex(static_cast<uint32_t>(best));
}

std::string RenderSummary(const Trace& trace, size_t max_steps) {
  std::string out;
  std::map<int32_t, int> ranks;
  for (size_t p = 0; p < trace.processes.size(); ++p) ranks[trace.processes.rank[p]]++;
  out += fmt::format("format {}  processes {}  ranks {}  events {}  log lines {}\n",
                     model::TraceFormatName(trace.meta.format), trace.processes.size(),
                     ranks.size(), trace.events.size(), trace.logs.size());
  std::map<model::StepSource, size_t> sources;
  for (auto source : trace.steps.source) sources[source]++;
  out += fmt::format("steps {}  requests {}", trace.steps.size(), trace.requests.size());
  for (const auto& [source, count] : sources) {
    out += fmt::format("  [{} from {}]", count, model::StepSourceName(source));
  }
  out += "\n";
  for (const std::string& note : trace.meta.notes) out += "note: " + note + "\n";
  if (std::string hooks = diagnose::HooksWithoutStepsNote(trace); !hooks.empty()) {
    out += "note: " + hooks + "\n";
  }
  if (trace.steps.size() == 0) return out;
  out += "\nrank  step  phase    duration     nodes  requests (first ids)\n";
  for (size_t s = 0; s < trace.steps.size() && s < max_steps; ++s) {
    out += fmt::format("{:>4}  {:>4}  {:<7}  {:>10}  {:>6}  {}\n", trace.steps.rank[s],
                       trace.steps.number[s], model::StepPhaseName(trace.steps.phase[s]),
                       base::FormatDuration(trace.steps.end_ns[s] - trace.steps.start_ns[s]),
                       trace.steps.node_end[s].value() - trace.steps.node_begin[s].value(),
                       StepRequests(trace, StepIndex(static_cast<uint32_t>(s)), 2, 16));
  }
  if (trace.steps.size() > max_steps) {
    out += fmt::format("... {} more steps\n", trace.steps.size() - max_steps);
  }
  return out;
}

std::string RenderStats(const Trace& trace, bool describe) {
  std::string out;
  std::array<int64_t, model::kLayerCount> per_layer{};
  for (size_t i = 0; i < trace.events.size(); ++i) {
    // A begin/end pair is one range: count the begin only.
    if (trace.events.phase[i] != model::EventPhase::kEnd) {
      per_layer[static_cast<int>(trace.events.layer[i])]++;
    }
  }
  out += "events per layer (a range counts once)\n";
  for (int i = 0; i < model::kLayerCount; ++i) {
    if (per_layer[i]) {
      out += fmt::format("  {:<6}{:>12}\n", model::LayerName(static_cast<Layer>(i)), per_layer[i]);
    }
  }
  size_t aligned = 0;
  for (auto alignment : trace.logs.alignment) aligned += alignment != model::LogAlignment::kNone;
  out += fmt::format("processes {}  threads and streams {}  strings {}\n", trace.processes.size(),
                     trace.threads.size(), trace.strings.size());
  out += fmt::format("steps {}  requests {}  call-chain nodes {}\n", trace.steps.size(),
                     trace.requests.size(), trace.nodes.size());
  out += fmt::format("log lines {}  aligned {}  not aligned {}  templates {}\n", trace.logs.size(),
                     aligned, trace.logs.size() - aligned, trace.templates.size());
  out += "counters\n";
  for (const auto& [name, entry] : trace.stats.entries()) {
    out += fmt::format("  {:<48}{:>12}  {}\n", name, entry.value,
                       model::StatSeverityName(entry.severity));
    if (!describe) continue;
    const model::StatDef* declared = model::FindDeclaredStat(name);
    out += fmt::format("      {}\n", declared != nullptr ? declared->description
                                                         : "(not declared in model/stat_list.h)");
  }
  return out;
}

}  // namespace teller::report
