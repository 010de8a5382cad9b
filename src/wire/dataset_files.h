// The files of a teller dataset folder (`teller synth dataset`): manifest.json (one
// entry per bundle folder) and splits.json (request keys "bundle/request" per split and
// part). One writer (the simulator's BuildDataset) and one reader (records, diagnose's
// evaluation, the CLI). Spec: docs/format.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace teller::wire {

inline constexpr char kManifestFileName[] = "manifest.json";
inline constexpr char kSplitsFileName[] = "splits.json";

struct ManifestBundle {
  std::string bundle;  // folder name inside the dataset; required
  std::string engine;
  uint64_t seed = 0;  // the run's simulator seed
  std::string model;
  std::string fault = "none";           // mechanism, "none" for a fault-free run
  std::optional<std::string> category;  // null for a fault-free run
  std::vector<std::string> requests;    // "bundle/request" keys
  int32_t faulty_requests = 0;
  int64_t engine_steps = 0;
  int64_t events = 0;
  bool crashed = false;

  friend bool operator==(const ManifestBundle&, const ManifestBundle&) = default;
};

struct DatasetManifest {
  std::optional<std::string> preset;  // written always; read: absent in hand-made ones
  std::optional<uint64_t> seed;
  std::vector<ManifestBundle> bundles;

  friend bool operator==(const DatasetManifest&, const DatasetManifest&) = default;
};

struct SplitPart {
  std::string name;               // train, val, test
  std::vector<std::string> keys;  // "bundle/request"

  friend bool operator==(const SplitPart&, const SplitPart&) = default;
};

struct DatasetSplit {
  std::string name;  // request_disjoint, bundle_disjoint, injection_disjoint
  // What the test part holds and training never saw (injection_disjoint only).
  std::optional<std::vector<std::string>> held_out_engines;
  std::optional<std::vector<std::string>> held_out_mechanisms;
  std::vector<SplitPart> parts;  // in file order

  const SplitPart* FindPart(std::string_view part) const;

  friend bool operator==(const DatasetSplit&, const DatasetSplit&) = default;
};

struct DatasetSplits {
  std::optional<uint64_t> seed;
  std::vector<DatasetSplit> splits;  // in file order

  const DatasetSplit* Find(std::string_view split) const;

  friend bool operator==(const DatasetSplits&, const DatasetSplits&) = default;
};

// Text of the files: keys in the order of the structs, one-space indent, final newline.
std::string WriteManifestJson(const DatasetManifest& manifest);
std::string WriteSplitsJson(const DatasetSplits& splits);
// Both files into folder (which must exist), each written atomically.
base::Status WriteDatasetFiles(const std::string& folder, const DatasetManifest& manifest,
                               const DatasetSplits& splits);

// Errors name source and the JSON path of what was wrong and what was expected. Absent
// fields keep their defaults; fields of the wrong type are errors; unknown fields are
// ignored.
base::StatusOr<DatasetManifest> ParseManifest(std::string_view text, std::string_view source);
base::StatusOr<DatasetSplits> ParseSplits(std::string_view text, std::string_view source);
// folder/manifest.json, folder/splits.json.
base::StatusOr<DatasetManifest> ReadManifest(const std::string& folder);
base::StatusOr<DatasetSplits> ReadSplits(const std::string& folder);

}  // namespace teller::wire
