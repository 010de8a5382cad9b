#include "step_records/dataset.h"

#include <algorithm>
#include <filesystem>

#include "store/open_trace.h"
#include "wire/dataset_files.h"

namespace teller::step_records {
namespace {

namespace fs = std::filesystem;

// "a, b, c" in sorted order.
std::string SortedNames(std::vector<std::string> names) {
  std::sort(names.begin(), names.end());
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

}  // namespace

bool IsDatasetFolder(const std::string& path) {
  std::error_code error;
  return fs::is_regular_file(fs::path(path) / wire::kManifestFileName, error);
}

base::StatusOr<Dataset> ReadDataset(const std::string& folder) {
  if (!IsDatasetFolder(folder)) {
    return base::NotFound(
        "{}: not a teller dataset (no manifest.json; make one with `teller synth dataset`)",
        folder);
  }
  TELLER_ASSIGN_OR_RETURN(wire::DatasetManifest manifest, wire::ReadManifest(folder));
  Dataset dataset;
  dataset.folder = folder;
  for (wire::ManifestBundle& entry : manifest.bundles) {
    DatasetBundle bundle;
    bundle.name = std::move(entry.bundle);
    bundle.engine = std::move(entry.engine);
    bundle.path = (fs::path(folder) / bundle.name).string();
    dataset.bundles.push_back(std::move(bundle));
  }
  return dataset;
}

base::StatusOr<std::unordered_set<std::string>> ReadSplitKeys(const std::string& folder,
                                                              const std::string& split,
                                                              const std::string& part) {
  const std::string path = (fs::path(folder) / wire::kSplitsFileName).string();
  TELLER_ASSIGN_OR_RETURN(wire::DatasetSplits splits, wire::ReadSplits(folder));
  const wire::DatasetSplit* found = splits.Find(split);
  if (found == nullptr) {
    std::vector<std::string> names;
    for (const wire::DatasetSplit& s : splits.splits) names.push_back(s.name);
    return base::NotFound("{}: no split '{}' (splits: {})", path, split, SortedNames(names));
  }
  const wire::SplitPart* keys = found->FindPart(part);
  if (keys == nullptr) {
    std::vector<std::string> names;
    if (found->held_out_engines) names.push_back("held_out_engines");
    if (found->held_out_mechanisms) names.push_back("held_out_mechanisms");
    for (const wire::SplitPart& p : found->parts) names.push_back(p.name);
    return base::NotFound("{}: split '{}' has no part '{}' (parts: {})", path, split, part,
                          SortedNames(names));
  }
  return std::unordered_set<std::string>(keys->keys.begin(), keys->keys.end());
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
    record_options.operator_tokens = options.operator_tokens;
    TELLER_RETURN_IF_ERROR(AddTraceRecords(*trace, record_options, set));
  }
  base::ReportProgress(options.progress, "records", done, dataset.bundles.size());
  if (options.progress) options.progress->Finish("records");
  return base::OkStatus();
}

}  // namespace teller::step_records
