#include "store/row_scan.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "base/status_testing.h"
#include "base/testing.h"

namespace teller::store {
namespace {

// Collects the scanned rows as "k:v" text, stopping after stop_after rows.
class CollectRows : public RowSink {
 public:
  explicit CollectRows(size_t stop_after = SIZE_MAX) : stop_after_(stop_after) {}
  bool Row(sqlite3_value** values, int count) override {
    std::string row;
    for (int c = 0; c < count; ++c) {
      const auto* text = reinterpret_cast<const char*>(sqlite3_value_text(values[c]));
      row += (c ? ":" : "") + std::string(text ? text : "NULL");
    }
    rows.push_back(row);
    return rows.size() < stop_after_;
  }
  std::vector<std::string> rows;

 private:
  size_t stop_after_;
};

TEST(RowScanTest, RowsArriveInRowidOrderEvenWhereAnIndexCoversTheColumns) {
  std::string path = base::TempDir("row_scan") + "/rows.db";
  std::filesystem::remove(path);
  auto opened = Database::Open(path, Database::Mode::kCreate);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  Database db = std::move(*opened);
  ASSERT_OK(RegisterRowScan(&db));
  // The index holds (v, k), narrower than the rows: a plain scan of k, v would read it.
  ASSERT_OK(
      db.Exec("CREATE TABLE t(k INTEGER PRIMARY KEY, v INTEGER, pad TEXT);"
              "CREATE INDEX t_by_v ON t(v);"
              "INSERT INTO t VALUES(0, 30, zeroblob(500)), (1, 10, zeroblob(500)),"
              "  (2, NULL, zeroblob(500)), (3, 20, zeroblob(500));"));
  CollectRows all;
  ASSERT_OK(ScanRows(&db, "t", "k, v", &all));
  EXPECT_EQ(all.rows, (std::vector<std::string>{"0:30", "1:10", "2:NULL", "3:20"}));
  CollectRows two(2);
  ASSERT_OK(ScanRows(&db, "t", "k, v", &two));
  EXPECT_EQ(two.rows.size(), 2u);
  CollectRows none;
  base::Status missing = ScanRows(&db, "no_such_table", "k", &none);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("no_such_table"), std::string::npos) << missing.message();
}

}  // namespace
}  // namespace teller::store
