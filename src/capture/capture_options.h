// What an injected process learns from `teller record` through TELLER_* variables.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace teller::capture {

// The control variables `teller record` sets and every child inherits.
inline constexpr const char* kEnvOutputDir = "TELLER_OUTPUT_DIR";         // bundle directory
inline constexpr const char* kEnvHost = "TELLER_HOST";                    // recorder's host name
inline constexpr const char* kEnvFlushMs = "TELLER_FLUSH_MS";             // timer flush period
inline constexpr const char* kEnvControlFile = "TELLER_CAPTURE_CONTROL";  // "on"/"off" file
inline constexpr const char* kEnvCaptureLib = "TELLER_CAPTURE_LIB";       // libteller_capture.so
inline constexpr const char* kEnvPythonHooks = "TELLER_PYTHON_HOOKS";     // hooks file, "0" off
inline constexpr const char* kEnvCuptiMemoryMb = "TELLER_CUPTI_MEMORY_MB";
inline constexpr const char* kEnvSignals = "TELLER_FATAL_SIGNAL_HANDLERS";  // "0": none
inline constexpr const char* kEnvThreadBufferKb = "TELLER_THREAD_BUFFER_KB";
// `teller record --watch`: keep the last TELLER_RING_MS of events in memory (at most
// TELLER_RING_MB), write them when TELLER_WATCH_FILE's number grows, at exit and on a
// fatal signal; report open steps and ranges in the side file `progress`.
inline constexpr const char* kEnvRingMs = "TELLER_RING_MS";
inline constexpr const char* kEnvRingMb = "TELLER_RING_MB";
inline constexpr const char* kEnvWatchFile = "TELLER_WATCH_FILE";

struct Options {
  std::string output_dir;  // the bundle; process folders are created inside
  std::string host;        // host name used in proc-<host>-<pid>
  int flush_interval_ms = 200;
  std::string control_file;  // empty: capture is always on
  bool fatal_signal_handlers = true;
  size_t thread_buffer_bytes = 256 << 10;  // per-thread event ring (16-byte events)
  int64_t ring_ms = 0;                     // > 0: watch mode, events held in memory
  size_t ring_bytes = 64 << 20;
  std::string watch_file;  // persist requests: a growing number

  bool watching() const { return ring_ms > 0; }

  // TELLER_OUTPUT_DIR is required; everything else has a default.
  static base::StatusOr<Options> FromEnvironment();
};

// The host name as gethostname() says, "unknown" if it fails.
std::string LocalHostName();

}  // namespace teller::capture
