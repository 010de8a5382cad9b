// `teller record -o DIR [options] -- CMD ARGS...`: the command-line front of this stage,
// shared by the `teller` binary (src/cli/main.cc) and teller_record_tool. It is the one
// part of src/record/ that prints (the run's notes on stderr, errors as "teller: ..."
// like cli/cli_status.h); its own library, teller_record_command, so that the
// launcher (teller_record) stays free of CLI11 and of printing.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace teller::record {

struct RecordFlags {
  std::string output;
  bool no_cupti = false;
  bool no_python_hooks = false;
  std::string python_hooks;
  std::string capture_range;
  std::vector<std::string> command;
  // --watch and its limits ("60s", "500ms", "2m").
  bool watch = false;
  std::string ring = "60s";
  int64_t ring_mb = 64;
  std::string hang_after = "5s";
  std::string slow_step;
  int slow_steps = 5;
  // The teller binary that diagnoses the bundle when a trigger fires; `teller` sets
  // itself, the standalone tool has none unless --diagnose-with names one.
  std::string diagnose_exe;
};

// Adds the `record` subcommand to app, parsing into *flags (which must outlive app).
CLI::App* AddRecordCommand(CLI::App* app, RecordFlags* flags);

// Runs the command under the collector. Returns the command's exit status (128+signal
// when it was killed), or 1 when teller could not start it (message on stderr).
int RunRecordCommand(const RecordFlags& flags);

}  // namespace teller::record
