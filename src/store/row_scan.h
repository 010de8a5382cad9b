// Reads a table's rows in one sqlite3_step instead of one step per row: `SELECT
// teller_scan(?1, c0, ..., cN) FROM t NOT INDEXED` runs an aggregate function whose
// step receives each row's values (sqlite3_value, cheaper to read than sqlite3_column_*)
// and hands them to a RowSink bound to ?1. NOT INDEXED keeps the scan in rowid order
// even when an index covers the columns read.
#pragma once

#include <sqlite3.h>

#include <string_view>

#include "base/status.h"
#include "store/sqlite_db.h"

namespace teller::store {

// Receives a table's rows in rowid order. Row returns false to stop the scan (the sink
// then holds the reason).
class RowSink {
 public:
  virtual ~RowSink() = default;
  virtual bool Row(sqlite3_value** values, int count) = 0;
};

// Registers teller_scan on db's connection; once per connection, before ScanRows.
base::Status RegisterRowScan(Database* db);

// Hands every row of table (the comma-separated columns, in that order) to sink. A sink
// that stopped is no error here: the caller asks the sink why.
base::Status ScanRows(Database* db, std::string_view table, std::string_view columns,
                      RowSink* sink);

}  // namespace teller::store
