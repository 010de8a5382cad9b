#include "store/sqlite_db.h"

namespace teller::store {

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    sqlite3_finalize(stmt_);
    stmt_ = other.stmt_;
    other.stmt_ = nullptr;
  }
  return *this;
}

base::StatusOr<Database> Database::Open(const std::string& path, Mode mode) {
  int flags =
      mode == Mode::kCreate ? (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) : SQLITE_OPEN_READONLY;
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string message = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close_v2(db);
    return base::IoError("{}: cannot open as SQLite: {}", path, message);
  }
  sqlite3_extended_result_codes(db, 1);
  return Database(db, path);
}

base::Status Database::Error(int rc, std::string_view what) const {
  std::string message = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
  switch (rc & 0xff) {
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return base::DataLoss("{}: {}: corrupt or not a teller store ({})", path_, what, message);
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_FULL:
    case SQLITE_PERM:
    case SQLITE_READONLY:
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_NOMEM:
      return base::IoError("{}: {}: {}", path_, what, message);
    default:
      // Schema mismatches (no such table or column) and the like.
      return base::DataLoss("{}: {}: {}", path_, what, message);
  }
}

base::Status Database::Exec(const std::string& sql) {
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr);
  if (rc == SQLITE_OK) return base::OkStatus();
  // Name the statement by its first words ("CREATE TABLE events").
  std::string head = sql.substr(sql.find_first_not_of(" \n"));
  head = head.substr(0, head.find_first_of("(;\n"));
  return Error(rc, fmt::format("running '{}'", head));
}

base::StatusOr<Statement> Database::Prepare(std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(stmt);
    return Error(rc, fmt::format("preparing '{}'", sql.substr(0, 60)));
  }
  return Statement(stmt);
}

base::StatusOr<int64_t> Database::QueryInt(std::string_view sql) {
  TELLER_ASSIGN_OR_RETURN(Statement stmt, Prepare(sql));
  int rc = sqlite3_step(stmt.get());
  if (rc != SQLITE_ROW) {
    if (rc == SQLITE_DONE) return base::DataLoss("{}: '{}' returned no row", path_, sql);
    return Error(rc, fmt::format("running '{}'", sql));
  }
  return static_cast<int64_t>(sqlite3_column_int64(stmt.get(), 0));
}

base::Status Database::Close() {
  if (!db_) return base::OkStatus();
  int rc = sqlite3_close(db_);
  if (rc != SQLITE_OK) {
    base::Status status = Error(rc, "closing");
    sqlite3_close_v2(db_);
    db_ = nullptr;
    return status;
  }
  db_ = nullptr;
  return base::OkStatus();
}

}  // namespace teller::store
