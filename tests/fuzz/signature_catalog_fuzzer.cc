// Signature catalog files (ParseSignatureCatalog in src/wire/signature_catalog_file) and the
// matcher of src/signatures. Any text must read or be refused with a Status naming the
// source; what reads writes text that reads back equal and writes again the same; a
// catalog that reads loads into a SignatureCatalog, and each of its patterns, filled in,
// is matched by some entry whose match lies inside the line.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "signatures/signature_catalog.h"
#include "wire/signature_catalog_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace teller;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  base::StatusOr<wire::SignatureCatalogFile> file = wire::ParseSignatureCatalog(text, "fuzz");
  if (!file.ok()) {
    FUZZ_CHECK(file.status().message().rfind("fuzz: ", 0) == 0,
               "refusal does not name the source: %s", file.status().ToString().c_str());
    return 0;
  }
  const std::string written = wire::WriteSignatureCatalogJson(*file);
  base::StatusOr<wire::SignatureCatalogFile> again = wire::ParseSignatureCatalog(written, "again");
  FUZZ_CHECK(again.ok(), "written catalog does not read: %s", again.status().ToString().c_str());
  FUZZ_CHECK(*again == *file, "catalog does not round-trip");
  FUZZ_CHECK(wire::WriteSignatureCatalogJson(*again) == written, "catalog text does not round-trip");
  signatures::SignatureCatalog catalog;
  if (!catalog.Add(*file, "fuzz").ok()) return 0;  // an id twice
  for (const wire::SignatureEntry& entry : file->entries) {
    for (const std::string& pattern : entry.patterns) {
      std::string line = "> ";
      for (char c : pattern) line += c == '*' ? std::string("x") : std::string(1, c);
      for (const signatures::SignatureMatch& match : catalog.MatchAll(line)) {
        FUZZ_CHECK(match.begin <= match.end && match.end <= line.size(), "match outside the line");
      }
      FUZZ_CHECK(static_cast<bool>(catalog.Match(line)), "a filled-in pattern matches nothing");
    }
  }
  return 0;
}
