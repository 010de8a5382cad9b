// The launcher behind `teller record`: runs a command under the collector and writes a
// raw bundle (docs/format.md, docs/capture.md).
//
// It checks the output folder before starting anything, writes a first meta.json,
// sets the injection variables (NVTX_INJECTION64_PATH, CUDA_INJECTION64_PATH,
// PYTHONPATH for the hooks, TELLER_*) that every descendant inherits, runs the command
// without a shell, tees its stdout/stderr line by line into logs/console.jsonl with
// realtime stamps, forwards signals, samples clocks, and at the end records in
// meta.json which processes ended abnormally. It does not print: the caller gets
// the child's exit status (128+signal when killed) and a list of notes.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "record/watch.h"
#include "wire/bundle_meta.h"

namespace teller::record {

// Where the injection libraries and the Python hooks are.
struct InstallLayout {
  std::string lib_dir;          // holds libteller_capture.so and the injections
  std::string nvtx_injection;   // "" when not built
  std::string cupti_injection;  // "" when not built (no CUPTI at build time)
  std::string capture_lib;      // libteller_capture.so, for the Python hooks
  std::string python_dir;       // folder with sitecustomize.py, "" when not found
};

// Looks next to the teller executable (exe_path): <dir>/lib, <dir>/../lib/teller,
// <dir>/../lib; python hooks in <dir>/python/teller_hook, <dir>/../share/teller/python/
// teller_hook, then the source tree. TELLER_LIB_DIR / TELLER_PYTHON_DIR override.
InstallLayout FindInstallLayout(const std::string& exe_path);

struct RecordOptions {
  std::string output_dir;
  // argv; command[0] is looked up in PATH and run with execvpe (no shell). meta.json
  // keeps it with credentials redacted (capture::RedactCommandLine).
  std::vector<std::string> command;
  bool cupti = true;
  bool python_hooks = true;
  std::string python_hooks_file;  // "" = the default list shipped with the hooks
  // "" (trace all the time), "signal" (SIGUSR1 starts, SIGUSR2 stops; starts off) or
  // "http:PORT" (GET /start, GET /stop on 127.0.0.1:PORT; starts off).
  std::string capture_range;
  InstallLayout layout;
  int clock_sample_interval_s = 10;
  int stdout_fd = 1;  // where the child's output is passed through
  int stderr_fd = 2;
  // After the command exits, how long to wait for descendants to close its pipes.
  int drain_timeout_ms = 2000;
  // Called from the loop once the child runs (tests use it to send signals).
  std::function<void(int child_pid)> on_started;
  // --watch: the processes keep a ring in memory; the bundle gets it when a trigger
  // fires (record/watch.h) and at each process's exit.
  WatchOptions watch;
  // Called once the bundle holds what the trigger asked for (the command may still
  // run: a hang); with a trigger of kind "exit" after a watched command failed.
  std::function<void(const WatchTrigger& trigger)> on_trigger;
};

struct RecordResult {
  int exit_code = 0;  // the child's status, 128+signal when killed by one
  int child_pid = 0;
  std::vector<std::string> notes;      // what the CLI should tell the user
  std::vector<WatchTrigger> triggers;  // --watch: the triggers that fired
};

// Fails (before running anything) when the output folder is not writable or already
// holds a bundle, or when the command is empty. Once the command ran, the result
// carries its exit status whatever happened to the recording.
base::StatusOr<RecordResult> RunRecord(const RecordOptions& options);

// Environment variables copied into meta.json notes: an allow-list (exact names and
// prefixes, docs/capture.md); names containing TOKEN, KEY, SECRET, PASSWORD or
// CREDENTIAL (any case) have their value replaced by "<redacted>", and credential-shaped
// text in the other values too (capture/redaction.h). Nothing else of the environment
// is written anywhere.
bool IsRecordedEnvironmentVariable(std::string_view name);
bool IsSecretEnvironmentVariable(std::string_view name);
// The "env NAME=value" notes for an environment, sorted by name.
std::vector<std::string> EnvironmentNotes(const std::map<std::string, std::string>& env);

// GPUs the NVIDIA driver lists under /proc/driver/nvidia/gpus (empty without one).
std::vector<wire::DeviceInfo> ListGpus(const std::string& host,
                                       const std::string& proc_root = "/proc/driver/nvidia/gpus");

}  // namespace teller::record
