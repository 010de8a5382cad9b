#include "store/trace_check.h"

#include <initializer_list>
#include <string_view>
#include <utility>

#include "store/store_schema.h"

namespace teller::store {
namespace {

using model::Trace;

base::Status CheckSizes(std::string_view table,
                        std::initializer_list<std::pair<std::string_view, size_t>> columns) {
  size_t rows = columns.begin()->second;
  for (const auto& [column, size] : columns) {
    if (size != rows) {
      return base::InvalidArgument("table {}: column {} has {} rows, column {} has {}", table,
                                   column, size, columns.begin()->first, rows);
    }
  }
  return base::OkStatus();
}

// Ids must be invalid or below limit.
template <typename Id>
base::Status CheckRefs(std::string_view table, std::string_view column, const std::vector<Id>& ids,
                       uint64_t limit, std::string_view target) {
  for (size_t row = 0; row < ids.size(); ++row) {
    if (ids[row].valid() && static_cast<uint64_t>(ids[row].value()) >= limit) {
      return base::InvalidArgument("table {} row {} column {}: {} is not a row of {} ({} rows)",
                                   table, row, column, ids[row].value(), target, limit);
    }
  }
  return base::OkStatus();
}

template <typename E>
base::Status CheckEnum(std::string_view table, std::string_view column,
                       const std::vector<E>& values, std::span<const std::string_view> names) {
  for (size_t row = 0; row < values.size(); ++row) {
    if (static_cast<size_t>(values[row]) >= names.size()) {
      return base::InvalidArgument("table {} row {} column {}: enum value {} out of range", table,
                                   row, column, static_cast<int>(values[row]));
    }
  }
  return base::OkStatus();
}

// Rows [begin, begin + count) must lie inside a table of limit rows when count > 0.
template <typename Count>
base::Status CheckRanges(std::string_view table, std::string_view column,
                         const std::vector<uint32_t>& begin, const std::vector<Count>& count,
                         uint64_t limit, std::string_view target) {
  for (size_t row = 0; row < begin.size(); ++row) {
    if (count[row] > 0 && uint64_t{begin[row]} + count[row] > limit) {
      return base::InvalidArgument("table {} row {} column {}: rows [{}, {}) exceed {} ({} rows)",
                                   table, row, column, begin[row],
                                   uint64_t{begin[row]} + count[row], target, limit);
    }
  }
  return base::OkStatus();
}

}  // namespace

base::Status CheckTrace(const Trace& t) {
  const uint64_t strings = t.strings.size();
  const auto& p = t.processes;
  TELLER_RETURN_IF_ERROR(
      CheckSizes("processes", {{"os_pid", p.os_pid.size()},
                               {"host", p.host.size()},
                               {"name", p.name.size()},
                               {"rank", p.rank.size()},
                               {"node", p.node.size()},
                               {"source", p.source.size()},
                               {"clock_offset_ns", p.clock_offset_ns.size()},
                               {"clock_uncertainty_ns", p.clock_uncertainty_ns.size()}}));
  TELLER_RETURN_IF_ERROR(CheckRefs("processes", "host", p.host, strings, "strings"));
  TELLER_RETURN_IF_ERROR(CheckRefs("processes", "name", p.name, strings, "strings"));
  TELLER_RETURN_IF_ERROR(CheckRefs("processes", "source", p.source, strings, "strings"));

  const auto& th = t.threads;
  TELLER_RETURN_IF_ERROR(CheckSizes("threads", {{"process", th.process.size()},
                                                {"os_tid", th.os_tid.size()},
                                                {"name", th.name.size()},
                                                {"is_device", th.is_device.size()},
                                                {"device", th.device.size()}}));
  TELLER_RETURN_IF_ERROR(CheckRefs("threads", "process", th.process, p.size(), "processes"));
  TELLER_RETURN_IF_ERROR(CheckRefs("threads", "name", th.name, strings, "strings"));

  const auto& e = t.events;
  TELLER_RETURN_IF_ERROR(CheckSizes("events", {{"layer", e.layer.size()},
                                               {"phase", e.phase.size()},
                                               {"flags", e.flags.size()},
                                               {"name", e.name.size()},
                                               {"process", e.process.size()},
                                               {"thread", e.thread.size()},
                                               {"start_ns", e.start_ns.size()},
                                               {"dur_ns", e.dur_ns.size()},
                                               {"id", e.id.size()},
                                               {"correlation", e.correlation.size()},
                                               {"args_begin", e.args_begin.size()},
                                               {"args_count", e.args_count.size()}}));
  TELLER_RETURN_IF_ERROR(CheckEnum("events", "layer", e.layer, LayerNames()));
  TELLER_RETURN_IF_ERROR(CheckEnum("events", "phase", e.phase, EventPhaseNames()));
  TELLER_RETURN_IF_ERROR(CheckRefs("events", "name", e.name, strings, "strings"));
  TELLER_RETURN_IF_ERROR(CheckRefs("events", "process", e.process, p.size(), "processes"));
  TELLER_RETURN_IF_ERROR(CheckRefs("events", "thread", e.thread, th.size(), "threads"));

  const auto& a = t.args;
  TELLER_RETURN_IF_ERROR(CheckSizes("args", {{"key", a.key.size()},
                                             {"type", a.type.size()},
                                             {"int_value", a.int_value.size()},
                                             {"string_value", a.string_value.size()}}));
  TELLER_RETURN_IF_ERROR(
      CheckRanges("events", "args_begin", e.args_begin, e.args_count, a.size(), "args"));
  TELLER_RETURN_IF_ERROR(CheckEnum("args", "type", a.type, ArgTypeNames()));
  TELLER_RETURN_IF_ERROR(CheckRefs("args", "key", a.key, strings, "strings"));
  TELLER_RETURN_IF_ERROR(CheckRefs("args", "string_value", a.string_value, strings, "strings"));

  const auto& c = t.collectives;
  TELLER_RETURN_IF_ERROR(CheckSizes("collectives", {{"event", c.event.size()},
                                                    {"communicator", c.communicator.size()},
                                                    {"sequence", c.sequence.size()},
                                                    {"op", c.op.size()},
                                                    {"size_bytes", c.size_bytes.size()},
                                                    {"dtype", c.dtype.size()},
                                                    {"group_size", c.group_size.size()},
                                                    {"group_rank", c.group_rank.size()}}));
  TELLER_RETURN_IF_ERROR(CheckRefs("collectives", "event", c.event, e.size(), "events"));
  TELLER_RETURN_IF_ERROR(
      CheckRefs("collectives", "communicator", c.communicator, strings, "strings"));
  TELLER_RETURN_IF_ERROR(CheckRefs("collectives", "op", c.op, strings, "strings"));
  TELLER_RETURN_IF_ERROR(CheckRefs("collectives", "dtype", c.dtype, strings, "strings"));

  const auto& tp = t.templates;
  TELLER_RETURN_IF_ERROR(
      CheckSizes("templates", {{"pattern", tp.pattern.size()}, {"count", tp.count.size()}}));
  TELLER_RETURN_IF_ERROR(CheckRefs("templates", "pattern", tp.pattern, strings, "strings"));

  const auto& st = t.steps;
  const auto& l = t.logs;
  TELLER_RETURN_IF_ERROR(CheckSizes("logs", {{"ts_ns", l.ts_ns.size()},
                                             {"process", l.process.size()},
                                             {"os_pid", l.os_pid.size()},
                                             {"rank", l.rank.size()},
                                             {"level", l.level.size()},
                                             {"stream", l.stream.size()},
                                             {"request", l.request.size()},
                                             {"template", l.template_id.size()},
                                             {"text", l.text.size()},
                                             {"source", l.source.size()},
                                             {"line_number", l.line_number.size()},
                                             {"step", l.step.size()},
                                             {"alignment", l.alignment.size()}}));
  TELLER_RETURN_IF_ERROR(CheckRefs("logs", "process", l.process, p.size(), "processes"));
  TELLER_RETURN_IF_ERROR(CheckEnum("logs", "level", l.level, LogLevelNames()));
  TELLER_RETURN_IF_ERROR(CheckEnum("logs", "stream", l.stream, LogStreamNames()));
  TELLER_RETURN_IF_ERROR(CheckRefs("logs", "request", l.request, strings, "strings"));
  TELLER_RETURN_IF_ERROR(CheckRefs("logs", "template", l.template_id, tp.size(), "templates"));
  TELLER_RETURN_IF_ERROR(CheckRefs("logs", "text", l.text, strings, "strings"));
  TELLER_RETURN_IF_ERROR(CheckRefs("logs", "source", l.source, strings, "strings"));
  TELLER_RETURN_IF_ERROR(CheckRefs("logs", "step", l.step, st.size(), "steps"));
  TELLER_RETURN_IF_ERROR(CheckEnum("logs", "alignment", l.alignment, LogAlignmentNames()));

  for (const auto& [name, entry] : t.stats.entries()) {
    if (static_cast<size_t>(entry.severity) >= StatSeverityNames().size()) {
      return base::InvalidArgument("table stats row {}: severity {} out of range", name,
                                   static_cast<int>(entry.severity));
    }
  }

  const auto& n = t.nodes;
  TELLER_RETURN_IF_ERROR(CheckSizes("nodes", {{"event", n.event.size()},
                                              {"parent", n.parent.size()},
                                              {"depth", n.depth.size()},
                                              {"step", n.step.size()}}));
  TELLER_RETURN_IF_ERROR(CheckRefs("nodes", "event", n.event, e.size(), "events"));
  TELLER_RETURN_IF_ERROR(CheckRefs("nodes", "parent", n.parent, n.size(), "nodes"));
  TELLER_RETURN_IF_ERROR(CheckRefs("nodes", "step", n.step, st.size(), "steps"));

  TELLER_RETURN_IF_ERROR(CheckSizes("steps", {{"event", st.event.size()},
                                              {"process", st.process.size()},
                                              {"thread", st.thread.size()},
                                              {"rank", st.rank.size()},
                                              {"number", st.number.size()},
                                              {"name", st.name.size()},
                                              {"phase", st.phase.size()},
                                              {"source", st.source.size()},
                                              {"start_ns", st.start_ns.size()},
                                              {"end_ns", st.end_ns.size()},
                                              {"node_begin", st.node_begin.size()},
                                              {"node_end", st.node_end.size()},
                                              {"requests_begin", st.requests_begin.size()},
                                              {"requests_count", st.requests_count.size()},
                                              {"global_step", st.global_step.size()}}));
  TELLER_RETURN_IF_ERROR(CheckRefs("steps", "event", st.event, e.size(), "events"));
  TELLER_RETURN_IF_ERROR(CheckRefs("steps", "process", st.process, p.size(), "processes"));
  TELLER_RETURN_IF_ERROR(CheckRefs("steps", "thread", st.thread, th.size(), "threads"));
  TELLER_RETURN_IF_ERROR(CheckRefs("steps", "name", st.name, strings, "strings"));
  TELLER_RETURN_IF_ERROR(CheckEnum("steps", "phase", st.phase, StepPhaseNames()));
  TELLER_RETURN_IF_ERROR(CheckEnum("steps", "source", st.source, StepSourceNames()));
  // node_end is one past the step's last node.
  TELLER_RETURN_IF_ERROR(CheckRefs("steps", "node_begin", st.node_begin, n.size() + 1, "nodes"));
  TELLER_RETURN_IF_ERROR(CheckRefs("steps", "node_end", st.node_end, n.size() + 1, "nodes"));
  TELLER_RETURN_IF_ERROR(CheckRanges("steps", "requests_begin", st.requests_begin,
                                     st.requests_count, t.step_requests.size(), "step_requests"));

  TELLER_RETURN_IF_ERROR(
      CheckRefs("step_requests", "request", t.step_requests, t.requests.size(), "requests"));
  const auto& r = t.requests;
  TELLER_RETURN_IF_ERROR(CheckSizes("requests", {{"id", r.id.size()},
                                                 {"first_ns", r.first_ns.size()},
                                                 {"last_ns", r.last_ns.size()},
                                                 {"step_count", r.step_count.size()}}));
  TELLER_RETURN_IF_ERROR(CheckRefs("requests", "id", r.id, strings, "strings"));

  const auto& m = t.collective_matches;
  TELLER_RETURN_IF_ERROR(CheckSizes(
      "collective_matches",
      {{"match_id", m.match.size()}, {"event", m.event.size()}, {"rank", m.rank.size()}}));
  TELLER_RETURN_IF_ERROR(CheckRefs("collective_matches", "event", m.event, e.size(), "events"));

  if (static_cast<size_t>(t.meta.format) >= TraceFormatNames().size()) {
    return base::InvalidArgument("meta: format {} out of range", static_cast<int>(t.meta.format));
  }
  return base::OkStatus();
}

}  // namespace teller::store
