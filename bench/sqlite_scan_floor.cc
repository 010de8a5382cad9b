// The floor for nsys import: a raw sqlite3_step scan reading every column of the
// tables teller imports. Prints {"rows":N,"seconds":S,"peak_rss_bytes":B}.
#include <sqlite3.h>

#include <cstdio>
#include <string>

#include "bench_util.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: sqlite_scan_floor FILE.sqlite\n");
    return 2;
  }
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(argv[1], &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) return 1;
  double start = teller::bench::NowSeconds();
  uint64_t rows = 0;
  int64_t checksum = 0;
  for (const char* table :
       {"StringIds", "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME",
        "CUPTI_ACTIVITY_KIND_DRIVER", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "NVTX_EVENTS", "ThreadNames"}) {
    sqlite3_stmt* statement = nullptr;
    std::string sql = std::string("SELECT * FROM ") + table;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &statement, nullptr) != SQLITE_OK) continue;
    int columns = sqlite3_column_count(statement);
    while (sqlite3_step(statement) == SQLITE_ROW) {
      for (int c = 0; c < columns; ++c) {
        if (sqlite3_column_type(statement, c) == SQLITE_TEXT) {
          checksum += sqlite3_column_bytes(statement, c);
        } else {
          checksum += sqlite3_column_int64(statement, c);
        }
      }
      ++rows;
    }
    sqlite3_finalize(statement);
  }
  double seconds = teller::bench::NowSeconds() - start;
  sqlite3_close(db);
  std::printf("{\"rows\":%lu,\"seconds\":%.6f,\"peak_rss_bytes\":%ld,\"checksum\":%ld}\n", rows,
              seconds, teller::bench::PeakRssBytes(), checksum);
  return 0;
}
