// A teller dataset folder (`teller synth dataset`): manifest.json, splits.json and
// one bundle per entry. Reads the split keys and turns the bundles of one split
// part into step records.
#pragma once

#include <string>
#include <unordered_set>
#include <vector>

#include "base/progress.h"
#include "base/status.h"
#include "step_records/step_records.h"

namespace teller::step_records {

struct DatasetBundle {
  std::string name;    // folder name inside the dataset
  std::string engine;  // manifest "engine"
  std::string path;
};

struct Dataset {
  std::string folder;
  std::vector<DatasetBundle> bundles;
};

// True when path is a folder holding manifest.json.
bool IsDatasetFolder(const std::string& path);
base::StatusOr<Dataset> ReadDataset(const std::string& folder);

// "bundle/request" keys of one part ("train", "val", "test") of one split
// ("request_disjoint", "bundle_disjoint", "injection_disjoint") in splits.json.
base::StatusOr<std::unordered_set<std::string>> ReadSplitKeys(const std::string& folder,
                                                              const std::string& split,
                                                              const std::string& part);

struct LoadOptions {
  const std::unordered_set<std::string>* keys = nullptr;  // null: every request
  size_t max_logs_per_record = 32;
  bool vertical = false;                   // RecordOptions::vertical
  bool operator_tokens = true;             // RecordOptions::operator_tokens
  base::ProgressSink* progress = nullptr;  // stage "records", one unit per bundle
};

// Opens each bundle holding a wanted request and appends its records to set.
base::Status LoadDatasetRecords(const Dataset& dataset, const LoadOptions& options, RecordSet* set);

}  // namespace teller::step_records
