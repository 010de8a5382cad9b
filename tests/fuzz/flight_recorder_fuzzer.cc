// Flight Recorder dumps (src/import/flight_recorder_importer): the input is written to a
// temporary file and imported; a dump that is not a JSON object with a list of entries
// is a Status, anything else imports, every collective on a COMM event of the dump's
// process, and the trace passes store::CheckTrace.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "import/importer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace teller;
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  static const std::string path = fuzz::ScratchDir() + "/nccl_trace_rank_3";
  fuzz::WriteBytes(path, bytes);
  model::Trace trace;
  import::ImportOptions options;
  options.rank_hint = 3;
  base::Status status = import::ImportFlightRecorder(path, options, &trace);
  fuzz::CheckImportedTrace(trace, status);
  if (!status.ok()) return 0;
  FUZZ_CHECK(trace.processes.size() == 1, "%zu processes from one dump", trace.processes.size());
  for (size_t i = 0; i < trace.collectives.size(); ++i) {
    const uint32_t event = trace.collectives.event[i].value();
    FUZZ_CHECK(event < trace.events.size(), "collective %zu points past the events", i);
    FUZZ_CHECK(trace.events.layer[event] == model::Layer::kComm, "collective %zu is not COMM", i);
    FUZZ_CHECK(trace.events.dur_ns[event] >= 0, "collective %zu lasts less than nothing", i);
  }
  return 0;
}
