#include "record/record_command.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "record/recorder.h"

namespace teller::record {

CLI::App* AddRecordCommand(CLI::App* app, RecordFlags* flags) {
  CLI::App* record = app->add_subcommand(
      "record",
      "Run a command under the collector (NVTX and CUPTI injection, Python hooks, stdout/stderr "
      "capture) and write a raw bundle. Usage: teller record -o DIR [options] -- CMD ARGS...");
  record->add_option("-o,--output", flags->output, "bundle directory to write")->required();
  record->add_flag("--no-cupti", flags->no_cupti, "do not inject CUPTI (no GPU activity records)");
  record->add_flag("--no-python-hooks", flags->no_python_hooks,
                   "do not install the Python import-time hooks");
  record->add_option("--python-hooks", flags->python_hooks,
                     "file listing functions to wrap, one 'module:qualname:layer' per line "
                     "(default: the engine adapters shipped with teller)");
  record->add_option("--capture-range", flags->capture_range,
                     "trace only between start and stop: 'signal' (SIGUSR1 to teller starts, "
                     "SIGUSR2 stops) or 'http:PORT' (GET /start, GET /stop on 127.0.0.1:PORT)");
  record->add_option("command", flags->command, "the command to run, after --")
      ->required()
      ->expected(-1);
  return record;
}

int RunRecordCommand(const RecordFlags& flags) {
  std::error_code ec;
  std::string exe = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  RecordOptions options;
  options.output_dir = flags.output;
  options.command = flags.command;
  options.cupti = !flags.no_cupti;
  options.python_hooks = !flags.no_python_hooks;
  options.python_hooks_file = flags.python_hooks;
  options.capture_range = flags.capture_range;
  options.layout = FindInstallLayout(exe);
  auto result = RunRecord(options);
  if (!result.ok()) {
    std::fprintf(stderr, "teller: %s\n", result.status().ToString().c_str());
    return 1;
  }
  for (const std::string& note : result->notes) std::fprintf(stderr, "teller: %s\n", note.c_str());
  std::fprintf(stderr, "teller: bundle written to %s\n", flags.output.c_str());
  return result->exit_code;
}

}  // namespace teller::record
