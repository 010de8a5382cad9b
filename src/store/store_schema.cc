#include "store/store_schema.h"

#include <array>
#include <string>
#include <vector>

#include "model/layer.h"
#include "model/stats.h"
#include "model/trace.h"

namespace teller::store {

namespace {

// SQL types of the column kinds of model/trace_columns.h.
constexpr std::string_view kValueSqlType = "INTEGER NOT NULL";
constexpr std::string_view kRefSqlType = "INTEGER";
constexpr std::string_view kEnumSqlType = "TEXT NOT NULL";
constexpr std::string_view kRowSqlType = "INTEGER PRIMARY KEY";

struct SqlColumn {
  std::string_view name;
  std::string_view type;
};

struct SqlTable {
  std::string_view name;
  std::vector<SqlColumn> columns;
};

#define TELLER_SQL_COLUMN(sql_name, field, Type, Kind, Target, Base) \
  SqlColumn{#sql_name, k##Kind##SqlType},
#define TELLER_SQL_DERIVED(sql_name, sql_type) SqlColumn{#sql_name, sql_type},
#define TELLER_SQL_TABLE(sql_table, member, Model, row_column, row_base, COLUMNS) \
  SqlTable{#sql_table,                                                            \
           {SqlColumn{#row_column, kRowSqlType}, COLUMNS(TELLER_SQL_COLUMN, TELLER_SQL_DERIVED)}},

// Every table of the store, in the order of the schema text.
std::vector<SqlTable> StoreTables() {
  std::vector<SqlTable> column_tables = {TELLER_SHARED_TRACE_TABLES(TELLER_SQL_TABLE)
                                             TELLER_ROW_TRACE_TABLES(TELLER_SQL_TABLE)};
  auto take = [&](std::string_view name) {
    for (SqlTable& table : column_tables) {
      if (table.name == name) return std::move(table);
    }
    return SqlTable{};
  };
  return {
      {"meta", {{"key", "TEXT PRIMARY KEY NOT NULL"}, {"value", "TEXT NOT NULL"}}},
      {"strings", {{"id", kRowSqlType}, {"value", "TEXT NOT NULL"}}},
      take("processes"),
      take("threads"),
      take("events"),
      take("args"),
      take("collectives"),
      take("templates"),
      take("logs"),
      {"stats",
       {{"name", "TEXT PRIMARY KEY NOT NULL"},
        {"value", kValueSqlType},
        {"severity", "TEXT NOT NULL"}}},
      take("nodes"),
      take("steps"),
      {"step_requests", {{"slot", kRowSqlType}, {"step", kRefSqlType}, {"request", kRefSqlType}}},
      take("requests"),
      take("collective_matches"),
  };
}

#undef TELLER_SQL_TABLE
#undef TELLER_SQL_DERIVED
#undef TELLER_SQL_COLUMN

// Columns are wrapped greedily at this width, continuation lines indented by two.
constexpr size_t kSchemaLineWidth = 94;

std::string CreateTableStatement(const SqlTable& table) {
  std::string text = fmt::format("CREATE TABLE {}(", table.name);
  size_t line_start = 0;
  for (size_t i = 0; i < table.columns.size(); ++i) {
    const SqlColumn& column = table.columns[i];
    std::string item =
        fmt::format("{} {}{}", column.name, column.type, i + 1 < table.columns.size() ? "," : ");");
    if (i == 0) {
      text += item;
    } else if (text.size() - line_start + 1 + item.size() <= kSchemaLineWidth) {
      text += ' ' + item;
    } else {
      text += '\n';
      line_start = text.size();
      text += "  " + item;
    }
  }
  return text;
}

}  // namespace

// Every table's first column is its row index in model::Trace (0-based), so
// `USING(event)`, `USING(step)` join tables directly. References to other tables
// are row indexes; an invalid strong id is NULL. String columns hold strings.id.
const std::string& CreateTablesSql() {
  static const std::string* const kSql = [] {
    auto* sql = new std::string("\n");
    for (const SqlTable& table : StoreTables()) *sql += CreateTableStatement(table) + "\n";
    return sql;
  }();
  return *kSql;
}

const char kCreateIndexes[] = R"sql(
CREATE INDEX events_by_start ON events(start_ns);
CREATE INDEX nodes_by_step ON nodes(step);
CREATE INDEX logs_by_step ON logs(step);
CREATE INDEX requests_by_id ON requests(id);
CREATE INDEX step_requests_by_request ON step_requests(request);
)sql";

const char kCreateViews[] = R"sql(
CREATE VIEW events_v AS
  SELECT e.event, e.layer, e.phase, s.value AS name, p.os_pid AS pid, p.rank, t.os_tid AS tid,
         t.is_device, t.device, e.start_ns, e.dur_ns, e.start_ns + e.dur_ns AS end_ns, e.id,
         e.correlation, e.flags
  FROM events e LEFT JOIN strings s ON s.id = e.name
       LEFT JOIN processes p ON p.process = e.process
       LEFT JOIN threads t ON t.thread = e.thread;
CREATE VIEW nodes_v AS
  SELECT n.step, n.node, n.depth, e.layer, s.value AS name, e.start_ns, e.dur_ns, n.parent,
         n.event, printf('%*s', 2 * n.depth, '') || s.value AS indented
  FROM nodes n LEFT JOIN events e ON e.event = n.event
       LEFT JOIN strings s ON s.id = e.name;
CREATE VIEW kernels_v AS
  SELECT e.event, s.value AS name, p.rank, t.device, t.os_tid AS stream, e.start_ns, e.dur_ns,
         e.correlation, e.flags
  FROM events e LEFT JOIN strings s ON s.id = e.name
       LEFT JOIN processes p ON p.process = e.process
       LEFT JOIN threads t ON t.thread = e.thread
  WHERE e.layer = 'K';
CREATE VIEW args_v AS
  SELECT a.arg, a.event, k.value AS key, a.type,
         CASE a.type WHEN 'int' THEN a.int_value WHEN 'double' THEN a.double_value
                     ELSE v.value END AS value
  FROM args a LEFT JOIN strings k ON k.id = a.key LEFT JOIN strings v ON v.id = a.string_value;
CREATE VIEW steps_v AS
  SELECT st.step, st.rank, st.number, s.value AS name, st.phase, st.source, st.start_ns,
         st.end_ns, st.end_ns - st.start_ns AS dur_ns, st.node_end - st.node_begin AS node_count,
         st.requests_count AS request_count, st.global_step, st.event
  FROM steps st LEFT JOIN strings s ON s.id = st.name;
CREATE VIEW requests_v AS
  SELECT r.request, s.value AS request_id, r.first_ns, r.last_ns,
         r.last_ns - r.first_ns AS dur_ns, r.step_count
  FROM requests r LEFT JOIN strings s ON s.id = r.id;
CREATE VIEW step_requests_v AS
  SELECT sr.step, st.rank, st.number, st.phase, sr.request, s.value AS request_id
  FROM step_requests sr LEFT JOIN steps st ON st.step = sr.step
       LEFT JOIN requests r ON r.request = sr.request
       LEFT JOIN strings s ON s.id = r.id;
CREATE VIEW logs_v AS
  SELECT l.log, l.ts_ns, l.rank, l.level, l.stream, r.value AS request_id, l.step, l.alignment,
         x.value AS text, tp.value AS template, src.value AS source, l.line_number
  FROM logs l LEFT JOIN strings r ON r.id = l.request
       LEFT JOIN strings x ON x.id = l.text
       LEFT JOIN templates t ON t.template = l.template
       LEFT JOIN strings tp ON tp.id = t.pattern
       LEFT JOIN strings src ON src.id = l.source;
CREATE VIEW collectives_v AS
  SELECT c.collective, c.event, p.rank, cm.value AS communicator, c.sequence, o.value AS op,
         c.size_bytes, d.value AS dtype, c.group_size, c.group_rank, e.start_ns, e.dur_ns
  FROM collectives c LEFT JOIN events e ON e.event = c.event
       LEFT JOIN processes p ON p.process = e.process
       LEFT JOIN strings cm ON cm.id = c.communicator
       LEFT JOIN strings o ON o.id = c.op
       LEFT JOIN strings d ON d.id = c.dtype;
CREATE VIEW collective_matches_v AS
  SELECT m.match_id, m.rank, m.event, s.value AS name, e.start_ns, e.dur_ns,
         e.start_ns + e.dur_ns AS end_ns
  FROM collective_matches m LEFT JOIN events e ON e.event = m.event
       LEFT JOIN strings s ON s.id = e.name;
)sql";

namespace {

template <typename E, size_t N>
std::array<std::string_view, N> NamesFrom(std::string_view (*name)(E)) {
  std::array<std::string_view, N> names;
  for (size_t i = 0; i < N; ++i) names[i] = name(static_cast<E>(i));
  return names;
}

}  // namespace

std::span<const std::string_view> LayerNames() {
  static const auto names = NamesFrom<model::Layer, model::kLayerCount>(&model::LayerName);
  return names;
}

std::span<const std::string_view> EventPhaseNames() {
  static constexpr std::array<std::string_view, 4> kNames = {"complete", "instant", "begin", "end"};
  return kNames;
}

std::span<const std::string_view> ArgTypeNames() {
  static constexpr std::array<std::string_view, 3> kNames = {"int", "string", "double"};
  return kNames;
}

std::span<const std::string_view> LogLevelNames() {
  static const auto names = NamesFrom<model::LogLevel, 6>(&model::LogLevelName);
  return names;
}

std::span<const std::string_view> LogStreamNames() {
  static constexpr std::array<std::string_view, 4> kNames = {"unknown", "stdout", "stderr", "file"};
  return kNames;
}

std::span<const std::string_view> LogAlignmentNames() {
  static constexpr std::array<std::string_view, 3> kNames = {"none", "request_id", "time_window"};
  return kNames;
}

std::span<const std::string_view> StepPhaseNames() {
  static const auto names = NamesFrom<model::StepPhase, 4>(&model::StepPhaseName);
  return names;
}

std::span<const std::string_view> StepSourceNames() {
  static const auto names = NamesFrom<model::StepSource, 4>(&model::StepSourceName);
  return names;
}

std::span<const std::string_view> TraceFormatNames() {
  static const auto names = NamesFrom<model::TraceFormat, 6>(&model::TraceFormatName);
  return names;
}

std::span<const std::string_view> StatSeverityNames() {
  static const auto names = NamesFrom<model::StatSeverity, 3>(&model::StatSeverityName);
  return names;
}

int FindName(std::span<const std::string_view> names, std::string_view text) {
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == text) return static_cast<int>(i);
  }
  return -1;
}

std::string EncodeJsonStringArray(const std::vector<std::string>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    out += '"';
    for (unsigned char c : values[i]) {
      switch (c) {
        case '"':
          out += "\\\"";
          break;
        case '\\':
          out += "\\\\";
          break;
        case '\n':
          out += "\\n";
          break;
        case '\t':
          out += "\\t";
          break;
        case '\r':
          out += "\\r";
          break;
        default:
          if (c < 0x20) {
            out += fmt::format("\\u{:04x}", c);
          } else {
            out += static_cast<char>(c);
          }
      }
    }
    out += '"';
  }
  out += ']';
  return out;
}

namespace {

void AppendUtf8(uint32_t code, std::string* out) {
  if (code < 0x80) {
    *out += static_cast<char>(code);
  } else if (code < 0x800) {
    *out += static_cast<char>(0xC0 | (code >> 6));
    *out += static_cast<char>(0x80 | (code & 0x3F));
  } else if (code < 0x10000) {
    *out += static_cast<char>(0xE0 | (code >> 12));
    *out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (code & 0x3F));
  } else {
    *out += static_cast<char>(0xF0 | (code >> 18));
    *out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
    *out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (code & 0x3F));
  }
}

bool ParseHex4(std::string_view json, size_t at, uint32_t* code) {
  if (at + 4 > json.size()) return false;
  uint32_t value = 0;
  for (size_t i = at; i < at + 4; ++i) {
    char c = json[i];
    value <<= 4;
    if (c >= '0' && c <= '9') {
      value |= c - '0';
    } else if (c >= 'a' && c <= 'f') {
      value |= c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      value |= c - 'A' + 10;
    } else {
      return false;
    }
  }
  *code = value;
  return true;
}

}  // namespace

base::StatusOr<std::vector<std::string>> DecodeJsonStringArray(std::string_view json) {
  std::vector<std::string> values;
  size_t i = 0;
  auto skip_space = [&] {
    while (i < json.size() &&
           (json[i] == ' ' || json[i] == '\n' || json[i] == '\t' || json[i] == '\r')) {
      ++i;
    }
  };
  auto fail = [&](std::string_view expected) {
    return base::InvalidArgument("JSON string array offset {}: expected {}", i, expected);
  };
  skip_space();
  if (i >= json.size() || json[i] != '[') return fail("'['");
  ++i;
  skip_space();
  if (i < json.size() && json[i] == ']') {
    ++i;
  } else {
    while (true) {
      skip_space();
      if (i >= json.size() || json[i] != '"') return fail("'\"'");
      ++i;
      std::string value;
      while (true) {
        if (i >= json.size()) return fail("closing '\"'");
        char c = json[i++];
        if (c == '"') break;
        if (c != '\\') {
          value += c;
          continue;
        }
        if (i >= json.size()) return fail("an escape");
        char e = json[i++];
        switch (e) {
          case '"':
            value += '"';
            break;
          case '\\':
            value += '\\';
            break;
          case '/':
            value += '/';
            break;
          case 'b':
            value += '\b';
            break;
          case 'f':
            value += '\f';
            break;
          case 'n':
            value += '\n';
            break;
          case 'r':
            value += '\r';
            break;
          case 't':
            value += '\t';
            break;
          case 'u': {
            uint32_t code = 0;
            if (!ParseHex4(json, i, &code)) return fail("4 hex digits");
            i += 4;
            if (code >= 0xD800 && code < 0xDC00 && i + 6 <= json.size() && json[i] == '\\' &&
                json[i + 1] == 'u') {
              uint32_t low = 0;
              if (ParseHex4(json, i + 2, &low) && low >= 0xDC00 && low < 0xE000) {
                code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
                i += 6;
              }
            }
            AppendUtf8(code, &value);
            break;
          }
          default:
            return fail("a valid escape");
        }
      }
      values.push_back(std::move(value));
      skip_space();
      if (i < json.size() && json[i] == ',') {
        ++i;
        continue;
      }
      if (i < json.size() && json[i] == ']') {
        ++i;
        break;
      }
      return fail("',' or ']'");
    }
  }
  skip_space();
  if (i != json.size()) return fail("end of text");
  return values;
}

}  // namespace teller::store
