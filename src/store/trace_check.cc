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

using model::ColumnTarget;

// Ids of a Ref column must be invalid or a row of its target (node_ends: a node or one
// past the last node).
template <typename Id>
base::Status CheckRef(const Trace& t, std::string_view table, std::string_view column,
                      const std::vector<Id>& ids, ColumnTarget target) {
  switch (target) {
    case ColumnTarget::none:
      return base::OkStatus();
    case ColumnTarget::strings:
      return CheckRefs(table, column, ids, t.strings.size(), "strings");
    case ColumnTarget::processes:
      return CheckRefs(table, column, ids, t.processes.size(), "processes");
    case ColumnTarget::threads:
      return CheckRefs(table, column, ids, t.threads.size(), "threads");
    case ColumnTarget::events:
      return CheckRefs(table, column, ids, t.events.size(), "events");
    case ColumnTarget::nodes:
      return CheckRefs(table, column, ids, t.nodes.size(), "nodes");
    case ColumnTarget::node_ends:
      return CheckRefs(table, column, ids, t.nodes.size() + 1, "nodes");
    case ColumnTarget::steps:
      return CheckRefs(table, column, ids, t.steps.size(), "steps");
    case ColumnTarget::templates:
      return CheckRefs(table, column, ids, t.templates.size(), "templates");
    case ColumnTarget::requests:
      return CheckRefs(table, column, ids, t.requests.size(), "requests");
  }
  return base::OkStatus();
}

// How each column kind of model/trace_columns.h is checked (beyond its row count).
template <typename T>
base::Status CheckValue(const Trace&, std::string_view, std::string_view, const std::vector<T>&,
                        ColumnTarget) {
  return base::OkStatus();
}
template <typename E>
base::Status CheckEnumColumn(const Trace&, std::string_view table, std::string_view column,
                             const std::vector<E>& values, ColumnTarget) {
  return CheckEnum(table, column, values, EnumNames(E{}));
}

// Check_<table>(t): the columns of one table of model/trace_columns.h have one row
// count, and their references and enums are in range.
#define TELLER_SIZE_COLUMN(sql_name, field, Type, Kind, Target, Base) \
  {#sql_name, table.field.size()},
#define TELLER_CHECK_COLUMN(sql_name, field, Type, Kind, Target, Base) \
  TELLER_RETURN_IF_ERROR(                                              \
      TELLER_CHECK_##Kind(t, kTable, #sql_name, table.field, ColumnTarget::Target));
#define TELLER_CHECK_Value CheckValue
#define TELLER_CHECK_Ref CheckRef
#define TELLER_CHECK_Enum CheckEnumColumn
#define TELLER_SKIP_DERIVED(sql_name, sql_type)
#define TELLER_DEFINE_CHECK(sql_table, member, Model, row_column, row_base, COLUMNS) \
  base::Status Check_##sql_table(const Trace& t) {                                   \
    constexpr std::string_view kTable = #sql_table;                                  \
    const model::Model& table = t.member;                                            \
    TELLER_RETURN_IF_ERROR(                                                          \
        CheckSizes(kTable, {COLUMNS(TELLER_SIZE_COLUMN, TELLER_SKIP_DERIVED)}));     \
    COLUMNS(TELLER_CHECK_COLUMN, TELLER_SKIP_DERIVED)                                \
    return base::OkStatus();                                                         \
  }
TELLER_SHARED_TRACE_TABLES(TELLER_DEFINE_CHECK)
TELLER_ROW_TRACE_TABLES(TELLER_DEFINE_CHECK)
#undef TELLER_DEFINE_CHECK
#undef TELLER_SKIP_DERIVED
#undef TELLER_CHECK_Enum
#undef TELLER_CHECK_Ref
#undef TELLER_CHECK_Value
#undef TELLER_CHECK_COLUMN
#undef TELLER_SIZE_COLUMN

}  // namespace

base::Status CheckTrace(const Trace& t) {
  TELLER_RETURN_IF_ERROR(Check_processes(t));
  TELLER_RETURN_IF_ERROR(Check_threads(t));
  TELLER_RETURN_IF_ERROR(Check_events(t));
  TELLER_RETURN_IF_ERROR(Check_args(t));
  const auto& e = t.events;
  TELLER_RETURN_IF_ERROR(
      CheckRanges("events", "args_begin", e.args_begin, e.args_count, t.args.size(), "args"));
  TELLER_RETURN_IF_ERROR(Check_collectives(t));
  TELLER_RETURN_IF_ERROR(Check_templates(t));
  TELLER_RETURN_IF_ERROR(Check_logs(t));
  for (const auto& [name, entry] : t.stats.entries()) {
    if (static_cast<size_t>(entry.severity) >= StatSeverityNames().size()) {
      return base::InvalidArgument("table stats row {}: severity {} out of range", name,
                                   static_cast<int>(entry.severity));
    }
  }
  TELLER_RETURN_IF_ERROR(Check_nodes(t));
  TELLER_RETURN_IF_ERROR(Check_steps(t));
  const auto& st = t.steps;
  TELLER_RETURN_IF_ERROR(CheckRanges("steps", "requests_begin", st.requests_begin,
                                     st.requests_count, t.step_requests.size(), "step_requests"));
  TELLER_RETURN_IF_ERROR(
      CheckRefs("step_requests", "request", t.step_requests, t.requests.size(), "requests"));
  TELLER_RETURN_IF_ERROR(Check_requests(t));
  TELLER_RETURN_IF_ERROR(Check_collective_matches(t));
  if (static_cast<size_t>(t.meta.format) >= TraceFormatNames().size()) {
    return base::InvalidArgument("meta: format {} out of range", static_cast<int>(t.meta.format));
  }
  return base::OkStatus();
}

}  // namespace teller::store
