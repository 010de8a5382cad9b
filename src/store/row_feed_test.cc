#include "store/row_feed.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "base/status_testing.h"
#include "base/testing.h"

namespace teller::store {
namespace {

Database OpenFresh(const std::string& test) {
  std::string path = base::TempDir("row_feed_" + test) + "/rows.db";
  std::filesystem::remove(path);
  auto db = Database::Open(path, Database::Mode::kCreate);
  EXPECT_TRUE(db.ok()) << db.status().ToString();
  EXPECT_TRUE(RegisterRowFeed(&*db).ok());
  return std::move(*db);
}

// Every row of table as text, "NULL" for NULL, each value's type after it.
std::vector<std::string> Dump(Database* db, const std::string& table) {
  auto stmt = db->Prepare("SELECT * FROM " + table + " ORDER BY rowid");
  EXPECT_TRUE(stmt.ok());
  std::vector<std::string> rows;
  while (sqlite3_step(stmt->get()) == SQLITE_ROW) {
    std::string row;
    for (int c = 0; c < sqlite3_column_count(stmt->get()); ++c) {
      const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt->get(), c));
      row += (c ? "|" : "") + std::string(text ? text : "NULL") + "/" +
             std::to_string(sqlite3_column_type(stmt->get(), c));
    }
    rows.push_back(row);
  }
  return rows;
}

TEST(RowFeedTest, EveryValueTypeIsInsertedAsFilled) {
  Database db = OpenFresh("types");
  ASSERT_OK(db.Exec("CREATE TABLE t(k INTEGER PRIMARY KEY, i INTEGER, r REAL, s TEXT, n)"));
  const std::string texts[] = {"", "two words", std::string("nul\0byte", 8)};
  RowsOf rows(3, [&](size_t i, RowCells* row) {
    row->Int(static_cast<int64_t>(i) * 10)
        .Int(i == 1 ? INT64_MIN : -1)
        .Real(i == 2 ? -0.0 : 1.5)
        .Text(texts[i])
        .Null();
  });
  ASSERT_OK(InsertRows(&db, "t", 5, rows));
  auto stmt = db.Prepare("SELECT k, i, r, s, n, length(CAST(s AS BLOB)) FROM t ORDER BY k");
  ASSERT_TRUE(stmt.ok());
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(sqlite3_step(stmt->get()), SQLITE_ROW);
    EXPECT_EQ(sqlite3_column_int64(stmt->get(), 0), i * 10);
    EXPECT_EQ(sqlite3_column_int64(stmt->get(), 1), i == 1 ? INT64_MIN : -1);
    double real = sqlite3_column_double(stmt->get(), 2);
    EXPECT_EQ(real, i == 2 ? -0.0 : 1.5);
    EXPECT_EQ(sqlite3_column_type(stmt->get(), 3), SQLITE_TEXT);  // '' is text, not NULL
    EXPECT_EQ(sqlite3_column_int64(stmt->get(), 5), static_cast<int64_t>(texts[i].size()));
    EXPECT_EQ(sqlite3_column_type(stmt->get(), 4), SQLITE_NULL);
  }
  EXPECT_EQ(sqlite3_step(stmt->get()), SQLITE_DONE);
}

TEST(RowFeedTest, ConsecutiveKeysAreTheKeysFilled) {
  Database db = OpenFresh("consecutive");
  ASSERT_OK(
      db.Exec("CREATE TABLE given(k INTEGER PRIMARY KEY, v INTEGER);"
              "CREATE TABLE numbered(k INTEGER PRIMARY KEY, v INTEGER);"));
  // Two windows, the second starting where the first ended, as the windowed writer does.
  for (int64_t base : {0, 5}) {
    RowsOf rows(5, [&](size_t i, RowCells* row) {
      row->Int(base + static_cast<int64_t>(i)).Int(static_cast<int64_t>(i) * 7);
    });
    ASSERT_OK(InsertRows(&db, "given", 2, rows, RowKeys::kAsFilled));
    ASSERT_OK(InsertRows(&db, "numbered", 2, rows, RowKeys::kConsecutive));
  }
  EXPECT_EQ(Dump(&db, "given"), Dump(&db, "numbered"));
  EXPECT_EQ(Dump(&db, "numbered").size(), 10u);
}

TEST(RowFeedTest, KeysThatWouldNotCountOnAreAnError) {
  Database db = OpenFresh("not_consecutive");
  ASSERT_OK(
      db.Exec("CREATE TABLE t(k INTEGER PRIMARY KEY, v INTEGER); INSERT INTO t VALUES(9, 0)"));
  // Rows 3, 4, 5 would be numbered 3, 10, 11 behind the existing row 9.
  RowsOf rows(3, [](size_t i, RowCells* row) { row->Int(3 + static_cast<int64_t>(i)).Int(0); });
  base::Status status = InsertRows(&db, "t", 2, rows, RowKeys::kConsecutive);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("table t: rows numbered up to 11, expected 5"), std::string::npos)
      << status.message();
}

TEST(RowFeedTest, AFailedInsertNamesTheTableAndRow) {
  Database db = OpenFresh("failed");
  ASSERT_OK(db.Exec("CREATE TABLE t(k INTEGER PRIMARY KEY, v INTEGER NOT NULL)"));
  RowsOf rows(4, [](size_t i, RowCells* row) {
    row->Int(static_cast<int64_t>(i));
    i == 2 ? row->Null() : row->Int(1);
  });
  base::Status status = InsertRows(&db, "t", 2, rows);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("writing row 2 of table t"), std::string::npos)
      << status.message();
  EXPECT_FALSE(InsertRows(&db, "t", kMaxRowColumns + 1, rows).ok());
}

}  // namespace
}  // namespace teller::store
