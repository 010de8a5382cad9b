#include "store/row_feed.h"

#include <string>

#include "fmt/format.h"

namespace teller::store {
namespace {

constexpr char kModuleName[] = "teller_rows";
constexpr char kFeedPointerType[] = "teller_row_source";
// The hidden column that takes the RowSource argument, after the value columns.
constexpr int kSourceColumn = kMaxRowColumns;

std::string DeclareSql() {
  std::string sql = "CREATE TABLE x(";
  for (int c = 0; c < kMaxRowColumns; ++c) sql += fmt::format("c{}, ", c);
  return sql + "source HIDDEN)";
}

// What ?1 of teller_rows(?1) points to.
struct Feed {
  const RowSource* source;
  RowKeys keys;
};

struct Cursor {
  sqlite3_vtab_cursor base{};  // first, as SQLite expects
  const RowSource* source = nullptr;
  bool number_rows = false;  // RowKeys::kConsecutive: keys after the first row are NULL
  size_t row = 0;
  bool filled = false;  // cells holds row's values
  RowCells cells;
};

Cursor* AsCursor(sqlite3_vtab_cursor* cursor) { return reinterpret_cast<Cursor*>(cursor); }

int Connect(sqlite3* db, void* /*aux*/, int /*argc*/, const char* const* /*argv*/,
            sqlite3_vtab** vtab, char** /*error*/) {
  static const std::string* const kDeclare = new std::string(DeclareSql());
  int rc = sqlite3_declare_vtab(db, kDeclare->c_str());
  if (rc != SQLITE_OK) return rc;
  *vtab = static_cast<sqlite3_vtab*>(sqlite3_malloc(sizeof(sqlite3_vtab)));
  if (*vtab == nullptr) return SQLITE_NOMEM;
  **vtab = sqlite3_vtab{};
  return SQLITE_OK;
}

int Disconnect(sqlite3_vtab* vtab) {
  sqlite3_free(vtab);
  return SQLITE_OK;
}

// The only plan: the source argument given, rows read in order.
int BestIndex(sqlite3_vtab* /*vtab*/, sqlite3_index_info* info) {
  for (int i = 0; i < info->nConstraint; ++i) {
    const auto& constraint = info->aConstraint[i];
    if (constraint.iColumn != kSourceColumn || constraint.op != SQLITE_INDEX_CONSTRAINT_EQ) {
      continue;
    }
    if (!constraint.usable) return SQLITE_CONSTRAINT;
    info->aConstraintUsage[i].argvIndex = 1;
    info->aConstraintUsage[i].omit = 1;
    info->estimatedCost = 1;
    return SQLITE_OK;
  }
  return SQLITE_CONSTRAINT;
}

int Open(sqlite3_vtab* /*vtab*/, sqlite3_vtab_cursor** cursor) {
  *cursor = &(new Cursor)->base;
  return SQLITE_OK;
}

int Close(sqlite3_vtab_cursor* cursor) {
  delete AsCursor(cursor);
  return SQLITE_OK;
}

int Filter(sqlite3_vtab_cursor* vcursor, int /*idx_num*/, const char* /*idx_str*/, int argc,
           sqlite3_value** argv) {
  Cursor* cursor = AsCursor(vcursor);
  const auto* feed =
      argc == 1 ? static_cast<const Feed*>(sqlite3_value_pointer(argv[0], kFeedPointerType))
                : nullptr;
  cursor->source = feed ? feed->source : nullptr;
  cursor->number_rows = feed && feed->keys == RowKeys::kConsecutive;
  cursor->row = 0;
  cursor->filled = false;
  return SQLITE_OK;
}

int Next(sqlite3_vtab_cursor* vcursor) {
  Cursor* cursor = AsCursor(vcursor);
  ++cursor->row;
  cursor->filled = false;
  return SQLITE_OK;
}

int Eof(sqlite3_vtab_cursor* vcursor) {
  const Cursor* cursor = AsCursor(vcursor);
  return cursor->source == nullptr || cursor->row >= cursor->source->rows();
}

int Column(sqlite3_vtab_cursor* vcursor, sqlite3_context* ctx, int column) {
  Cursor* cursor = AsCursor(vcursor);
  if (column == 0 && cursor->number_rows && cursor->row > 0) {
    sqlite3_result_null(ctx);  // SQLite gives the row the next rowid
    return SQLITE_OK;
  }
  if (!cursor->filled) {
    cursor->cells.Clear();
    cursor->source->FillRow(cursor->row, &cursor->cells);
    cursor->filled = true;
  }
  cursor->cells.Result(column, ctx);
  return SQLITE_OK;
}

int Rowid(sqlite3_vtab_cursor* vcursor, sqlite3_int64* rowid) {
  *rowid = static_cast<sqlite3_int64>(AsCursor(vcursor)->row);
  return SQLITE_OK;
}

// Eponymous-only (no xCreate): usable as teller_rows(?) without a schema entry.
const sqlite3_module kModule = {
    .iVersion = 0,
    .xCreate = nullptr,
    .xConnect = Connect,
    .xBestIndex = BestIndex,
    .xDisconnect = Disconnect,
    .xDestroy = Disconnect,
    .xOpen = Open,
    .xClose = Close,
    .xFilter = Filter,
    .xNext = Next,
    .xEof = Eof,
    .xColumn = Column,
    .xRowid = Rowid,
    .xUpdate = nullptr,
    .xBegin = nullptr,
    .xSync = nullptr,
    .xCommit = nullptr,
    .xRollback = nullptr,
    .xFindFunction = nullptr,
    .xRename = nullptr,
    .xSavepoint = nullptr,
    .xRelease = nullptr,
    .xRollbackTo = nullptr,
    .xShadowName = nullptr,
};

std::string InsertSql(std::string_view table, int columns) {
  std::string sql = fmt::format("INSERT INTO {} SELECT c0", table);
  for (int c = 1; c < columns; ++c) sql += fmt::format(", c{}", c);
  return sql + fmt::format(" FROM {}(?1)", kModuleName);
}

// Fails unless table's last key is first_key + rows - 1, as RowKeys::kConsecutive promised.
base::Status CheckConsecutiveKeys(Database* db, std::string_view table, const RowSource& source) {
  RowCells first;
  source.Fill(0, &first);
  const int64_t expected = first.IntAt(0) + static_cast<int64_t>(source.rows()) - 1;
  TELLER_ASSIGN_OR_RETURN(int64_t last,
                          db->QueryInt(fmt::format("SELECT max(rowid) FROM {}", table)));
  if (last == expected) return base::OkStatus();
  return base::Internal("{}: table {}: rows numbered up to {}, expected {}", db->path(), table,
                        last, expected);
}

}  // namespace

int64_t RowCells::IntAt(int column) const {
  if (column >= count_ || column >= kMaxRowColumns) return 0;
  return cells_[column].type == Type::kInt ? cells_[column].int_value : 0;
}

void RowCells::Result(int column, sqlite3_context* ctx) const {
  if (column >= count_ || column >= kMaxRowColumns) {
    sqlite3_result_null(ctx);
    return;
  }
  const Cell& cell = cells_[column];
  switch (cell.type) {
    case Type::kInt:
      sqlite3_result_int64(ctx, cell.int_value);
      return;
    case Type::kReal:
      sqlite3_result_double(ctx, cell.real_value);
      return;
    case Type::kText:
      sqlite3_result_text(ctx, cell.text, cell.size, SQLITE_STATIC);
      return;
    case Type::kNull:
      sqlite3_result_null(ctx);
      return;
  }
}

base::Status RegisterRowFeed(Database* db) {
  int rc = sqlite3_create_module_v2(db->get(), kModuleName, &kModule, nullptr, nullptr);
  if (rc != SQLITE_OK) return db->Error(rc, "registering the row feed");
  return base::OkStatus();
}

base::Status InsertRows(Database* db, std::string_view table, int columns, const RowSource& source,
                        RowKeys keys) {
  if (columns < 1 || columns > kMaxRowColumns) {
    return base::InvalidArgument("{}: table {} has {} columns; the row feed takes 1 to {}",
                                 db->path(), table, columns, kMaxRowColumns);
  }
  if (source.rows() == 0) return base::OkStatus();
  TELLER_ASSIGN_OR_RETURN(Statement insert, db->Prepare(InsertSql(table, columns)));
  Feed feed{&source, keys};
  sqlite3_bind_pointer(insert.get(), 1, &feed, kFeedPointerType, nullptr);
  int rc = sqlite3_step(insert.get());
  if (rc == SQLITE_DONE) {
    return keys == RowKeys::kConsecutive ? CheckConsecutiveKeys(db, table, source)
                                         : base::OkStatus();
  }
  return db->Error(rc, fmt::format("writing row {} of table {}", source.last_row(), table));
}

}  // namespace teller::store
