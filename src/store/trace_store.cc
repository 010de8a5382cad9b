#include "store/trace_store.h"

#include <fcntl.h>
#include <sys/stat.h>
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

#include "base/parallel_for.h"
#include "store/row_feed.h"
#include "store/row_scan.h"
#include "store/sqlite_db.h"
#include "store/store_schema.h"
#include "store/trace_check.h"

namespace teller::store {
namespace {

using model::Trace;

// ---------------------------------------------------------------------------
// Writing

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
// The column lists of model/trace_columns.h name these members as a column's Base.
struct RowBase {
  int64_t none = 0;  // never offset
  int64_t event = 0;
  int64_t arg = 0;
  int64_t collective = 0;
  int64_t node = 0;
  int64_t step = 0;
  int64_t step_request = 0;
  int64_t match = 0;      // collective match id
  int64_t match_row = 0;  // row of collective_matches
};

// How each column kind of model/trace_columns.h is filled.
template <typename T>
void BindValue(RowCells& row, T value, int64_t base) {
  row.Int(base + static_cast<int64_t>(value));
}
// An id of a window's table, stored as the row it became (base + id); NULL when invalid.
template <typename Id>
void BindRef(RowCells& row, Id id, int64_t base) {
  id.valid() ? row.Int(base + static_cast<int64_t>(id.value())) : row.Null();
}
template <typename E>
void BindEnum(RowCells& row, E value, int64_t /*base*/) {
  row.Text(EnumNames(value)[static_cast<size_t>(value)]);
}

// A table without derived columns.
struct NoDerivedColumns {};

// The args table's derived columns: the owning event and a double's value.
struct ArgDerivedColumns {
  ArgDerivedColumns(const Trace& t, const RowBase& at)
      : args(t.args),
        at(at),
        owner(OwnerOfRows(t.args.size(), t.events.args_begin, t.events.args_count)) {}

  void event(RowCells& row, size_t i) const {
    owner[i] >= 0 ? row.Int(at.event + owner[i]) : row.Null();
  }
  void double_value(RowCells& row, size_t i) const {
    if (args.type[i] == model::ArgType::kDouble) {
      double value;
      std::memcpy(&value, &args.int_value[i], sizeof(value));
      row.Real(value);  // for queries; int_value holds the exact bits
    } else {
      row.Null();
    }
  }

  const model::ArgTable& args;
  const RowBase& at;
  std::vector<int64_t> owner;
};

// Write<table>(t, at, db, derived) inserts one column table of model/trace_columns.h,
// its rows and references offset by at.
#define TELLER_COUNT_COLUMN(sql_name, field, Type, Kind, Target, Base) +1
#define TELLER_COUNT_DERIVED(sql_name, sql_type) +1
#define TELLER_BIND_COLUMN(sql_name, field, Type, Kind, Target, Base) \
  Bind##Kind(*row, table.field[i], at.Base);
#define TELLER_BIND_DERIVED(sql_name, sql_type) derived.sql_name(*row, i);
#define TELLER_DEFINE_WRITER(sql_table, member, Model, row_column, row_base, COLUMNS)   \
  template <typename Derived>                                                           \
  base::Status Write_##sql_table(const Trace& t, const RowBase& at, Database* db,       \
                                 const Derived& derived) {                              \
    const model::Model& table = t.member;                                               \
    constexpr int kColumns = 1 COLUMNS(TELLER_COUNT_COLUMN, TELLER_COUNT_DERIVED);      \
    static_assert(kColumns <= kMaxRowColumns);                                          \
    RowsOf rows(table.size(), [&](size_t i, RowCells* row) {                            \
      row->Int(at.row_base + static_cast<int64_t>(i));                                  \
      COLUMNS(TELLER_BIND_COLUMN, TELLER_BIND_DERIVED)                                  \
    });                                                                                 \
    return InsertRows(db, #sql_table, kColumns, rows, RowKeys::kConsecutive);           \
  }
TELLER_SHARED_TRACE_TABLES(TELLER_DEFINE_WRITER)
TELLER_ROW_TRACE_TABLES(TELLER_DEFINE_WRITER)
#undef TELLER_DEFINE_WRITER
#undef TELLER_BIND_DERIVED
#undef TELLER_BIND_COLUMN
#undef TELLER_COUNT_DERIVED
#undef TELLER_COUNT_COLUMN

// The tables that do not grow with events: meta, strings, processes, threads,
// templates, logs, stats, requests.
base::Status WriteSharedTables(const Trace& t, Database* db) {
  const std::pair<std::string_view, std::string> meta[] = {
      {"application", "teller"},
      {"schema_version", std::to_string(kSchemaVersion)},
      {"format", std::string(TraceFormatNames()[static_cast<size_t>(t.meta.format)])},
      {"sources", EncodeJsonStringArray(t.meta.sources)},
      {"notes", EncodeJsonStringArray(t.meta.notes)},
      {"labels_json", t.meta.labels_json},
      {"meta_json", t.meta.meta_json},
      {"reconstructed", t.reconstructed ? "1" : "0"},
  };
  TELLER_RETURN_IF_ERROR(
      InsertRows(db, "meta", 2, RowsOf(std::size(meta), [&](size_t i, RowCells* row) {
                   row->Text(meta[i].first).Text(meta[i].second);
                 })));
  TELLER_RETURN_IF_ERROR(
      InsertRows(db, "strings", 2, RowsOf(t.strings.size(), [&](size_t i, RowCells* row) {
                   row->Int(static_cast<int64_t>(i))
                       .Text(t.strings.Get(base::StringId(static_cast<uint32_t>(i))));
                 }),
                 RowKeys::kConsecutive));
  const RowBase at;
  const NoDerivedColumns none;
  TELLER_RETURN_IF_ERROR(Write_processes(t, at, db, none));
  TELLER_RETURN_IF_ERROR(Write_threads(t, at, db, none));
  TELLER_RETURN_IF_ERROR(Write_templates(t, at, db, none));
  TELLER_RETURN_IF_ERROR(Write_logs(t, at, db, none));
  std::vector<std::pair<std::string_view, const model::Stats::Entry*>> stats;
  for (const auto& [name, entry] : t.stats.entries()) stats.emplace_back(name, &entry);
  TELLER_RETURN_IF_ERROR(
      InsertRows(db, "stats", 3, RowsOf(stats.size(), [&](size_t i, RowCells* row) {
                   const model::Stats::Entry& entry = *stats[i].second;
                   row->Text(stats[i].first)
                       .Int(entry.value)
                       .Text(StatSeverityNames()[static_cast<size_t>(entry.severity)]);
                 })));
  return Write_requests(t, at, db, none);
}

// The tables that grow with events, their rows and references offset by at.
base::Status WriteRowTables(const Trace& t, const RowBase& at, Database* db) {
  const NoDerivedColumns none;
  TELLER_RETURN_IF_ERROR(Write_events(t, at, db, none));
  TELLER_RETURN_IF_ERROR(Write_args(t, at, db, ArgDerivedColumns(t, at)));
  TELLER_RETURN_IF_ERROR(Write_collectives(t, at, db, none));
  TELLER_RETURN_IF_ERROR(Write_nodes(t, at, db, none));
  TELLER_RETURN_IF_ERROR(Write_steps(t, at, db, none));
  std::vector<int64_t> owner =
      OwnerOfRows(t.step_requests.size(), t.steps.requests_begin, t.steps.requests_count);
  TELLER_RETURN_IF_ERROR(InsertRows(
      db, "step_requests", 3, RowsOf(t.step_requests.size(), [&](size_t i, RowCells* row) {
        row->Int(at.step_request + static_cast<int64_t>(i));
        owner[i] >= 0 ? row->Int(at.step + owner[i]) : row->Null();
        BindRef(*row, t.step_requests[i], 0);
      }),
      RowKeys::kConsecutive));
  return Write_collective_matches(t, at, db, none);
}

base::Status WriteTables(const Trace& t, Database* db) {
  TELLER_RETURN_IF_ERROR(WriteSharedTables(t, db));
  return WriteRowTables(t, RowBase{}, db);
}

// cache_kib: SQLite's page cache (a whole trace gets 128 MiB; the windowed writer,
// whose rows arrive in order, less, as part of its memory bound). temp_store=FILE: the
// index sorts keep their keys in one buffer up to the cache's size and spill to
// temporary files beyond it (with temp_store=MEMORY SQLite's sorter allocates each key
// apart, which made the indexes a quarter slower).
base::Status BeginStore(Database* db, int64_t cache_kib) {
  TELLER_RETURN_IF_ERROR(RegisterRowFeed(db));
  TELLER_RETURN_IF_ERROR(db->Exec(
      fmt::format("PRAGMA page_size=4096; PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;"
                  "PRAGMA locking_mode=EXCLUSIVE; PRAGMA temp_store=FILE; PRAGMA cache_size=-{};"
                  "PRAGMA application_id={}; PRAGMA user_version={};",
                  cache_kib, kApplicationId, kSchemaVersion)));
  TELLER_RETURN_IF_ERROR(db->Exec("BEGIN"));
  return db->Exec(CreateTablesSql());
}

base::Status EndStore(Database* db) {
  TELLER_RETURN_IF_ERROR(db->Exec(kCreateIndexes));
  TELLER_RETURN_IF_ERROR(db->Exec(kCreateViews));
  TELLER_RETURN_IF_ERROR(db->Exec("COMMIT"));
  return db->Close();
}

base::Status WriteStore(const Trace& trace, const std::string& path) {
  TELLER_ASSIGN_OR_RETURN(Database db, Database::Open(path, Database::Mode::kCreate));
  TELLER_RETURN_IF_ERROR(BeginStore(&db, 131072));
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
class RowReader final : public RowSink {
 public:
  static base::StatusOr<RowReader> Open(Database* db, std::string_view table,
                                        std::string_view columns) {
    std::string_view key = columns.substr(0, columns.find(','));
    TELLER_ASSIGN_OR_RETURN(
        int64_t rows,
        db->QueryInt(fmt::format("SELECT coalesce(max({})+1, 0) FROM {}", key, table)));
    return RowReader(db, table, columns, rows);
  }

  // Rows the table claims (max row index + 1); verified by Scan.
  int64_t rows() const { return rows_; }
  // A reserve size no larger than the file could hold, whatever the table claims.
  size_t ReserveSize(uint64_t file_bytes) const {
    return static_cast<size_t>(std::min<uint64_t>(rows_, file_bytes / 2));
  }

  // Calls read_row(*this) for each row in order, then fails unless every claimed row
  // was read and read well.
  template <typename ReadRow>
  base::Status Scan(ReadRow read_row) {
    read_row_ = &read_row;
    call_ = [](void* fn, RowReader& reader) { (*static_cast<ReadRow*>(fn))(reader); };
    base::Status scanned = ScanRows(db_, table_, columns_, this);
    if (!scanned.ok()) return scanned;
    if (status_.ok() && row_ != rows_) {
      return base::DataLoss("{}: table {}: read {} rows, expected {}", db_->path(), table_, row_,
                            rows_);
    }
    return status_;
  }

  bool Row(sqlite3_value** values, int count) override {
    values_ = values;
    current_ = row_;
    if (count != static_cast<int>(names_.size()) || Type(0) != SQLITE_INTEGER ||
        sqlite3_value_int64(values_[0]) != row_) {
      Fail(0, fmt::format("row index {}", row_));
      return false;
    }
    ++row_;
    call_(read_row_, *this);
    return status_.ok();
  }

  int64_t Int(int col) {
    if (Type(col) != SQLITE_INTEGER) {
      Fail(col, "an integer");
      return 0;
    }
    return sqlite3_value_int64(values_[col]);
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
    if (Type(col) == SQLITE_NULL) return Id::Invalid();
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
    if (Type(col) != SQLITE_TEXT) {
      Fail(col, "text");
      return {};
    }
    const char* text = reinterpret_cast<const char*>(sqlite3_value_text(values_[col]));
    return std::string_view(text, static_cast<size_t>(sqlite3_value_bytes(values_[col])));
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
  RowReader(Database* db, std::string_view table, std::string_view columns, int64_t rows)
      : db_(db), table_(table), columns_(columns), rows_(rows) {
    for (std::string_view rest = columns; !rest.empty();) {
      size_t comma = rest.find(',');
      std::string_view name = rest.substr(0, comma);
      while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
      names_.push_back(name);
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
  }

  int Type(int col) const { return sqlite3_value_type(values_[col]); }

  void Fail(int col, std::string_view expected) {
    if (!status_.ok()) return;
    status_ = base::DataLoss("{}: table {} row {} column {}: expected {}", db_->path(), table_,
                             current_, names_[static_cast<size_t>(col)], expected);
  }

  Database* db_;
  std::string_view table_;
  std::string_view columns_;
  std::vector<std::string_view> names_;
  int64_t rows_;
  int64_t row_ = 0;      // rows read so far
  int64_t current_ = 0;  // the row being read
  sqlite3_value** values_ = nullptr;
  void* read_row_ = nullptr;
  void (*call_)(void* fn, RowReader& reader) = nullptr;
  base::Status status_;
};

struct LoadContext {
  Database* db;
  uint64_t file_bytes;
};

// How each column kind of model/trace_columns.h is read.
template <typename T>
T ReadValue(RowReader& r, int col) {
  if constexpr (sizeof(T) == sizeof(int64_t)) {
    return r.Int(col);
  } else {
    return r.Narrow<T>(col);
  }
}
template <typename Id>
Id ReadRef(RowReader& r, int col) {
  return r.Ref<Id>(col);
}
template <typename E>
E ReadEnum(RowReader& r, int col) {
  return r.Enum<E>(col, EnumNames(E{}));
}

// Read_<table>(ctx, t) loads one column table of model/trace_columns.h (derived
// columns are not read back).
#define TELLER_NAME_COLUMN(sql_name, field, Type, Kind, Target, Base) ", " #sql_name
#define TELLER_RESERVE_COLUMN(sql_name, field, Type, Kind, Target, Base) \
  table.field.reserve(reserve);
#define TELLER_READ_COLUMN(sql_name, field, Type, Kind, Target, Base) \
  table.field.push_back(Read##Kind<decltype(table.field)::value_type>(r, ++col));
#define TELLER_SKIP_DERIVED(sql_name, sql_type)
#define TELLER_DEFINE_READER(sql_table, member, Model, row_column, row_base, COLUMNS)   \
  base::Status Read_##sql_table(LoadContext& ctx, Trace* t) {                           \
    TELLER_ASSIGN_OR_RETURN(                                                            \
        RowReader r,                                                                    \
        RowReader::Open(ctx.db, #sql_table,                                             \
                        #row_column COLUMNS(TELLER_NAME_COLUMN, TELLER_SKIP_DERIVED))); \
    model::Model& table = t->member;                                                    \
    const size_t reserve = r.ReserveSize(ctx.file_bytes);                               \
    COLUMNS(TELLER_RESERVE_COLUMN, TELLER_SKIP_DERIVED)                                 \
    return r.Scan([&](RowReader& r) {                                                   \
      int col = 0;                                                                      \
      COLUMNS(TELLER_READ_COLUMN, TELLER_SKIP_DERIVED)                                  \
    });                                                                                 \
  }
TELLER_SHARED_TRACE_TABLES(TELLER_DEFINE_READER)
TELLER_ROW_TRACE_TABLES(TELLER_DEFINE_READER)
#undef TELLER_DEFINE_READER
#undef TELLER_SKIP_DERIVED
#undef TELLER_READ_COLUMN
#undef TELLER_RESERVE_COLUMN
#undef TELLER_NAME_COLUMN

base::Status ReadStrings(LoadContext& ctx, Trace* t) {
  TELLER_ASSIGN_OR_RETURN(RowReader r, RowReader::Open(ctx.db, "strings", "id, value"));
  int64_t id = -1;
  base::Status status;
  TELLER_RETURN_IF_ERROR(r.Scan([&](RowReader& r) {
    std::string_view value = r.Text(1);
    ++id;
    if (!status.ok()) return;
    if (id == 0) {
      if (!value.empty()) {
        status = base::DataLoss("{}: table strings row 0: expected the empty string",
                                ctx.db->path());
      }
      return;
    }
    base::StringId got = t->strings.Intern(value);
    if (static_cast<int64_t>(got.value()) != id) {
      status = base::DataLoss("{}: table strings row {}: duplicate of row {}", ctx.db->path(), id,
                              got.value());
    }
  }));
  return status;
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

base::Status ReadStepRequests(LoadContext& ctx, Trace* t) {
  TELLER_ASSIGN_OR_RETURN(RowReader r, RowReader::Open(ctx.db, "step_requests", "slot, request"));
  return r.Scan([&](RowReader& r) { t->step_requests.push_back(r.Ref<model::RequestIndex>(1)); });
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

// The tables read on the first connection: the strings (interned in id order) and the
// tables beside the events. Each reader fills only its own table.
base::Status ReadFirstTables(LoadContext& ctx, Trace* t) {
  TELLER_RETURN_IF_ERROR(ReadMeta(ctx, t));
  TELLER_RETURN_IF_ERROR(ReadStrings(ctx, t));
  TELLER_RETURN_IF_ERROR(Read_processes(ctx, t));
  TELLER_RETURN_IF_ERROR(Read_threads(ctx, t));
  TELLER_RETURN_IF_ERROR(Read_events(ctx, t));
  TELLER_RETURN_IF_ERROR(Read_templates(ctx, t));
  TELLER_RETURN_IF_ERROR(Read_logs(ctx, t));
  TELLER_RETURN_IF_ERROR(ReadStats(ctx, t));
  TELLER_RETURN_IF_ERROR(Read_steps(ctx, t));
  return Read_requests(ctx, t);
}

// The tables read on the second connection, about as many values as the first's.
base::Status ReadSecondTables(LoadContext& ctx, Trace* t) {
  TELLER_RETURN_IF_ERROR(Read_args(ctx, t));
  TELLER_RETURN_IF_ERROR(Read_collectives(ctx, t));
  TELLER_RETURN_IF_ERROR(Read_nodes(ctx, t));
  TELLER_RETURN_IF_ERROR(ReadStepRequests(ctx, t));
  return Read_collective_matches(ctx, t);
}

base::Status CheckStoreHeader(Database* db, uint64_t file_bytes) {
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
  return base::OkStatus();
}

base::Status BeginRead(Database* db) {
  TELLER_RETURN_IF_ERROR(db->Exec("PRAGMA mmap_size=1073741824; PRAGMA cache_size=-131072"));
  TELLER_RETURN_IF_ERROR(RegisterRowScan(db));
  return db->Exec("BEGIN");
}

// Reads the store on db, and on second (the same file, or null) beside it: the two
// halves of the tables on two threads where the process may run two.
base::StatusOr<Trace> ReadStore(Database* db, Database* second, uint64_t file_bytes) {
  TELLER_RETURN_IF_ERROR(CheckStoreHeader(db, file_bytes));
  TELLER_RETURN_IF_ERROR(BeginRead(db));
  if (second != nullptr && !BeginRead(second).ok()) second = nullptr;
  Trace trace;
  LoadContext first_ctx{db, file_bytes};
  LoadContext second_ctx{second ? second : db, file_bytes};
  base::Status halves[2];
  base::ParallelFor(second ? 2 : 1, 0, [&](size_t begin, size_t end) {
    for (size_t half = begin; half < end; ++half) {
      halves[half] = half == 0 ? ReadFirstTables(first_ctx, &trace)
                               : ReadSecondTables(second_ctx, &trace);
    }
  });
  if (second == nullptr) halves[1] = ReadSecondTables(first_ctx, &trace);
  for (const base::Status& status : halves) TELLER_RETURN_IF_ERROR(status);
  TELLER_RETURN_IF_ERROR(db->Exec("COMMIT"));
  if (second != nullptr) TELLER_RETURN_IF_ERROR(second->Exec("COMMIT"));
  base::Status check = CheckTrace(trace);
  if (!check.ok()) {
    return base::DataLoss("{}: inconsistent store: {}", db->path(), check.message());
  }
  return trace;
}

// The file path names now (device and inode), to tell whether it was replaced.
std::optional<std::pair<dev_t, ino_t>> FileIdentity(const std::string& path) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) return std::nullopt;
  return std::make_pair(info.st_dev, info.st_ino);
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
  base::Status status = BeginStore(&*state->db, 32768);
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
  const auto identity = FileIdentity(path);
  TELLER_ASSIGN_OR_RETURN(Database db, Database::Open(path, Database::Mode::kReadOnly));
  // A second connection for a second thread, used only if path still names the file the
  // first one opened (a store replaced by a rename in between would mix two stores).
  std::optional<Database> second;
  if (base::ThreadCount(0) > 1) {
    auto opened = Database::Open(path, Database::Mode::kReadOnly);
    if (opened.ok() && identity && FileIdentity(path) == identity) second.emplace(std::move(*opened));
  }
  return ReadStore(&db, second ? &*second : nullptr, file_bytes);
}

}  // namespace teller::store
