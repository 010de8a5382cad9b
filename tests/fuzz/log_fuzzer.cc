// Service logs (src/import/log_importer, log_line_parser, log_assembler,
// template_miner): the input is written to a temporary file and imported as
// `teller import x.log` does. Every line must become exactly one log row with a
// template, and the trace must pass store::CheckTrace.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/file_util.h"
#include "fuzz_util.h"
#include "import/importer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace teller;
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  static const std::string path = fuzz::ScratchDir() + "/service.log";
  fuzz::WriteBytes(path, bytes);
  model::Trace trace;
  import::ImportOptions options;
  // Vary the clock context with the input: year given or inferred, zones east and west.
  options.year_hint = size % 2 == 0 ? 0 : 2024;
  options.utc_offset_minutes = static_cast<int>(size % 3) * 480 - 480;
  base::Status status = import::ImportLogFile(path, options, &trace);
  FUZZ_CHECK(status.ok(), "log import failed: %s", status.ToString().c_str());
  fuzz::CheckImportedTrace(trace, status);
  if (!base::IsGzipMagic(bytes)) {
    size_t lines = static_cast<size_t>(std::count(bytes.begin(), bytes.end(), '\n'));
    if (!bytes.empty() && bytes.back() != '\n') ++lines;
    FUZZ_CHECK(trace.logs.size() == lines, "%zu lines became %zu log rows", lines,
               trace.logs.size());
  }
  for (size_t row = 0; row < trace.logs.size(); ++row) {
    FUZZ_CHECK(trace.logs.template_id[row].valid() &&
                   trace.logs.template_id[row].value() < trace.templates.size(),
               "row %zu has no template", row);
  }
  return 0;
}
