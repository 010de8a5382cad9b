#include "records/dataset.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "base/file_util.h"
#include "store/open_trace.h"

namespace teller::records {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

base::StatusOr<Json> ReadJson(const std::string& path, std::string_view what) {
  TELLER_ASSIGN_OR_RETURN(std::string text, base::ReadFile(path));
  Json doc = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return base::InvalidArgument("{}: not valid JSON (expected {})", path, what);
  return doc;
}

}  // namespace

bool IsDatasetFolder(const std::string& path) {
  std::error_code error;
  return fs::is_regular_file(fs::path(path) / "manifest.json", error);
}

base::StatusOr<Dataset> ReadDataset(const std::string& folder) {
  const std::string path = (fs::path(folder) / "manifest.json").string();
  if (!IsDatasetFolder(folder)) {
    return base::NotFound("{}: not a teller dataset (no manifest.json; make one with `teller synth dataset`)",
                          folder);
  }
  TELLER_ASSIGN_OR_RETURN(Json doc, ReadJson(path, "a teller dataset manifest"));
  if (!doc.is_object() || !doc.contains("bundles") || !doc["bundles"].is_array()) {
    return base::InvalidArgument("{}: expected {{\"bundles\": [{{\"bundle\": NAME, ...}}]}}", path);
  }
  Dataset dataset;
  dataset.folder = folder;
  for (size_t i = 0; i < doc["bundles"].size(); ++i) {
    const Json& entry = doc["bundles"][i];
    if (!entry.is_object() || !entry.contains("bundle") || !entry["bundle"].is_string()) {
      return base::InvalidArgument("{}: bundles[{}] has no \"bundle\" name", path, i);
    }
    DatasetBundle bundle;
    bundle.name = entry["bundle"].get<std::string>();
    bundle.engine = entry.value("engine", "");
    bundle.path = (fs::path(folder) / bundle.name).string();
    dataset.bundles.push_back(std::move(bundle));
  }
  return dataset;
}

base::StatusOr<std::unordered_set<std::string>> ReadSplitKeys(const std::string& folder,
                                                              const std::string& split,
                                                              const std::string& part) {
  const std::string path = (fs::path(folder) / "splits.json").string();
  TELLER_ASSIGN_OR_RETURN(Json doc, ReadJson(path, "the splits of a teller dataset"));
  if (!doc.is_object() || !doc.contains(split) || !doc[split].is_object()) {
    std::string names;
    if (doc.is_object()) {
      for (const auto& [key, value] : doc.items()) {
        if (value.is_object()) names += (names.empty() ? "" : ", ") + key;
      }
    }
    return base::NotFound("{}: no split '{}' (splits: {})", path, split, names);
  }
  const Json& parts = doc[split];
  if (!parts.contains(part) || !parts[part].is_array()) {
    std::string names;
    for (const auto& [key, value] : parts.items()) names += (names.empty() ? "" : ", ") + key;
    return base::NotFound("{}: split '{}' has no part '{}' (parts: {})", path, split, part, names);
  }
  std::unordered_set<std::string> keys;
  for (size_t i = 0; i < parts[part].size(); ++i) {
    const Json& key = parts[part][i];
    if (!key.is_string()) {
      return base::InvalidArgument("{}: {}.{}[{}] is not a \"bundle/request\" string", path, split,
                                   part, i);
    }
    keys.insert(key.get<std::string>());
  }
  return keys;
}

base::Status LoadDatasetRecords(const Dataset& dataset, const LoadOptions& options,
                                RecordSet* set) {
  std::unordered_set<std::string> wanted;
  if (options.keys != nullptr) {
    for (const std::string& key : *options.keys) wanted.insert(key.substr(0, key.find('/')));
  }
  uint64_t done = 0;
  for (const DatasetBundle& bundle : dataset.bundles) {
    base::ReportProgress(options.progress, "records", done++, dataset.bundles.size());
    if (options.keys != nullptr && wanted.count(bundle.name) == 0) continue;
    store::OpenOptions open;
    auto trace = store::OpenTrace({bundle.path}, open);
    if (!trace.ok()) return trace.status().WithContext("dataset " + dataset.folder);
    RecordOptions record_options;
    record_options.bundle = bundle.name;
    record_options.keys = options.keys;
    record_options.max_logs_per_record = options.max_logs_per_record;
    record_options.vertical = options.vertical;
    TELLER_RETURN_IF_ERROR(AddTraceRecords(*trace, record_options, set));
  }
  base::ReportProgress(options.progress, "records", done, dataset.bundles.size());
  if (options.progress) options.progress->Finish("records");
  return base::OkStatus();
}

}  // namespace teller::records
