#include "record/record_command.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

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
  record->add_flag("--watch", flags->watch,
                   "keep only the last --ring of events in memory; write the bundle and print "
                   "the diagnosis when the command hangs (a step open --hang-after and 10x its "
                   "longest), prints a CUDA/NCCL/out-of-memory error, crashes, or (with "
                   "--slow-step) runs --slow-steps slow steps in a row");
  record->add_option("--ring", flags->ring, "--watch: events kept per process (default 60s)");
  record
      ->add_option("--ring-mb", flags->ring_mb,
                   "--watch: memory for them per process, MiB (default 64)")
      ->check(CLI::Range(1, 65536));
  record->add_option("--hang-after", flags->hang_after,
                     "--watch: how long a step may stay open before it is a hang (default 5s)");
  record->add_option("--slow-step", flags->slow_step,
                     "--watch: an engine step longer than this is slow (e.g. 250ms; off by "
                     "default)");
  record
      ->add_option("--slow-steps", flags->slow_steps,
                   "--watch: slow steps in a row that fire the slowdown trigger (default 5)")
      ->check(CLI::Range(1, 16));
  record->add_option("--diagnose-with", flags->diagnose_exe,
                     "--watch: the teller binary that runs `diagnose` on a trigger (default: "
                     "this teller)");
  record->add_option("command", flags->command, "the command to run, after --")
      ->required()
      ->expected(-1);
  return record;
}

namespace {

// "60s", "500ms", "2m", "1.5s" as nanoseconds.
base::StatusOr<int64_t> ParseDuration(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  const std::string unit = end ? end : "";
  double scale = 0;
  if (unit == "ms") scale = 1e6;
  if (unit == "s") scale = 1e9;
  if (unit == "m") scale = 60e9;
  if (end == text.c_str() || scale == 0 || !(value > 0)) {
    return base::InvalidArgument("{} '{}': expected a duration such as 500ms, 60s or 2m", flag,
                                 text);
  }
  return static_cast<int64_t>(value * scale);
}

base::StatusOr<WatchOptions> ToWatchOptions(const RecordFlags& flags) {
  WatchOptions watch;
  watch.enabled = flags.watch;
  if (!flags.watch) return watch;
  TELLER_ASSIGN_OR_RETURN(const int64_t ring_ns, ParseDuration("--ring", flags.ring));
  TELLER_ASSIGN_OR_RETURN(const int64_t hang_ns, ParseDuration("--hang-after", flags.hang_after));
  if (ring_ns < 1'000'000'000) return base::InvalidArgument("--ring: at least 1s");
  watch.ring_ms = ring_ns / 1'000'000;
  watch.ring_mb = flags.ring_mb;
  watch.hang_after_ms = hang_ns / 1'000'000;
  watch.slow_steps = flags.slow_steps;
  if (!flags.slow_step.empty()) {
    TELLER_ASSIGN_OR_RETURN(const int64_t slow_ns, ParseDuration("--slow-step", flags.slow_step));
    watch.slow_step_ms = std::max<int64_t>(1, slow_ns / 1'000'000);
  }
  return watch;
}

// Runs `<exe> diagnose <bundle>` with the terminal's output; waits for it.
void RunDiagnosis(const std::string& exe, const std::string& bundle) {
  std::fflush(nullptr);
  const pid_t child = fork();
  if (child == 0) {
    execl(exe.c_str(), exe.c_str(), "diagnose", bundle.c_str(), "--learned-model", "none",
          static_cast<char*>(nullptr));
    std::fprintf(stderr, "teller: cannot run %s: %s\n", exe.c_str(), std::strerror(errno));
    _exit(127);
  }
  if (child > 0) waitpid(child, nullptr, 0);
}

}  // namespace

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
  auto watch = ToWatchOptions(flags);
  if (!watch.ok()) {
    std::fprintf(stderr, "teller: %s\n", watch.status().message().c_str());
    return 2;
  }
  options.watch = *watch;
  options.on_trigger = [&](const WatchTrigger& trigger) {
    std::fprintf(stderr, "teller: watch: %s: %s\n", trigger.kind.c_str(), trigger.detail.c_str());
    if (flags.diagnose_exe.empty()) {
      std::fprintf(stderr, "teller: run `teller diagnose %s` for the verdict\n",
                   flags.output.c_str());
      return;
    }
    RunDiagnosis(flags.diagnose_exe, flags.output);
  };
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
