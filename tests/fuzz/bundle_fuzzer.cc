// Raw bundle import (src/wire/bundle_reader, src/import/bundle_importer): the input is
// written both as the one event file of a process folder and as its logs/*.jsonl, next
// to a fixed meta.json (the two_ranks fixture's), then imported as `teller import`
// does. Chunk streams exercise the chunk/record decoder and the importer's record
// handling; JSON lines exercise the log line parser.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "base/file_util.h"
#include "fuzz_util.h"
#include "import/importer.h"

namespace {

struct BundleDir {
  std::string root;
  std::string events;
  std::string log;
};

const BundleDir& Dir() {
  static const BundleDir dir = [] {
    BundleDir d;
    d.root = teller::fuzz::ScratchDir() + "/bundle";
    std::filesystem::create_directories(d.root + "/proc-node0-1001");
    std::filesystem::create_directories(d.root + "/logs");
    auto meta = teller::base::ReadFile(std::string(TELLER_DEFAULT_SOURCE_DIR) +
                                       "/tests/fixtures/bundle/two_ranks/meta.json");
    FUZZ_CHECK(meta.ok(), "%s", meta.status().ToString().c_str());
    teller::fuzz::WriteBytes(d.root + "/meta.json", *meta);
    d.events = d.root + "/proc-node0-1001/events-000000.bin";
    d.log = d.root + "/logs/stdout.jsonl";
    return d;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace teller;
  const BundleDir& dir = Dir();
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  fuzz::WriteBytes(dir.events, bytes);
  fuzz::WriteBytes(dir.log, bytes);
  model::Trace trace;
  import::ImportOptions options;
  base::Status status = import::ImportBundle(dir.root, options, &trace);
  // Damage inside a readable event or log file is a counter, never a failed import.
  FUZZ_CHECK(status.ok(), "bundle import failed: %s", status.ToString().c_str());
  import::ParseLogsOfTrace(options, &trace);
  fuzz::CheckImportedTrace(trace, status);
  return 0;
}
