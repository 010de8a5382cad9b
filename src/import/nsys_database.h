// A read-only SQLite database and its prepared statements, for the Nsight Systems
// importer: schema discovery by name (tables, PRAGMA table_info) so the importer
// maps columns by name and tolerates the differences between nsys versions.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace teller::import {

// One prepared statement. Step() returns true while there is a row; after it
// returns false, status() tells a clean end from an error.
class NsysStatement {
 public:
  NsysStatement() = default;
  NsysStatement(sqlite3_stmt* statement, std::string path);
  NsysStatement(NsysStatement&& other) noexcept;
  NsysStatement& operator=(NsysStatement&& other) noexcept;
  NsysStatement(const NsysStatement&) = delete;
  NsysStatement& operator=(const NsysStatement&) = delete;
  ~NsysStatement();

  bool Step() {
    int rc = sqlite3_step(statement_);
    if (rc == SQLITE_ROW) return true;
    if (rc != SQLITE_DONE) last_error_ = rc;
    return false;
  }
  bool IsNull(int column) const { return sqlite3_column_type(statement_, column) == SQLITE_NULL; }
  int64_t Int(int column) const { return sqlite3_column_int64(statement_, column); }
  // One call for a nullable column: false when NULL, else sets *value.
  bool IntIfPresent(int column, int64_t* value) const {
    sqlite3_value* cell = sqlite3_column_value(statement_, column);
    if (sqlite3_value_type(cell) == SQLITE_NULL) return false;
    *value = sqlite3_value_int64(cell);
    return true;
  }
  // Valid until the next Step().
  std::string_view Text(int column) const;
  void BindInt(int index, int64_t value) { sqlite3_bind_int64(statement_, index, value); }
  void BindText(int index, std::string_view value);
  // Error status when a Step() failed, naming the file and the statement.
  base::Status status() const;

 private:
  sqlite3_stmt* statement_ = nullptr;
  std::string path_;
  int last_error_ = SQLITE_OK;
};

class NsysDatabase {
 public:
  // Opens read-only; a file that is not SQLite is an InvalidArgument naming it.
  static base::StatusOr<NsysDatabase> Open(const std::string& path);

  NsysDatabase(NsysDatabase&& other) noexcept;
  NsysDatabase& operator=(NsysDatabase&& other) noexcept;
  NsysDatabase(const NsysDatabase&) = delete;
  NsysDatabase& operator=(const NsysDatabase&) = delete;
  ~NsysDatabase();

  const std::string& path() const { return path_; }
  bool HasTable(std::string_view table) const { return tables_.count(table) > 0; }
  const std::set<std::string, std::less<>>& tables() const { return tables_; }
  // Column names of a table in declaration order (empty when the table is absent).
  base::StatusOr<std::vector<std::string>> Columns(std::string_view table) const;
  base::StatusOr<NsysStatement> Prepare(std::string_view sql) const;
  // Largest rowid of a table: its row count for nsys tables, read in O(log n).
  int64_t MaxRowId(std::string_view table) const;

 private:
  NsysDatabase(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}

  sqlite3* db_ = nullptr;
  std::string path_;
  std::set<std::string, std::less<>> tables_;
};

}  // namespace teller::import
