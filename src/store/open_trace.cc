#include "store/open_trace.h"

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "base/file_util.h"
#include "base/sha256.h"
#include "import/import_inputs.h"
#include "reconstruct/call_chain_builder.h"
#include "store/store_schema.h"
#include "store/trace_snapshot.h"
#include "store/store_set.h"
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

// The snapshot file of these inputs under these options; "" when an input cannot be
// keyed (missing, unreadable).
std::string SnapshotPath(const std::vector<std::string>& inputs, const OpenOptions& options) {
  constexpr size_t kHeadBytes = size_t{1} << 20;
  std::string key = fmt::format("{:x} reconstruct={} rank={} year={} utc={}\n",
                                SnapshotLayoutHash(), options.reconstruct, options.import.rank_hint,
                                options.import.year_hint, options.import.utc_offset_minutes);
  auto add_file = [&](const fs::path& path) {
    std::error_code ec;
    const auto size = fs::file_size(path, ec);
    if (ec) return false;
    const auto mtime = fs::last_write_time(path, ec).time_since_epoch().count();
    if (ec) return false;
    auto head = base::ReadHead(path.string(), kHeadBytes);
    if (!head.ok()) return false;
    key +=
        fmt::format("{} {} {} {}\n", path.filename().string(), size, mtime, base::Sha256Hex(*head));
    return true;
  };
  for (const std::string& input : inputs) {
    std::error_code ec;
    if (fs::is_directory(input, ec)) {
      std::vector<fs::path> files;
      for (const auto& entry : fs::recursive_directory_iterator(input, ec)) {
        if (entry.is_regular_file(ec)) files.push_back(entry.path());
      }
      if (ec) return "";
      std::sort(files.begin(), files.end());
      key += fmt::format("dir {} files\n", files.size());
      for (const fs::path& file : files) {
        if (!add_file(file)) return "";
      }
    } else if (!add_file(input)) {
      return "";
    }
  }
  return (fs::path(options.cache_dir) / (base::Sha256Hex(key).substr(0, 32) + ".snapshot"))
      .string();
}

// Removes the least recently written snapshots until the folder holds at most max_bytes.
void TrimCache(const std::string& dir, uint64_t max_bytes) {
  std::vector<std::pair<fs::file_time_type, fs::path>> snapshots;
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().extension() != ".snapshot") continue;
    total += entry.file_size(ec);
    snapshots.emplace_back(entry.last_write_time(ec), entry.path());
  }
  std::sort(snapshots.begin(), snapshots.end());
  for (const auto& [time, path] : snapshots) {
    if (total <= max_bytes) break;
    total -= std::min<uint64_t>(total, fs::file_size(path, ec));
    fs::remove(path, ec);
  }
}

}  // namespace

std::string DefaultCacheDir() {
  if (const char* env = std::getenv("TELLER_CACHE_DIR"); env && *env)
    return std::string_view(env) == "none" ? "" : env;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return (fs::path(xdg) / "teller").string();
  if (const char* home = std::getenv("HOME"); home && *home)
    return (fs::path(home) / ".cache" / "teller").string();
  return "";
}

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
  const bool store_set = inputs.size() == 1 && IsStoreSet(inputs[0]);
  if (inputs.size() == 1) {
    store_path = StoreInDirectory(inputs[0]);
    if (store_path.empty() && IsTellerStore(inputs[0])) store_path = inputs[0];
  }
  base::ProgressSink* progress = options.import.progress;
  const bool cached =
      !options.cache_dir.empty() && store_path.empty() && !store_set && !inputs.empty();
  const std::string snapshot = cached ? SnapshotPath(inputs, options) : "";
  std::error_code ec;
  if (!snapshot.empty() && !options.rebuild && fs::is_regular_file(snapshot, ec)) {
    auto read = [&] {
      base::ScopedStage stage(progress, "snapshot read");
      return ReadTraceSnapshot(snapshot);
    }();
    if (read.ok()) return read;
    fs::remove(snapshot, ec);  // damaged or of another build: import again
  }
  const auto start = std::chrono::steady_clock::now();
  if (!store_path.empty()) {
    base::ScopedStage stage(progress, "store read");
    TELLER_ASSIGN_OR_RETURN(trace, LoadTrace(store_path));
  } else if (store_set) {
    TELLER_ASSIGN_OR_RETURN(trace, OpenStoreSet(inputs[0], options.import));
    import::ParseLogsOfTrace(options.import, &trace);
  } else {
    TELLER_RETURN_IF_ERROR(import::ImportInputs(inputs, options.import, &trace).status());
    import::ParseLogsOfTrace(options.import, &trace);
  }
  if (options.reconstruct && !trace.reconstructed) {
    reconstruct::BuildOptions build;
    build.progress = progress;
    TELLER_RETURN_IF_ERROR(reconstruct::BuildCallChains(&trace, build));
  }
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  if (!snapshot.empty() && took.count() >= options.cache_min_seconds) {
    // Best effort: a cache that cannot be written is no error.
    base::ScopedStage stage(progress, "snapshot write");
    fs::create_directories(options.cache_dir, ec);
    if (WriteTraceSnapshot(trace, snapshot).ok())
      TrimCache(options.cache_dir, options.cache_max_bytes);
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
