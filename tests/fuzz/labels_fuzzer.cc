// labels.json reader (ParseLabels in src/wire/labels_file). Any text must read or be
// refused with a Status; what reads must write (WriteLabelsJson) text that reads back
// to the same labels and writes again to the same text.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "wire/labels_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace teller;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  base::StatusOr<wire::Labels> labels = wire::ParseLabels(text, "fuzz");
  if (!labels.ok()) {
    FUZZ_CHECK(labels.status().message().rfind("fuzz: labels.json", 0) == 0,
               "refusal does not name the source: %s", labels.status().ToString().c_str());
    return 0;
  }
  const std::string written = wire::WriteLabelsJson(*labels);
  base::StatusOr<wire::Labels> again = wire::ParseLabels(written, "again");
  FUZZ_CHECK(again.ok(), "written labels do not read: %s", again.status().ToString().c_str());
  FUZZ_CHECK(*again == *labels, "labels do not round-trip");
  FUZZ_CHECK(wire::WriteLabelsJson(*again) == written, "labels text does not round-trip");
  return 0;
}
