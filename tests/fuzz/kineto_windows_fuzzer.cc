// Kineto windows (src/import/kineto_windows): the input is planned with tiny windows
// and a tiny timeline (so that the refinement pass runs too), split into window
// files, and each window imported. Besides never crashing or hanging: the cuts are
// sorted, there is one file per window, every window imports, and when the whole
// input imports cleanly the windows together hold exactly its events.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "import/importer.h"
#include "import/kineto_windows.h"

namespace {

using namespace teller;

bool ImportedCleanly(const model::Trace& trace, const base::Status& status) {
  if (!status.ok()) return false;
  for (const auto& [name, entry] : trace.stats.entries()) {
    if (entry.severity != model::StatSeverity::kInfo) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const std::string input = fuzz::ScratchDir() + "/input.json";
  fuzz::WriteBytes(input, bytes);
  import::KinetoWindowOptions options;
  options.window_events = 1 + static_cast<int64_t>(size % 5);
  options.finest_resolution_ns = 1'000;
  options.max_cells = 32;
  base::StatusOr<import::KinetoWindowPlan> plan = import::PlanKinetoWindows(input, options);
  if (!plan.ok()) return 0;
  FUZZ_CHECK(std::is_sorted(plan->cuts_ts.begin(), plan->cuts_ts.end()), "cuts out of order");
  FUZZ_CHECK(plan->events >= plan->metadata_events, "%lld events, %lld metadata",
             static_cast<long long>(plan->events), static_cast<long long>(plan->metadata_events));

  const std::string dir = fuzz::ScratchDir() + "/windows";
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir, ec);
  auto files = import::SplitKinetoWindows(input, *plan, dir, options);
  FUZZ_CHECK(files.ok(), "split failed after the plan read the same input: %s",
             files.status().ToString().c_str());
  FUZZ_CHECK(files->size() == plan->windows(), "%zu files for %zu windows", files->size(),
             plan->windows());

  size_t window_events = 0;
  for (const std::string& file : *files) {
    model::Trace window;
    base::Status status = import::ImportKineto(file, import::ImportOptions(), &window);
    fuzz::CheckImportedTrace(window, status);
    window_events += window.events.size();
  }
  model::Trace whole;
  base::Status status = import::ImportKineto(input, import::ImportOptions(), &whole);
  if (ImportedCleanly(whole, status)) {
    FUZZ_CHECK(window_events == whole.events.size(), "windows hold %zu events, the whole %zu",
               window_events, whole.events.size());
  }
  return 0;
}
