#include "store/trace_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "store/sqlite_db.h"
#include "store/store_schema.h"
#include "store/trace_check.h"

namespace teller::store {
namespace {

using model::Trace;

// ---------------------------------------------------------------------------
// Writing

// Binds one row's values in column order and inserts it.
class Inserter {
 public:
  static base::StatusOr<Inserter> Make(Database* db, std::string_view table, int columns) {
    std::string sql = fmt::format("INSERT INTO {} VALUES(?", table);
    for (int i = 1; i < columns; ++i) sql += ",?";
    sql += ")";
    TELLER_ASSIGN_OR_RETURN(Statement stmt, db->Prepare(sql));
    return Inserter(db, std::move(stmt), table);
  }

  Inserter& Int(int64_t value) {
    sqlite3_bind_int64(stmt_.get(), ++column_, value);
    return *this;
  }
  template <typename Id>
  Inserter& Ref(Id id) {
    return RefAt(id, 0);
  }
  // An id of a window's table, stored as the row it became (base + id).
  template <typename Id>
  Inserter& RefAt(Id id, int64_t base) {
    if (id.valid()) return Int(base + static_cast<int64_t>(id.value()));
    sqlite3_bind_null(stmt_.get(), ++column_);
    return *this;
  }
  Inserter& Text(std::string_view text) {
    // A null data pointer would bind NULL, not the empty string.
    sqlite3_bind_text(stmt_.get(), ++column_, text.empty() ? "" : text.data(),
                      static_cast<int>(text.size()), SQLITE_STATIC);
    return *this;
  }
  template <typename E>
  Inserter& Enum(E value, std::span<const std::string_view> names) {
    return Text(names[static_cast<size_t>(value)]);
  }
  Inserter& Real(double value) {
    sqlite3_bind_double(stmt_.get(), ++column_, value);
    return *this;
  }
  Inserter& Null() {
    sqlite3_bind_null(stmt_.get(), ++column_);
    return *this;
  }

  base::Status Insert(size_t row) {
    column_ = 0;
    int rc = sqlite3_step(stmt_.get());
    sqlite3_reset(stmt_.get());
    if (rc == SQLITE_DONE) return base::OkStatus();
    return db_->Error(rc, fmt::format("writing row {} of table {}", row, table_));
  }

 private:
  Inserter(Database* db, Statement stmt, std::string_view table)
      : db_(db), stmt_(std::move(stmt)), table_(table) {}

  Database* db_;
  Statement stmt_;
  std::string_view table_;
  int column_ = 0;
};

// For each row of a child table, the parent row whose [begin, begin + count) holds it.
template <typename Count>
std::vector<int64_t> OwnerOfRows(size_t rows, const std::vector<uint32_t>& begin,
                                 const std::vector<Count>& count) {
  std::vector<int64_t> owner(rows, -1);
  for (size_t parent = 0; parent < begin.size(); ++parent) {
    for (uint64_t r = begin[parent]; r < uint64_t{begin[parent]} + count[parent]; ++r) {
      owner[r] = static_cast<int64_t>(parent);
    }
  }
  return owner;
}

// Row numbers a window's tables start at in the store (all zero for a whole trace).
struct RowBase {
  int64_t event = 0;
  int64_t arg = 0;
  int64_t collective = 0;
  int64_t node = 0;
  int64_t step = 0;
  int64_t step_request = 0;
  int64_t match = 0;      // collective match id
  int64_t match_row = 0;  // row of collective_matches
};

// The tables that do not grow with events: meta, strings, processes, threads,
// templates, logs, stats, requests.
base::Status WriteSharedTables(const Trace& t, Database* db) {
  {
    TELLER_ASSIGN_OR_RETURN(Inserter ins, Inserter::Make(db, "meta", 2));
    const std::pair<std::string_view, std::string> rows[] = {
        {"application", "teller"},
        {"schema_version", std::to_string(kSchemaVersion)},
        {"format", std::string(TraceFormatNames()[static_cast<size_t>(t.meta.format)])},
        {"sources", EncodeJsonStringArray(t.meta.sources)},
        {"notes", EncodeJsonStringArray(t.meta.notes)},
        {"labels_json", t.meta.labels_json},
        {"meta_json", t.meta.meta_json},
        {"reconstructed", t.reconstructed ? "1" : "0"},
    };
    size_t row = 0;
    for (const auto& [key, value] : rows) {
      TELLER_RETURN_IF_ERROR(ins.Text(key).Text(value).Insert(row++));
    }
  }
  {
    TELLER_ASSIGN_OR_RETURN(Inserter ins, Inserter::Make(db, "strings", 2));
    for (size_t i = 0; i < t.strings.size(); ++i) {
      ins.Int(static_cast<int64_t>(i))
          .Text(t.strings.Get(base::StringId(static_cast<uint32_t>(i))));
      TELLER_RETURN_IF_ERROR(ins.Insert(i));
    }
  }
  {
    const auto& p = t.processes;
    TELLER_ASSIGN_OR_RETURN(Inserter ins, Inserter::Make(db, "processes", 9));
    for (size_t i = 0; i < p.size(); ++i) {
      ins.Int(i).Int(p.os_pid[i]).Ref(p.host[i]).Ref(p.name[i]).Int(p.rank[i]).Int(p.node[i]);
      ins.Ref(p.source[i]).Int(p.clock_offset_ns[i]).Int(p.clock_uncertainty_ns[i]);
      TELLER_RETURN_IF_ERROR(ins.Insert(i));
    }
  }
  {
    const auto& th = t.threads;
    TELLER_ASSIGN_OR_RETURN(Inserter ins, Inserter::Make(db, "threads", 6));
    for (size_t i = 0; i < th.size(); ++i) {
      ins.Int(i).Ref(th.process[i]).Int(th.os_tid[i]).Ref(th.name[i]).Int(th.is_device[i]);
      ins.Int(th.device[i]);
      TELLER_RETURN_IF_ERROR(ins.Insert(i));
    }
  }
  {
    const auto& tp = t.templates;
    TELLER_ASSIGN_OR_RETURN(Inserter ins, Inserter::Make(db, "templates", 3));
    for (size_t i = 0; i < tp.size(); ++i) {
      TELLER_RETURN_IF_ERROR(ins.Int(i).Ref(tp.pattern[i]).Int(tp.count[i]).Insert(i));
    }
  }
  {
    const auto& l = t.logs;
    TELLER_ASSIGN_OR_RETURN(Inserter ins, Inserter::Make(db, "logs", 14));
    for (size_t i = 0; i < l.size(); ++i) {
      ins.Int(i).Int(l.ts_ns[i]).Ref(l.process[i]).Int(l.os_pid[i]).Int(l.rank[i]);
      ins.Enum(l.level[i], LogLevelNames()).Enum(l.stream[i], LogStreamNames());
      ins.Ref(l.request[i]).Ref(l.template_id[i]).Ref(l.text[i]).Ref(l.source[i]);
      ins.Int(l.line_number[i]).Ref(l.step[i]).Enum(l.alignment[i], LogAlignmentNames());
      TELLER_RETURN_IF_ERROR(ins.Insert(i));
    }
  }
  {
    TELLER_ASSIGN_OR_RETURN(Inserter ins, Inserter::Make(db, "stats", 3));
    size_t row = 0;
    for (const auto& [name, entry] : t.stats.entries()) {
      ins.Text(name).Int(entry.value).Enum(entry.severity, StatSeverityNames());
      TELLER_RETURN_IF_ERROR(ins.Insert(row++));
    }
  }
  {
    const auto& r = t.requests;
    TELLER_ASSIGN_OR_RETURN(Inserter ins, Inserter::Make(db, "requests", 5));
    for (size_t i = 0; i < r.size(); ++i) {
      ins.Int(i).Ref(r.id[i]).Int(r.first_ns[i]).Int(r.last_ns[i]).Int(r.step_count[i]);
      TELLER_RETURN_IF_ERROR(ins.Insert(i));
    }
  }
  return base::OkStatus();
}

// The tables that grow with events, their rows and references offset by at.
base::Status WriteRowTables(const Trace& t, const RowBase& at, Database* db) {
  {
    const auto& e = t.events;
    TELLER_ASSIGN_OR_RETURN(Inserter ins, Inserter::Make(db, "events", 13));
    for (size_t i = 0; i < e.size(); ++i) {
      ins.Int(at.event + i).Enum(e.layer[i], LayerNames()).Enum(e.phase[i], EventPhaseNames());
      ins.Int(e.flags[i]).Ref(e.name[i]).Ref(e.process[i]).Ref(e.thread[i]);
      ins.Int(e.start_ns[i]).Int(e.dur_ns[i]).Ref(e.id[i]).Ref(e.correlation[i]);
      ins.Int(at.arg + e.args_begin[i]).Int(e.args_count[i]);
      TELLER_RETURN_IF_ERROR(ins.Insert(i));
    }
  }
  {
    const auto& a = t.args;
    std::vector<int64_t> owner = OwnerOfRows(a.size(), t.events.args_begin, t.events.args_count);
    TELLER_ASSIGN_OR_RETURN(Inserter ins, Inserter::Make(db, "args", 7));
    for (size_t i = 0; i < a.size(); ++i) {
      ins.Int(at.arg + i);
      owner[i] >= 0 ? ins.Int(at.event + owner[i]) : ins.Null();
      ins.Ref(a.key[i]).Enum(a.type[i], ArgTypeNames()).Int(a.int_value[i]).Ref(a.string_value[i]);
      if (a.type[i] == model::ArgType::kDouble) {
        double value;
        std::memcpy(&value, &a.int_value[i], sizeof(value));
        ins.Real(value);  // for queries; int_value holds the exact bits
      } else {
        ins.Null();
      }
      TELLER_RETURN_IF_ERROR(ins.Insert(i));
    }
  }
  {
    const auto& c = t.collectives;
    TELLER_ASSIGN_OR_RETURN(Inserter ins, Inserter::Make(db, "collectives", 9));
    for (size_t i = 0; i < c.size(); ++i) {
      ins.Int(at.collective + i).RefAt(c.event[i], at.event).Ref(c.communicator[i]);
      ins.Int(c.sequence[i]).Ref(c.op[i]);
      ins.Int(c.size_bytes[i]).Ref(c.dtype[i]).Int(c.group_size[i]).Int(c.group_rank[i]);
      TELLER_RETURN_IF_ERROR(ins.Insert(i));
    }
  }
  {
    const auto& n = t.nodes;
    TELLER_ASSIGN_OR_RETURN(Inserter ins, Inserter::Make(db, "nodes", 5));
    for (size_t i = 0; i < n.size(); ++i) {
      ins.Int(at.node + i).RefAt(n.event[i], at.event).RefAt(n.parent[i], at.node);
      ins.Int(n.depth[i]).RefAt(n.step[i], at.step);
      TELLER_RETURN_IF_ERROR(ins.Insert(i));
    }
  }
  {
    const auto& s = t.steps;
    TELLER_ASSIGN_OR_RETURN(Inserter ins, Inserter::Make(db, "steps", 16));
    for (size_t i = 0; i < s.size(); ++i) {
      ins.Int(at.step + i).RefAt(s.event[i], at.event).Ref(s.process[i]).Ref(s.thread[i]);
      ins.Int(s.rank[i]);
      ins.Int(s.number[i]).Ref(s.name[i]).Enum(s.phase[i], StepPhaseNames());
      ins.Enum(s.source[i], StepSourceNames()).Int(s.start_ns[i]).Int(s.end_ns[i]);
      ins.RefAt(s.node_begin[i], at.node).RefAt(s.node_end[i], at.node);
      ins.Int(at.step_request + s.requests_begin[i]);
      ins.Int(s.requests_count[i]).Int(s.global_step[i]);
      TELLER_RETURN_IF_ERROR(ins.Insert(i));
    }
  }
  {
    std::vector<int64_t> owner =
        OwnerOfRows(t.step_requests.size(), t.steps.requests_begin, t.steps.requests_count);
    TELLER_ASSIGN_OR_RETURN(Inserter ins, Inserter::Make(db, "step_requests", 3));
    for (size_t i = 0; i < t.step_requests.size(); ++i) {
      ins.Int(at.step_request + i);
      owner[i] >= 0 ? ins.Int(at.step + owner[i]) : ins.Null();
      TELLER_RETURN_IF_ERROR(ins.Ref(t.step_requests[i]).Insert(i));
    }
  }
  {
    const auto& m = t.collective_matches;
    TELLER_ASSIGN_OR_RETURN(Inserter ins, Inserter::Make(db, "collective_matches", 4));
    for (size_t i = 0; i < m.size(); ++i) {
      ins.Int(at.match_row + i).RefAt(m.match[i], at.match).RefAt(m.event[i], at.event);
      TELLER_RETURN_IF_ERROR(ins.Int(m.rank[i]).Insert(i));
    }
  }
  return base::OkStatus();
}

base::Status WriteTables(const Trace& t, Database* db) {
  TELLER_RETURN_IF_ERROR(WriteSharedTables(t, db));
  return WriteRowTables(t, RowBase{}, db);
}

// cache_kib: SQLite's page cache (a whole trace gets 128 MiB; the windowed writer,
// whose rows arrive in order, less, as part of its memory bound).
base::Status BeginStore(Database* db, std::string_view temp_store, int64_t cache_kib) {
  TELLER_RETURN_IF_ERROR(db->Exec(fmt::format(
      "PRAGMA page_size=4096; PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;"
      "PRAGMA locking_mode=EXCLUSIVE; PRAGMA temp_store={}; PRAGMA cache_size=-{};"
      "PRAGMA application_id={}; PRAGMA user_version={};",
      temp_store, cache_kib, kApplicationId, kSchemaVersion)));
  TELLER_RETURN_IF_ERROR(db->Exec("BEGIN"));
  return db->Exec(kCreateTables);
}

base::Status EndStore(Database* db) {
  TELLER_RETURN_IF_ERROR(db->Exec(kCreateIndexes));
  TELLER_RETURN_IF_ERROR(db->Exec(kCreateViews));
  TELLER_RETURN_IF_ERROR(db->Exec("COMMIT"));
  return db->Close();
}

base::Status WriteStore(const Trace& trace, const std::string& path) {
  TELLER_ASSIGN_OR_RETURN(Database db, Database::Open(path, Database::Mode::kCreate));
  TELLER_RETURN_IF_ERROR(BeginStore(&db, "MEMORY", 131072));
  TELLER_RETURN_IF_ERROR(WriteTables(trace, &db));
  return EndStore(&db);
}

base::Status SyncFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return base::IoError("{}: cannot open to sync: {}", path, std::strerror(errno));
  int rc = ::fsync(fd);
  int error = errno;
  ::close(fd);
  if (rc != 0) return base::IoError("{}: fsync failed: {}", path, std::strerror(error));
  return base::OkStatus();
}

// ---------------------------------------------------------------------------
// Reading

// Scans one table in row order; column 0 is the row index and must count 0, 1, ...
// Accessors record the first problem in status() instead of returning it, so the
// per-row code stays a flat list of column reads.
class RowReader {
 public:
  static base::StatusOr<RowReader> Open(Database* db, std::string_view table,
                                        std::string_view columns) {
    std::string_view key = columns.substr(0, columns.find(','));
    TELLER_ASSIGN_OR_RETURN(Statement stmt, db->Prepare(fmt::format("SELECT {} FROM {} ORDER BY {}",
                                                                    columns, table, key)));
    TELLER_ASSIGN_OR_RETURN(
        int64_t rows,
        db->QueryInt(fmt::format("SELECT coalesce(max({})+1, 0) FROM {}", key, table)));
    return RowReader(db, std::move(stmt), table, rows);
  }

  // Rows the table claims (max row index + 1); verified by Finish().
  int64_t rows() const { return rows_; }
  // A reserve size no larger than the file could hold, whatever the table claims.
  size_t ReserveSize(uint64_t file_bytes) const {
    return static_cast<size_t>(std::min<uint64_t>(rows_, file_bytes / 2));
  }

  bool Next() {
    if (!status_.ok()) return false;
    int rc = sqlite3_step(stmt_.get());
    if (rc == SQLITE_DONE) return false;
    if (rc != SQLITE_ROW) {
      status_ = db_->Error(rc, fmt::format("reading table {} after row {}", table_, row_ - 1));
      return false;
    }
    int64_t key = sqlite3_column_int64(stmt_.get(), 0);
    current_ = row_;
    if (sqlite3_column_type(stmt_.get(), 0) != SQLITE_INTEGER || key != row_) {
      Fail(0, fmt::format("row index {}", row_));
      return false;
    }
    ++row_;
    return true;
  }

  // Fails unless every claimed row was read.
  base::Status Finish() {
    if (status_.ok() && row_ != rows_) {
      return base::DataLoss("{}: table {}: read {} rows, expected {}", db_->path(), table_, row_,
                            rows_);
    }
    return status_;
  }

  int64_t Int(int col) {
    if (sqlite3_column_type(stmt_.get(), col) != SQLITE_INTEGER) {
      Fail(col, "an integer");
      return 0;
    }
    return sqlite3_column_int64(stmt_.get(), col);
  }

  template <typename T>
  T Narrow(int col) {
    int64_t value = Int(col);
    static_assert(sizeof(T) < sizeof(int64_t));
    if (value < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
        value > static_cast<int64_t>(std::numeric_limits<T>::max())) {
      if (status_.ok()) Fail(col, fmt::format("a value that fits {} bytes", sizeof(T)));
      return 0;
    }
    return static_cast<T>(value);
  }

  // NULL is the invalid id; anything else must be a representable valid id.
  template <typename Id>
  Id Ref(int col) {
    using Rep = typename Id::rep_type;
    int type = sqlite3_column_type(stmt_.get(), col);
    if (type == SQLITE_NULL) return Id::Invalid();
    int64_t value = Int(col);
    if constexpr (std::is_unsigned_v<Rep>) {
      if (value < 0 || static_cast<uint64_t>(value) >= Id::kInvalidValue) {
        if (status_.ok()) Fail(col, "NULL or a row index");
        return Id::Invalid();
      }
    }
    return Id(static_cast<Rep>(value));
  }

  std::string_view Text(int col) {
    if (sqlite3_column_type(stmt_.get(), col) != SQLITE_TEXT) {
      Fail(col, "text");
      return {};
    }
    const char* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt_.get(), col));
    return std::string_view(text, static_cast<size_t>(sqlite3_column_bytes(stmt_.get(), col)));
  }

  template <typename E>
  E Enum(int col, std::span<const std::string_view> names) {
    std::string_view text = Text(col);
    int index = FindName(names, text);
    if (index < 0) {
      if (status_.ok()) Fail(col, fmt::format("one of {}", fmt::join(names, ", ")));
      return E{};
    }
    return static_cast<E>(index);
  }

 private:
  RowReader(Database* db, Statement stmt, std::string_view table, int64_t rows)
      : db_(db), stmt_(std::move(stmt)), table_(table), rows_(rows) {}

  void Fail(int col, std::string_view expected) {
    if (!status_.ok()) return;
    status_ = base::DataLoss("{}: table {} row {} column {}: expected {}", db_->path(), table_,
                             current_, sqlite3_column_name(stmt_.get(), col), expected);
  }

  Database* db_;
  Statement stmt_;
  std::string_view table_;
  int64_t rows_;
  int64_t row_ = 0;      // rows read so far
  int64_t current_ = 0;  // the row being read
  base::Status status_;
};

struct LoadContext {
  Database* db;
  uint64_t file_bytes;
};

base::Status ReadStrings(LoadContext& ctx, Trace* t) {
  TELLER_ASSIGN_OR_RETURN(RowReader r, RowReader::Open(ctx.db, "strings", "id, value"));
  int64_t id = -1;
  while (r.Next()) {
    std::string_view value = r.Text(1);
    ++id;
    if (id == 0) {
      if (!value.empty()) {
        return base::DataLoss("{}: table strings row 0: expected the empty string", ctx.db->path());
      }
      continue;
    }
    base::StringId got = t->strings.Intern(value);
    if (static_cast<int64_t>(got.value()) != id) {
      return base::DataLoss("{}: table strings row {}: duplicate of row {}", ctx.db->path(), id,
                            got.value());
    }
  }
  return r.Finish();
}

base::Status ReadProcesses(LoadContext& ctx, Trace* t) {
  TELLER_ASSIGN_OR_RETURN(RowReader r,
                          RowReader::Open(ctx.db, "processes",
                                          "process, os_pid, host, name, rank, node, source, "
                                          "clock_offset_ns, clock_uncertainty_ns"));
  auto& p = t->processes;
  while (r.Next()) {
    p.os_pid.push_back(r.Int(1));
    p.host.push_back(r.Ref<base::StringId>(2));
    p.name.push_back(r.Ref<base::StringId>(3));
    p.rank.push_back(r.Narrow<int32_t>(4));
    p.node.push_back(r.Narrow<int32_t>(5));
    p.source.push_back(r.Ref<base::StringId>(6));
    p.clock_offset_ns.push_back(r.Int(7));
    p.clock_uncertainty_ns.push_back(r.Int(8));
  }
  return r.Finish();
}

base::Status ReadThreads(LoadContext& ctx, Trace* t) {
  TELLER_ASSIGN_OR_RETURN(
      RowReader r,
      RowReader::Open(ctx.db, "threads", "thread, process, os_tid, name, is_device, device"));
  auto& th = t->threads;
  while (r.Next()) {
    th.process.push_back(r.Ref<model::ProcessIndex>(1));
    th.os_tid.push_back(r.Int(2));
    th.name.push_back(r.Ref<base::StringId>(3));
    th.is_device.push_back(r.Narrow<uint8_t>(4));
    th.device.push_back(r.Narrow<int32_t>(5));
  }
  return r.Finish();
}

base::Status ReadEvents(LoadContext& ctx, Trace* t) {
  TELLER_ASSIGN_OR_RETURN(
      RowReader r, RowReader::Open(ctx.db, "events",
                                   "event, layer, phase, flags, name, process, thread, start_ns, "
                                   "dur_ns, id, correlation, args_begin, args_count"));
  auto& e = t->events;
  e.Reserve(r.ReserveSize(ctx.file_bytes));
  while (r.Next()) {
    e.layer.push_back(r.Enum<model::Layer>(1, LayerNames()));
    e.phase.push_back(r.Enum<model::EventPhase>(2, EventPhaseNames()));
    e.flags.push_back(r.Narrow<uint8_t>(3));
    e.name.push_back(r.Ref<base::StringId>(4));
    e.process.push_back(r.Ref<model::ProcessIndex>(5));
    e.thread.push_back(r.Ref<model::ThreadIndex>(6));
    e.start_ns.push_back(r.Int(7));
    e.dur_ns.push_back(r.Int(8));
    e.id.push_back(r.Ref<model::EventId>(9));
    e.correlation.push_back(r.Ref<model::CorrelationId>(10));
    e.args_begin.push_back(r.Narrow<uint32_t>(11));
    e.args_count.push_back(r.Narrow<uint16_t>(12));
  }
  return r.Finish();
}

base::Status ReadArgs(LoadContext& ctx, Trace* t) {
  TELLER_ASSIGN_OR_RETURN(
      RowReader r, RowReader::Open(ctx.db, "args", "arg, key, type, int_value, string_value"));
  auto& a = t->args;
  size_t reserve = r.ReserveSize(ctx.file_bytes);
  a.key.reserve(reserve);
  a.type.reserve(reserve);
  a.int_value.reserve(reserve);
  a.string_value.reserve(reserve);
  while (r.Next()) {
    a.key.push_back(r.Ref<base::StringId>(1));
    a.type.push_back(r.Enum<model::ArgType>(2, ArgTypeNames()));
    a.int_value.push_back(r.Int(3));
    a.string_value.push_back(r.Ref<base::StringId>(4));
  }
  return r.Finish();
}

base::Status ReadCollectives(LoadContext& ctx, Trace* t) {
  TELLER_ASSIGN_OR_RETURN(
      RowReader r, RowReader::Open(ctx.db, "collectives",
                                   "collective, event, communicator, sequence, op, size_bytes, "
                                   "dtype, group_size, group_rank"));
  auto& c = t->collectives;
  while (r.Next()) {
    c.event.push_back(r.Ref<model::EventRow>(1));
    c.communicator.push_back(r.Ref<base::StringId>(2));
    c.sequence.push_back(r.Int(3));
    c.op.push_back(r.Ref<base::StringId>(4));
    c.size_bytes.push_back(r.Int(5));
    c.dtype.push_back(r.Ref<base::StringId>(6));
    c.group_size.push_back(r.Narrow<int32_t>(7));
    c.group_rank.push_back(r.Narrow<int32_t>(8));
  }
  return r.Finish();
}

base::Status ReadTemplates(LoadContext& ctx, Trace* t) {
  TELLER_ASSIGN_OR_RETURN(RowReader r,
                          RowReader::Open(ctx.db, "templates", "template, pattern, count"));
  while (r.Next()) {
    t->templates.pattern.push_back(r.Ref<base::StringId>(1));
    t->templates.count.push_back(r.Int(2));
  }
  return r.Finish();
}

base::Status ReadLogs(LoadContext& ctx, Trace* t) {
  TELLER_ASSIGN_OR_RETURN(
      RowReader r,
      RowReader::Open(ctx.db, "logs",
                      "log, ts_ns, process, os_pid, rank, level, stream, request, template, "
                      "text, source, line_number, step, alignment"));
  auto& l = t->logs;
  while (r.Next()) {
    l.ts_ns.push_back(r.Int(1));
    l.process.push_back(r.Ref<model::ProcessIndex>(2));
    l.os_pid.push_back(r.Int(3));
    l.rank.push_back(r.Narrow<int32_t>(4));
    l.level.push_back(r.Enum<model::LogLevel>(5, LogLevelNames()));
    l.stream.push_back(r.Enum<model::LogStream>(6, LogStreamNames()));
    l.request.push_back(r.Ref<base::StringId>(7));
    l.template_id.push_back(r.Ref<model::TemplateId>(8));
    l.text.push_back(r.Ref<base::StringId>(9));
    l.source.push_back(r.Ref<base::StringId>(10));
    l.line_number.push_back(r.Int(11));
    l.step.push_back(r.Ref<model::StepIndex>(12));
    l.alignment.push_back(r.Enum<model::LogAlignment>(13, LogAlignmentNames()));
  }
  return r.Finish();
}

base::Status ReadStats(LoadContext& ctx, Trace* t) {
  TELLER_ASSIGN_OR_RETURN(Statement stmt,
                          ctx.db->Prepare("SELECT name, value, severity FROM stats ORDER BY name"));
  while (true) {
    int rc = sqlite3_step(stmt.get());
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) return ctx.db->Error(rc, "reading table stats");
    auto text = [&](int col) {
      return std::string_view(reinterpret_cast<const char*>(sqlite3_column_text(stmt.get(), col)),
                              static_cast<size_t>(sqlite3_column_bytes(stmt.get(), col)));
    };
    std::string_view name = text(0);
    int severity = FindName(StatSeverityNames(), text(2));
    if (sqlite3_column_type(stmt.get(), 1) != SQLITE_INTEGER || severity < 0) {
      return base::DataLoss(
          "{}: table stats row '{}': expected an integer value and a severity "
          "({})",
          ctx.db->path(), name, fmt::join(StatSeverityNames(), ", "));
    }
    t->stats.Set(name, sqlite3_column_int64(stmt.get(), 1),
                 static_cast<model::StatSeverity>(severity));
  }
  return base::OkStatus();
}

base::Status ReadNodes(LoadContext& ctx, Trace* t) {
  TELLER_ASSIGN_OR_RETURN(RowReader r,
                          RowReader::Open(ctx.db, "nodes", "node, event, parent, depth, step"));
  auto& n = t->nodes;
  size_t reserve = r.ReserveSize(ctx.file_bytes);
  n.event.reserve(reserve);
  n.parent.reserve(reserve);
  n.depth.reserve(reserve);
  n.step.reserve(reserve);
  while (r.Next()) {
    n.event.push_back(r.Ref<model::EventRow>(1));
    n.parent.push_back(r.Ref<model::NodeIndex>(2));
    n.depth.push_back(r.Narrow<uint16_t>(3));
    n.step.push_back(r.Ref<model::StepIndex>(4));
  }
  return r.Finish();
}

base::Status ReadSteps(LoadContext& ctx, Trace* t) {
  TELLER_ASSIGN_OR_RETURN(
      RowReader r,
      RowReader::Open(ctx.db, "steps",
                      "step, event, process, thread, rank, number, name, phase, source, "
                      "start_ns, end_ns, node_begin, node_end, requests_begin, requests_count, "
                      "global_step"));
  auto& s = t->steps;
  while (r.Next()) {
    s.event.push_back(r.Ref<model::EventRow>(1));
    s.process.push_back(r.Ref<model::ProcessIndex>(2));
    s.thread.push_back(r.Ref<model::ThreadIndex>(3));
    s.rank.push_back(r.Narrow<int32_t>(4));
    s.number.push_back(r.Int(5));
    s.name.push_back(r.Ref<base::StringId>(6));
    s.phase.push_back(r.Enum<model::StepPhase>(7, StepPhaseNames()));
    s.source.push_back(r.Enum<model::StepSource>(8, StepSourceNames()));
    s.start_ns.push_back(r.Int(9));
    s.end_ns.push_back(r.Int(10));
    s.node_begin.push_back(r.Ref<model::NodeIndex>(11));
    s.node_end.push_back(r.Ref<model::NodeIndex>(12));
    s.requests_begin.push_back(r.Narrow<uint32_t>(13));
    s.requests_count.push_back(r.Narrow<uint32_t>(14));
    s.global_step.push_back(r.Int(15));
  }
  return r.Finish();
}

base::Status ReadStepRequests(LoadContext& ctx, Trace* t) {
  TELLER_ASSIGN_OR_RETURN(RowReader r, RowReader::Open(ctx.db, "step_requests", "slot, request"));
  while (r.Next()) t->step_requests.push_back(r.Ref<model::RequestIndex>(1));
  return r.Finish();
}

base::Status ReadRequests(LoadContext& ctx, Trace* t) {
  TELLER_ASSIGN_OR_RETURN(
      RowReader r,
      RowReader::Open(ctx.db, "requests", "request, id, first_ns, last_ns, step_count"));
  auto& q = t->requests;
  while (r.Next()) {
    q.id.push_back(r.Ref<base::StringId>(1));
    q.first_ns.push_back(r.Int(2));
    q.last_ns.push_back(r.Int(3));
    q.step_count.push_back(r.Narrow<uint32_t>(4));
  }
  return r.Finish();
}

base::Status ReadCollectiveMatches(LoadContext& ctx, Trace* t) {
  TELLER_ASSIGN_OR_RETURN(RowReader r, RowReader::Open(ctx.db, "collective_matches",
                                                       "collective_match, match_id, event, rank"));
  auto& m = t->collective_matches;
  while (r.Next()) {
    m.match.push_back(r.Ref<model::CollectiveMatchId>(1));
    m.event.push_back(r.Ref<model::EventRow>(2));
    m.rank.push_back(r.Narrow<int32_t>(3));
  }
  return r.Finish();
}

base::Status ReadMeta(LoadContext& ctx, Trace* t) {
  const std::string& path = ctx.db->path();
  TELLER_ASSIGN_OR_RETURN(Statement stmt, ctx.db->Prepare("SELECT key, value FROM meta"));
  std::map<std::string, std::string, std::less<>> meta;
  while (true) {
    int rc = sqlite3_step(stmt.get());
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) return ctx.db->Error(rc, "reading table meta");
    auto text = [&](int col) {
      const auto* data = reinterpret_cast<const char*>(sqlite3_column_text(stmt.get(), col));
      return std::string(data ? data : "",
                         static_cast<size_t>(sqlite3_column_bytes(stmt.get(), col)));
    };
    meta[text(0)] = text(1);
  }
  auto get = [&](std::string_view key, std::string* value) -> base::Status {
    auto it = meta.find(key);
    if (it == meta.end()) {
      return base::DataLoss("{}: table meta has no key '{}'; expected a teller store", path, key);
    }
    *value = it->second;
    return base::OkStatus();
  };
  std::string version;
  TELLER_RETURN_IF_ERROR(get("schema_version", &version));
  if (version != std::to_string(kSchemaVersion)) {
    return base::InvalidArgument(
        "{}: teller store schema_version {}, but this teller reads schema_version {}; rebuild "
        "it with `teller build`",
        path, version, kSchemaVersion);
  }
  std::string format, sources, notes, reconstructed;
  TELLER_RETURN_IF_ERROR(get("format", &format));
  TELLER_RETURN_IF_ERROR(get("sources", &sources));
  TELLER_RETURN_IF_ERROR(get("notes", &notes));
  TELLER_RETURN_IF_ERROR(get("reconstructed", &reconstructed));
  TELLER_RETURN_IF_ERROR(get("labels_json", &t->meta.labels_json));
  TELLER_RETURN_IF_ERROR(get("meta_json", &t->meta.meta_json));
  int format_index = FindName(TraceFormatNames(), format);
  if (format_index < 0) {
    return base::DataLoss("{}: meta format '{}': expected one of {}", path, format,
                          fmt::join(TraceFormatNames(), ", "));
  }
  t->meta.format = static_cast<model::TraceFormat>(format_index);
  auto decoded_sources = DecodeJsonStringArray(sources);
  if (!decoded_sources.ok()) {
    return base::DataLoss("{}: meta sources: {}", path, decoded_sources.status().message());
  }
  t->meta.sources = std::move(decoded_sources).value();
  auto decoded_notes = DecodeJsonStringArray(notes);
  if (!decoded_notes.ok()) {
    return base::DataLoss("{}: meta notes: {}", path, decoded_notes.status().message());
  }
  t->meta.notes = std::move(decoded_notes).value();
  if (reconstructed != "0" && reconstructed != "1") {
    return base::DataLoss("{}: meta reconstructed '{}': expected 0 or 1", path, reconstructed);
  }
  t->reconstructed = reconstructed == "1";
  return base::OkStatus();
}

base::StatusOr<Trace> ReadStore(Database* db, uint64_t file_bytes) {
  const std::string& path = db->path();
  auto app_id = db->QueryInt("PRAGMA application_id");
  if (!app_id.ok()) {
    return base::DataLoss(
        "{}: not an SQLite database, or a corrupt or truncated one ({}); "
        "expected a teller store written by `teller build`",
        path, sqlite3_errmsg(db->get()));
  }
  if (*app_id != kApplicationId) {
    return base::InvalidArgument(
        "{}: an SQLite database but not a teller store (application_id {:#x}, expected {:#x})",
        path, *app_id, kApplicationId);
  }
  TELLER_ASSIGN_OR_RETURN(int64_t page_count, db->QueryInt("PRAGMA page_count"));
  TELLER_ASSIGN_OR_RETURN(int64_t page_size, db->QueryInt("PRAGMA page_size"));
  if (static_cast<uint64_t>(page_count * page_size) > file_bytes) {
    return base::DataLoss("{}: truncated teller store: {} bytes, its header says {} pages of {}",
                          path, file_bytes, page_count, page_size);
  }
  TELLER_RETURN_IF_ERROR(db->Exec("PRAGMA mmap_size=1073741824; PRAGMA cache_size=-131072"));
  TELLER_RETURN_IF_ERROR(db->Exec("BEGIN"));
  Trace trace;
  LoadContext ctx{db, file_bytes};
  TELLER_RETURN_IF_ERROR(ReadMeta(ctx, &trace));
  TELLER_RETURN_IF_ERROR(ReadStrings(ctx, &trace));
  TELLER_RETURN_IF_ERROR(ReadProcesses(ctx, &trace));
  TELLER_RETURN_IF_ERROR(ReadThreads(ctx, &trace));
  TELLER_RETURN_IF_ERROR(ReadEvents(ctx, &trace));
  TELLER_RETURN_IF_ERROR(ReadArgs(ctx, &trace));
  TELLER_RETURN_IF_ERROR(ReadCollectives(ctx, &trace));
  TELLER_RETURN_IF_ERROR(ReadTemplates(ctx, &trace));
  TELLER_RETURN_IF_ERROR(ReadLogs(ctx, &trace));
  TELLER_RETURN_IF_ERROR(ReadStats(ctx, &trace));
  TELLER_RETURN_IF_ERROR(ReadNodes(ctx, &trace));
  TELLER_RETURN_IF_ERROR(ReadSteps(ctx, &trace));
  TELLER_RETURN_IF_ERROR(ReadStepRequests(ctx, &trace));
  TELLER_RETURN_IF_ERROR(ReadRequests(ctx, &trace));
  TELLER_RETURN_IF_ERROR(ReadCollectiveMatches(ctx, &trace));
  TELLER_RETURN_IF_ERROR(db->Exec("COMMIT"));
  base::Status check = CheckTrace(trace);
  if (!check.ok()) return base::DataLoss("{}: inconsistent store: {}", path, check.message());
  return trace;
}

// Syncs tmp and renames it over path; removes tmp when that fails.
base::Status PlaceStore(base::Status status, const std::string& tmp, const std::string& path) {
  std::error_code ec;
  if (status.ok()) status = SyncFile(tmp);
  if (status.ok()) {
    std::filesystem::rename(tmp, path, ec);
    if (ec) status = base::IoError("{}: cannot rename {} over it: {}", path, tmp, ec.message());
  }
  if (!status.ok()) std::filesystem::remove(tmp, ec);
  return status;
}

}  // namespace

base::Status SaveTrace(const Trace& trace, const std::string& path) {
  base::Status check = CheckTrace(trace);
  if (!check.ok()) return check.WithContext("not saving " + path);
  const std::string tmp = path + ".tmp";
  std::error_code ec;
  std::filesystem::remove(tmp, ec);
  return PlaceStore(WriteStore(trace, tmp), tmp, path);
}

struct StoreWriter::State {
  std::string path;
  std::string tmp;
  std::optional<Database> db;
  RowBase at;
  bool open = true;
};

base::StatusOr<StoreWriter> StoreWriter::Create(const std::string& path) {
  auto state = std::make_unique<State>();
  state->path = path;
  state->tmp = path + ".tmp";
  std::error_code ec;
  std::filesystem::remove(state->tmp, ec);
  TELLER_ASSIGN_OR_RETURN(Database db, Database::Open(state->tmp, Database::Mode::kCreate));
  state->db.emplace(std::move(db));
  // Index building spills its sort to temporary files instead of memory.
  base::Status status = BeginStore(&*state->db, "FILE", 32768);
  if (!status.ok()) {
    (void)state->db->Close();
    std::filesystem::remove(state->tmp, ec);
    return status;
  }
  StoreWriter writer;
  writer.state_ = std::move(state);
  return writer;
}

StoreWriter::StoreWriter() = default;
StoreWriter::StoreWriter(StoreWriter&&) noexcept = default;
StoreWriter& StoreWriter::operator=(StoreWriter&&) noexcept = default;

StoreWriter::~StoreWriter() {
  if (!state_ || !state_->open) return;
  (void)state_->db->Close();
  std::error_code ec;
  std::filesystem::remove(state_->tmp, ec);
}

base::Status StoreWriter::Append(const Trace& window) {
  if (!state_ || !state_->open) return base::InvalidArgument("store writer is finished");
  RowBase& at = state_->at;
  TELLER_RETURN_IF_ERROR(WriteRowTables(window, at, &*state_->db));
  int64_t matches = 0;
  for (model::CollectiveMatchId match : window.collective_matches.match) {
    if (match.valid()) matches = std::max<int64_t>(matches, int64_t{match.value()} + 1);
  }
  at.event += static_cast<int64_t>(window.events.size());
  at.arg += static_cast<int64_t>(window.args.size());
  at.collective += static_cast<int64_t>(window.collectives.size());
  at.node += static_cast<int64_t>(window.nodes.size());
  at.step += static_cast<int64_t>(window.steps.size());
  at.step_request += static_cast<int64_t>(window.step_requests.size());
  at.match += matches;
  at.match_row += static_cast<int64_t>(window.collective_matches.size());
  return base::OkStatus();
}

int64_t StoreWriter::events_written() const { return state_ ? state_->at.event : 0; }
int64_t StoreWriter::steps_written() const { return state_ ? state_->at.step : 0; }
int64_t StoreWriter::nodes_written() const { return state_ ? state_->at.node : 0; }

base::Status StoreWriter::Finish(const Trace& shared) {
  if (!state_ || !state_->open) return base::InvalidArgument("store writer is finished");
  state_->open = false;
  base::Status status = WriteSharedTables(shared, &*state_->db);
  if (status.ok()) {
    status = EndStore(&*state_->db);
  } else {
    (void)state_->db->Close();
  }
  return PlaceStore(status, state_->tmp, state_->path);
}

base::StatusOr<Trace> LoadTrace(const std::string& path) {
  std::error_code ec;
  auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) {
    return base::NotFound("{}: no such teller store", path);
  }
  if (!std::filesystem::is_regular_file(status)) {
    return base::InvalidArgument("{}: not a file; expected a teller store", path);
  }
  uint64_t file_bytes = std::filesystem::file_size(path, ec);
  if (ec) return base::IoError("{}: cannot stat: {}", path, ec.message());
  TELLER_ASSIGN_OR_RETURN(Database db, Database::Open(path, Database::Mode::kReadOnly));
  return ReadStore(&db, file_bytes);
}

}  // namespace teller::store
