// Feeds a table's rows to SQLite in one statement instead of one statement per row:
// `INSERT INTO t SELECT c0, ..., cN FROM teller_rows(?1)`, where teller_rows is a
// table-valued function (an eponymous virtual table registered on the connection) and
// ?1 is bound to a RowSource. SQLite then runs one statement over all the rows, its
// b-tree cursor staying at the table's end, instead of binding, stepping and resetting
// a statement per row (about twice the rows per second on this schema).
#pragma once

#include <sqlite3.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "base/status.h"
#include "store/sqlite_db.h"

namespace teller::store {

// The widest table teller_rows can feed.
constexpr int kMaxRowColumns = 24;

// One row's values in column order, as the feed hands them to SQLite. Text is not
// copied: it must outlive the statement that reads it.
class RowCells {
 public:
  RowCells& Int(int64_t value) { return Add(Cell{.type = Type::kInt, .int_value = value}); }
  RowCells& Real(double value) { return Add(Cell{.type = Type::kReal, .real_value = value}); }
  RowCells& Text(std::string_view text) {
    // A null data pointer would read as NULL, not the empty string.
    return Add(Cell{.type = Type::kText,
                    .size = static_cast<int>(text.size()),
                    .text = text.empty() ? "" : text.data()});
  }
  RowCells& Null() { return Add(Cell{.type = Type::kNull}); }

  void Clear() { count_ = 0; }
  int count() const { return count_; }
  // The integer in column (0 when it holds another type or is not filled).
  int64_t IntAt(int column) const;
  // Hands column's value to SQLite as a function result (NULL past the filled cells).
  void Result(int column, sqlite3_context* ctx) const;

 private:
  enum class Type : uint8_t { kNull, kInt, kReal, kText };
  struct Cell {
    Type type = Type::kNull;
    int size = 0;
    int64_t int_value = 0;
    double real_value = 0;
    const char* text = nullptr;
  };
  RowCells& Add(const Cell& cell) {
    if (count_ < kMaxRowColumns) cells_[count_] = cell;
    ++count_;
    return *this;
  }

  Cell cells_[kMaxRowColumns];
  int count_ = 0;
};

// A table's rows, each filled on demand, read once in row order.
class RowSource {
 public:
  virtual ~RowSource() = default;
  virtual size_t rows() const = 0;
  virtual void Fill(size_t row, RowCells* cells) const = 0;

  // Fill, remembering the row: where a failed insert stopped.
  void FillRow(size_t row, RowCells* cells) const {
    last_row_ = row;
    Fill(row, cells);
  }
  size_t last_row() const { return last_row_; }

 private:
  mutable size_t last_row_ = 0;
};

// A RowSource over a callable fill(row, cells).
template <typename FillFn>
class RowsOf final : public RowSource {
 public:
  RowsOf(size_t rows, FillFn fill) : rows_(rows), fill_(std::move(fill)) {}
  size_t rows() const override { return rows_; }
  void Fill(size_t row, RowCells* cells) const override { fill_(row, cells); }

 private:
  size_t rows_;
  FillFn fill_;
};

// How the rows' first values become the table's keys.
enum class RowKeys {
  kAsFilled,  // each row's first value is inserted as filled
  // The first column is the table's INTEGER PRIMARY KEY and the filled keys count up by
  // one from the first row's. Only the first row's key is passed; SQLite numbers the
  // others max(rowid) + 1, appending each row instead of seeking to check a given key.
  // InsertRows checks afterwards that the last key is the first plus rows - 1.
  kConsecutive,
};

// Registers teller_rows on db's connection; once per connection, before InsertRows.
base::Status RegisterRowFeed(Database* db);

// Inserts every row of source into table, whose rows have `columns` values each, in one
// INSERT ... SELECT. An error names the table and the row being inserted.
base::Status InsertRows(Database* db, std::string_view table, int columns, const RowSource& source,
                        RowKeys keys = RowKeys::kAsFilled);

}  // namespace teller::store
