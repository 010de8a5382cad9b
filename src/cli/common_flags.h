// Flags every verb that reads a trace shares (exit codes and errors: cli_status.h).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "cli/cli_status.h"
#include "cli/progress_printer.h"
#include "store/open_trace.h"

namespace teller::cli {

struct CommonFlags {
  std::vector<std::string> inputs;
  int32_t rank = -1;
  int year = 0;
  bool quiet = false;
  int threads = 0;  // trace files and bundle folders imported side by side; 0: one per core
};

void AddCommonFlags(CLI::App* app, CommonFlags* flags, const std::string& what);
// --timings of import and build: each phase's wall time on stderr (PrintTimings).
void AddTimingsFlag(CLI::App* app, bool* timings);
store::OpenOptions ToOpenOptions(const CommonFlags& flags, base::ProgressSink* progress,
                                 bool reconstruct);

}  // namespace teller::cli
