#include "store/row_scan.h"

#include <string>

#include "fmt/format.h"

namespace teller::store {
namespace {

constexpr char kFunctionName[] = "teller_scan";
constexpr char kSinkPointerType[] = "teller_row_sink";
constexpr char kStopped[] = "teller_scan: the sink stopped";

void ScanStep(sqlite3_context* ctx, int argc, sqlite3_value** argv) {
  auto* sink = static_cast<RowSink*>(sqlite3_value_pointer(argv[0], kSinkPointerType));
  if (sink == nullptr) {
    sqlite3_result_error(ctx, "teller_scan: no sink bound", -1);
    return;
  }
  if (!sink->Row(argv + 1, argc - 1)) sqlite3_result_error(ctx, kStopped, -1);
}

void ScanFinal(sqlite3_context* ctx) { sqlite3_result_null(ctx); }

}  // namespace

base::Status RegisterRowScan(Database* db) {
  int rc = sqlite3_create_function_v2(db->get(), kFunctionName, -1, SQLITE_UTF8, nullptr, nullptr,
                                      ScanStep, ScanFinal, nullptr);
  if (rc != SQLITE_OK) return db->Error(rc, "registering the row scan");
  return base::OkStatus();
}

base::Status ScanRows(Database* db, std::string_view table, std::string_view columns,
                      RowSink* sink) {
  TELLER_ASSIGN_OR_RETURN(Statement scan,
                          db->Prepare(fmt::format("SELECT {}(?1, {}) FROM {} NOT INDEXED",
                                                  kFunctionName, columns, table)));
  sqlite3_bind_pointer(scan.get(), 1, sink, kSinkPointerType, nullptr);
  int rc = sqlite3_step(scan.get());
  if (rc == SQLITE_ROW || rc == SQLITE_DONE) return base::OkStatus();
  if (std::string_view(sqlite3_errmsg(db->get())) == kStopped) return base::OkStatus();
  return db->Error(rc, fmt::format("reading table {}", table));
}

}  // namespace teller::store
