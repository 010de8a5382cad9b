// `teller record -o DIR [options] -- CMD ARGS...`: the CLI side of src/record/.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace teller::cli {

struct RecordFlags {
  std::string output;
  bool no_cupti = false;
  bool no_python_hooks = false;
  std::string python_hooks;
  std::string capture_range;
  std::vector<std::string> command;
};

// Adds the `record` subcommand to app, parsing into *flags (which must outlive app).
CLI::App* AddRecordCommand(CLI::App* app, RecordFlags* flags);

// Runs the command under the collector. Returns the command's exit status (128+signal
// when it was killed), or 1 when teller could not start it (message on stderr).
int RunRecordCommand(const RecordFlags& flags);

}  // namespace teller::cli
