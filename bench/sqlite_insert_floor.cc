// The floor for the store write: a bare SQLite bulk insert of the rows a teller store
// holds. Reads every row of every table of STORE into memory, then inserts them into a
// new database with the same CREATE TABLE statements (no indexes), one prepared
// statement per table, in one transaction, with the store writer's pragmas (SaveTrace's:
// its page size, journal, sync, locking, temp store and 128 MiB page cache). Prints
// {"rows":N,"seconds":S} for the inserts alone.
//   sqlite_insert_floor STORE OUT
#include <sqlite3.h>

#include <cstdio>
#include <string>
#include <variant>
#include <vector>

#include "bench_util.h"

namespace {

using Cell = std::variant<std::monostate, int64_t, double, std::string>;

struct Table {
  std::string create, name;
  int columns = 0;
  std::vector<Cell> cells;  // row-major
};

std::vector<Table> ReadTables(sqlite3* db) {
  std::vector<Table> tables;
  sqlite3_stmt* list = nullptr;
  sqlite3_prepare_v2(db, "SELECT name, sql FROM sqlite_master WHERE type = 'table'", -1, &list,
                     nullptr);
  while (sqlite3_step(list) == SQLITE_ROW) {
    Table table;
    table.name = reinterpret_cast<const char*>(sqlite3_column_text(list, 0));
    table.create = reinterpret_cast<const char*>(sqlite3_column_text(list, 1));
    sqlite3_stmt* rows = nullptr;
    sqlite3_prepare_v2(db, ("SELECT * FROM " + table.name).c_str(), -1, &rows, nullptr);
    table.columns = sqlite3_column_count(rows);
    while (sqlite3_step(rows) == SQLITE_ROW) {
      for (int c = 0; c < table.columns; ++c) {
        switch (sqlite3_column_type(rows, c)) {
          case SQLITE_INTEGER:
            table.cells.emplace_back(sqlite3_column_int64(rows, c));
            break;
          case SQLITE_FLOAT:
            table.cells.emplace_back(sqlite3_column_double(rows, c));
            break;
          case SQLITE_NULL:
            table.cells.emplace_back(std::monostate{});
            break;
          default:
            table.cells.emplace_back(
                std::string(reinterpret_cast<const char*>(sqlite3_column_text(rows, c)),
                            static_cast<size_t>(sqlite3_column_bytes(rows, c))));
        }
      }
    }
    sqlite3_finalize(rows);
    tables.push_back(std::move(table));
  }
  sqlite3_finalize(list);
  return tables;
}

void Bind(sqlite3_stmt* insert, int column, const Cell& cell) {
  if (const auto* i = std::get_if<int64_t>(&cell)) {
    sqlite3_bind_int64(insert, column, *i);
  } else if (const auto* d = std::get_if<double>(&cell)) {
    sqlite3_bind_double(insert, column, *d);
  } else if (const auto* s = std::get_if<std::string>(&cell)) {
    sqlite3_bind_text(insert, column, s->data(), static_cast<int>(s->size()), SQLITE_STATIC);
  } else {
    sqlite3_bind_null(insert, column);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: sqlite_insert_floor STORE OUT\n");
    return 2;
  }
  sqlite3* source = nullptr;
  if (sqlite3_open_v2(argv[1], &source, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) return 1;
  const std::vector<Table> tables = ReadTables(source);
  sqlite3_close(source);
  std::remove(argv[2]);
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(argv[2], &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                      nullptr) != SQLITE_OK) {
    return 1;
  }
  sqlite3_exec(db,
               "PRAGMA page_size=4096; PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;"
               "PRAGMA locking_mode=EXCLUSIVE; PRAGMA temp_store=FILE; PRAGMA cache_size=-131072;",
               nullptr, nullptr, nullptr);
  for (const Table& table : tables)
    sqlite3_exec(db, table.create.c_str(), nullptr, nullptr, nullptr);
  uint64_t rows = 0;
  const double start = teller::bench::NowSeconds();
  sqlite3_exec(db, "BEGIN", nullptr, nullptr, nullptr);
  for (const Table& table : tables) {
    std::string sql = "INSERT INTO " + table.name + " VALUES(?";
    for (int c = 1; c < table.columns; ++c) sql += ",?";
    sql += ")";
    sqlite3_stmt* insert = nullptr;
    sqlite3_prepare_v2(db, sql.c_str(), -1, &insert, nullptr);
    for (size_t at = 0; at < table.cells.size(); at += static_cast<size_t>(table.columns)) {
      for (int c = 0; c < table.columns; ++c) Bind(insert, c + 1, table.cells[at + c]);
      sqlite3_step(insert);
      sqlite3_reset(insert);
      ++rows;
    }
    sqlite3_finalize(insert);
  }
  sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
  const double seconds = teller::bench::NowSeconds() - start;
  sqlite3_close(db);
  std::printf("{\"rows\": %llu, \"seconds\": %.4f}\n", static_cast<unsigned long long>(rows),
              seconds);
  return 0;
}
