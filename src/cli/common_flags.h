// Flags every verb that reads a trace shares, and the exit codes of the CLI.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "cli/progress_printer.h"
#include "store/open_trace.h"

namespace teller::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

struct CommonFlags {
  std::vector<std::string> inputs;
  int32_t rank = -1;
  int year = 0;
  bool quiet = false;
};

void AddCommonFlags(CLI::App* app, CommonFlags* flags, const std::string& what);
store::OpenOptions ToOpenOptions(const CommonFlags& flags, ProgressPrinter* progress,
                                 bool reconstruct);
// Prints "teller: <status>" on stderr and returns kExitFailure.
int Fail(const base::Status& status);
void Print(const std::string& text);

}  // namespace teller::cli
