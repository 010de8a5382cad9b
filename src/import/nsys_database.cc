#include "import/nsys_database.h"

#include <filesystem>
#include <utility>

#include "base/file_util.h"

namespace teller::import {
namespace {

// For a file with a valid SQLite header that SQLite cannot read: when the header's
// page count says the file should be longer, the words for it ("cut short ..."), else "".
std::string DescribeCutShort(const std::string& path) {
  base::StatusOr<std::string> head = base::ReadHead(path, 100);
  if (!head.ok() || head->size() < 100 ||
      head->compare(0, 16, std::string_view("SQLite format 3\0", 16)) != 0) {
    return "";
  }
  auto byte = [&](size_t i) {
    return static_cast<uint64_t>(static_cast<unsigned char>((*head)[i]));
  };
  uint64_t page_bytes = byte(16) << 8 | byte(17);
  if (page_bytes == 1) page_bytes = 65536;
  uint64_t pages = byte(28) << 24 | byte(29) << 16 | byte(30) << 8 | byte(31);
  std::error_code ec;
  uint64_t size = std::filesystem::file_size(path, ec);
  if (ec || pages == 0 || size >= pages * page_bytes) return "";
  return fmt::format(
      "cut short at byte {}: the SQLite header expects {} pages of {} bytes ({} bytes)", size,
      pages, page_bytes, pages * page_bytes);
}

}  // namespace

NsysStatement::NsysStatement(sqlite3_stmt* statement, std::string path)
    : statement_(statement), path_(std::move(path)) {}

NsysStatement::NsysStatement(NsysStatement&& other) noexcept
    : statement_(std::exchange(other.statement_, nullptr)),
      path_(std::move(other.path_)),
      last_error_(other.last_error_) {}

NsysStatement& NsysStatement::operator=(NsysStatement&& other) noexcept {
  if (this != &other) {
    sqlite3_finalize(statement_);
    statement_ = std::exchange(other.statement_, nullptr);
    path_ = std::move(other.path_);
    last_error_ = other.last_error_;
  }
  return *this;
}

NsysStatement::~NsysStatement() { sqlite3_finalize(statement_); }

std::string_view NsysStatement::Text(int column) const {
  const unsigned char* text = sqlite3_column_text(statement_, column);
  if (text == nullptr) return {};
  return std::string_view(reinterpret_cast<const char*>(text),
                          static_cast<size_t>(sqlite3_column_bytes(statement_, column)));
}

void NsysStatement::BindText(int index, std::string_view value) {
  sqlite3_bind_text(statement_, index, value.data(), static_cast<int>(value.size()),
                    SQLITE_TRANSIENT);
}

base::Status NsysStatement::status() const {
  if (last_error_ == SQLITE_OK) return base::OkStatus();
  return base::DataLoss("{}: reading rows of \"{}\" failed: {}", path_, sqlite3_sql(statement_),
                        sqlite3_errstr(last_error_));
}

base::StatusOr<NsysDatabase> NsysDatabase::Open(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return base::NotFound("{}: no such file", path);
  if (std::filesystem::is_directory(path, ec)) {
    return base::InvalidArgument("{}: is a directory, expected an Nsight Systems SQLite export",
                                 path);
  }
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string message = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return base::IoError("{}: cannot open as SQLite: {}", path, message);
  }
  NsysDatabase database(db, path);
  // Map the file instead of copying each page through read(); harmless if unsupported.
  sqlite3_exec(db, "PRAGMA mmap_size = 68719476736", nullptr, nullptr, nullptr);
  // The first read of the schema is where a file that is not SQLite fails.
  sqlite3_stmt* statement = nullptr;
  rc = sqlite3_prepare_v2(db, "SELECT name FROM sqlite_master WHERE type = 'table'", -1, &statement,
                          nullptr);
  if (rc != SQLITE_OK) {
    std::string cut_short = DescribeCutShort(path);
    if (!cut_short.empty()) {
      return base::DataLoss("{}: {}; its schema is unreadable: {}", path, cut_short,
                            sqlite3_errmsg(db));
    }
    return base::InvalidArgument(
        "{}: not an SQLite database (offset 0: expected the header \"SQLite format 3\"): {}", path,
        sqlite3_errmsg(db));
  }
  while ((rc = sqlite3_step(statement)) == SQLITE_ROW) {
    const unsigned char* name = sqlite3_column_text(statement, 0);
    if (name) database.tables_.emplace(reinterpret_cast<const char*>(name));
  }
  sqlite3_finalize(statement);
  if (rc != SQLITE_DONE) {
    std::string cut_short = DescribeCutShort(path);
    if (!cut_short.empty()) {
      return base::DataLoss("{}: {}; its schema is unreadable: {}", path, cut_short,
                            sqlite3_errstr(rc));
    }
    return base::InvalidArgument("{}: not a readable SQLite database: {}", path,
                                 sqlite3_errstr(rc));
  }
  return database;
}

NsysDatabase::NsysDatabase(NsysDatabase&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)),
      path_(std::move(other.path_)),
      tables_(std::move(other.tables_)) {}

NsysDatabase& NsysDatabase::operator=(NsysDatabase&& other) noexcept {
  if (this != &other) {
    sqlite3_close(db_);
    db_ = std::exchange(other.db_, nullptr);
    path_ = std::move(other.path_);
    tables_ = std::move(other.tables_);
  }
  return *this;
}

NsysDatabase::~NsysDatabase() { sqlite3_close(db_); }

base::StatusOr<NsysStatement> NsysDatabase::Prepare(std::string_view sql) const {
  sqlite3_stmt* statement = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &statement, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(statement);
    return base::InvalidArgument("{}: cannot prepare \"{}\": {}", path_, sql, sqlite3_errmsg(db_));
  }
  return NsysStatement(statement, path_);
}

base::StatusOr<std::vector<std::string>> NsysDatabase::Columns(std::string_view table) const {
  std::vector<std::string> columns;
  if (!HasTable(table)) return columns;
  // Table names come from sqlite_master; quote them anyway.
  TELLER_ASSIGN_OR_RETURN(NsysStatement info,
                          Prepare(fmt::format("PRAGMA table_info(\"{}\")", table)));
  while (info.Step()) columns.emplace_back(info.Text(1));
  TELLER_RETURN_IF_ERROR(info.status());
  return columns;
}

int64_t NsysDatabase::MaxRowId(std::string_view table) const {
  if (!HasTable(table)) return 0;
  auto statement = Prepare(fmt::format("SELECT max(rowid) FROM \"{}\"", table));
  if (!statement.ok() || !statement->Step()) return 0;
  return statement->Int(0);
}

}  // namespace teller::import
