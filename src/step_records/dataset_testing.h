// Tests only: the small preset dataset written under a temp folder, and the step
// records of some parts of one of its splits.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/testing.h"
#include "sim/dataset.h"
#include "step_records/dataset.h"

namespace teller::step_records {

inline std::string BuildSmallDataset(const std::string& name) {
  const std::string folder = base::TempDir(name);
  auto preset = sim::GetPreset("small");
  EXPECT_TRUE(preset.ok());
  sim::DatasetOptions options;
  options.output = folder;
  auto summary = sim::BuildDataset(*preset, options);
  EXPECT_TRUE(summary.ok()) << summary.status().message();
  return folder;
}

// The records of the given parts of `split`, in one set.
inline RecordSet LoadParts(const std::string& folder, const std::string& split,
                           const std::vector<std::string>& parts, bool operator_tokens = true) {
  RecordSet set;
  auto dataset = ReadDataset(folder);
  EXPECT_TRUE(dataset.ok()) << dataset.status().message();
  for (const std::string& part : parts) {
    auto keys = ReadSplitKeys(folder, split, part);
    EXPECT_TRUE(keys.ok()) << keys.status().message();
    LoadOptions options;
    options.keys = &*keys;
    options.operator_tokens = operator_tokens;
    EXPECT_TRUE(LoadDatasetRecords(*dataset, options, &set).ok());
  }
  return set;
}

}  // namespace teller::step_records
