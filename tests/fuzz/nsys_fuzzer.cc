// Nsight Systems SQLite export (src/import/nsys_importer, nsys_database). An input
// that starts with the SQLite header is written to a temporary file as is and
// imported. Any other input is taken as SQL (the seed is tests/fixtures/nsys/
// tiny_export.sql): it runs in an in-memory database under tight limits, and the
// database's bytes are written to the file instead, so mutations reach the importer
// as odd tables, columns, types and values, not only as a damaged b-tree.
#include <sqlite3.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "import/importer.h"

namespace {

using namespace teller;

constexpr std::string_view kSqliteHeader("SQLite format 3\0", 16);

int StopLongQueries(void* steps) {
  return ++*static_cast<int*>(steps) > 20000;  // about 20M VM steps
}

// SQL that could touch other files or load code is not run.
bool SafeSql(std::string_view sql) {
  std::string lower(sql);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* word : {"attach", "vacuum"}) {
    if (lower.find(word) != std::string::npos) return false;
  }
  return true;
}

int Authorize(void*, int action, const char*, const char*, const char*, const char*) {
  return action == SQLITE_ATTACH || action == SQLITE_DETACH ? SQLITE_DENY : SQLITE_OK;
}

// Runs the SQL in memory and returns the database file's bytes; empty when the SQL
// makes nothing.
std::string DatabaseFromSql(std::string_view sql) {
  if (!SafeSql(sql)) return {};
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(":memory:", &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_MEMORY, nullptr) !=
      SQLITE_OK) {
    sqlite3_close(db);
    return {};
  }
  sqlite3_limit(db, SQLITE_LIMIT_ATTACHED, 0);
  sqlite3_limit(db, SQLITE_LIMIT_LENGTH, 1 << 20);
  sqlite3_limit(db, SQLITE_LIMIT_SQL_LENGTH, 1 << 20);
  sqlite3_set_authorizer(db, Authorize, nullptr);
  int steps = 0;
  sqlite3_progress_handler(db, 1000, StopLongQueries, &steps);
  sqlite3_exec(db, "PRAGMA page_size = 512;", nullptr, nullptr, nullptr);
  std::string text(sql);                                      // NUL-terminated
  sqlite3_exec(db, text.c_str(), nullptr, nullptr, nullptr);  // errors keep what ran
  std::string bytes;
  sqlite3_int64 size = 0;
  if (unsigned char* image = sqlite3_serialize(db, "main", &size, 0)) {
    if (size <= (64 << 20)) bytes.assign(reinterpret_cast<const char*>(image), size);
    sqlite3_free(image);
  }
  sqlite3_close(db);
  return bytes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  std::string file_bytes;
  if (input.substr(0, kSqliteHeader.size()) == kSqliteHeader) {
    file_bytes.assign(input);
  } else {
    file_bytes = DatabaseFromSql(input);
    if (file_bytes.empty()) return 0;
  }
  static const std::string path = fuzz::ScratchDir() + "/export.sqlite";
  // A WAL-mode header makes SQLite keep side files; none may carry over between inputs.
  for (const char* suffix : {"-wal", "-shm", "-journal"}) std::remove((path + suffix).c_str());
  fuzz::WriteBytes(path, file_bytes);
  model::Trace trace;
  base::Status status = import::ImportNsys(path, import::ImportOptions(), &trace);
  fuzz::CheckImportedTrace(trace, status);
  return 0;
}
