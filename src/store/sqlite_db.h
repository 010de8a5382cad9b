// Thin RAII wrappers over the sqlite3 C API for the store. Errors name the file.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace teller::store {

// A prepared statement, finalized on destruction.
class Statement {
 public:
  Statement() = default;
  explicit Statement(sqlite3_stmt* stmt) : stmt_(stmt) {}
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  Statement(Statement&& other) noexcept : stmt_(other.stmt_) { other.stmt_ = nullptr; }
  Statement& operator=(Statement&& other) noexcept;
  ~Statement() { sqlite3_finalize(stmt_); }

  sqlite3_stmt* get() const { return stmt_; }

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

// One open database file.
class Database {
 public:
  enum class Mode { kReadOnly, kCreate };

  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;
  Database(Database&& other) noexcept : db_(other.db_), path_(std::move(other.path_)) {
    other.db_ = nullptr;
  }
  ~Database() { sqlite3_close_v2(db_); }

  static base::StatusOr<Database> Open(const std::string& path, Mode mode);

  // Runs one or more statements that return no rows.
  base::Status Exec(const std::string& sql);
  base::StatusOr<Statement> Prepare(std::string_view sql);
  // Reads a single integer (a pragma or an aggregate); fails when there is no row.
  base::StatusOr<int64_t> QueryInt(std::string_view sql);
  // A status for sqlite result code rc: "PATH: what: sqlite's message".
  base::Status Error(int rc, std::string_view what) const;
  // Closes now and reports a failure to flush (writes must check this).
  base::Status Close();

  sqlite3* get() const { return db_; }
  const std::string& path() const { return path_; }

 private:
  Database(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}

  sqlite3* db_ = nullptr;
  std::string path_;
};

}  // namespace teller::store
