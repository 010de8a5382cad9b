#include "store/open_trace.h"

#include <sqlite3.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "base/file_util.h"
#include "import/import_inputs.h"
#include "reconstruct/call_chain_builder.h"
#include "store/store_schema.h"
#include "store/trace_store.h"

namespace teller::store {
namespace {

namespace fs = std::filesystem;

std::string StoreInDirectory(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return "";
  fs::path store = fs::path(path) / kBundleStoreName;
  return fs::exists(store, ec) ? store.string() : "";
}

}  // namespace

bool IsTellerStore(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;
  auto head = base::ReadHead(path, 16);
  if (!head.ok() || head->size() < 16 || head->compare(0, 15, "SQLite format 3") != 0) return false;
  sqlite3* db = nullptr;
  bool found = false;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    // Every store carries teller's application_id, whatever its schema_version, so a
    // store of another version reaches LoadTrace and gets its clear error.
    sqlite3_stmt* statement = nullptr;
    if (sqlite3_prepare_v2(db, "PRAGMA application_id", -1, &statement, nullptr) == SQLITE_OK) {
      found = sqlite3_step(statement) == SQLITE_ROW &&
              sqlite3_column_int64(statement, 0) == kApplicationId;
    }
    sqlite3_finalize(statement);
  }
  sqlite3_close(db);
  return found;
}

base::StatusOr<model::Trace> OpenTrace(const std::vector<std::string>& inputs,
                                       const OpenOptions& options) {
  model::Trace trace;
  std::string store_path;
  if (inputs.size() == 1) {
    store_path = StoreInDirectory(inputs[0]);
    if (store_path.empty() && IsTellerStore(inputs[0])) store_path = inputs[0];
  }
  if (!store_path.empty()) {
    TELLER_ASSIGN_OR_RETURN(trace, LoadTrace(store_path));
  } else {
    TELLER_RETURN_IF_ERROR(import::ImportInputs(inputs, options.import, &trace).status());
    import::ParseLogsOfTrace(options.import, &trace);
  }
  if (options.reconstruct && !trace.reconstructed) {
    reconstruct::BuildOptions build;
    build.progress = options.import.progress;
    TELLER_RETURN_IF_ERROR(reconstruct::BuildCallChains(&trace, build));
  }
  return trace;
}

base::Status WriteImportedBundle(const model::Trace& trace, const std::string& directory) {
  std::error_code ec;
  fs::create_directories(directory, ec);
  if (ec) return base::IoError("{}: cannot create directory: {}", directory, ec.message());
  TELLER_RETURN_IF_ERROR(SaveTrace(trace, (fs::path(directory) / kBundleStoreName).string()));
  return WriteImportedBundleMeta(trace.meta.format, trace.meta.sources, directory);
}

base::Status WriteImportedBundleMeta(model::TraceFormat format,
                                     const std::vector<std::string>& sources,
                                     const std::string& directory) {
  nlohmann::json meta;
  meta["format"] = "teller-imported";
  meta["format_version"] = 1;
  meta["trace_format"] = model::TraceFormatName(format);
  meta["sources"] = sources;
  meta["store"] = kBundleStoreName;
  return base::WriteFileAtomic((fs::path(directory) / "meta.json").string(), meta.dump(2) + "\n");
}

base::StatusOr<std::string> DefaultStorePath(const std::vector<std::string>& inputs) {
  if (inputs.empty()) return base::InvalidArgument("no input given");
  std::error_code ec;
  if (inputs.size() == 1 && fs::is_directory(inputs[0], ec)) {
    return (fs::path(inputs[0]) / kBundleStoreName).string();
  }
  if (inputs.size() == 1 && IsTellerStore(inputs[0])) return inputs[0];
  return inputs[0] + ".teller.db";
}

}  // namespace teller::store
