// Dataset manifest.json and splits.json readers (ParseManifest, ParseSplits in
// src/wire/dataset_files). The same text goes to both. Any text must read or be
// refused with a Status; what reads must write text that reads back to the same
// structure and writes again to the same text.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "wire/dataset_files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace teller;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  base::StatusOr<wire::DatasetManifest> manifest = wire::ParseManifest(text, "fuzz");
  if (manifest.ok()) {
    const std::string written = wire::WriteManifestJson(*manifest);
    base::StatusOr<wire::DatasetManifest> again = wire::ParseManifest(written, "again");
    FUZZ_CHECK(again.ok(), "written manifest does not read: %s", again.status().ToString().c_str());
    FUZZ_CHECK(*again == *manifest, "manifest does not round-trip");
    FUZZ_CHECK(wire::WriteManifestJson(*again) == written, "manifest text does not round-trip");
  }
  base::StatusOr<wire::DatasetSplits> splits = wire::ParseSplits(text, "fuzz");
  if (splits.ok()) {
    const std::string written = wire::WriteSplitsJson(*splits);
    base::StatusOr<wire::DatasetSplits> again = wire::ParseSplits(written, "again");
    FUZZ_CHECK(again.ok(), "written splits do not read: %s", again.status().ToString().c_str());
    FUZZ_CHECK(*again == *splits, "splits do not round-trip");
    FUZZ_CHECK(wire::WriteSplitsJson(*again) == written, "splits text does not round-trip");
    for (const wire::DatasetSplit& split : splits->splits) {
      FUZZ_CHECK(splits->Find(split.name) != nullptr, "split %s not found", split.name.c_str());
    }
  }
  return 0;
}
