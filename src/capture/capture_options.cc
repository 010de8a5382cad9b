#include "capture/capture_options.h"

#include <unistd.h>

#include <cstdlib>
#include <string_view>

namespace teller::capture {

std::string LocalHostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "unknown";
  return name;
}

namespace {

// A whole number in lo..hi from the variable `name`; 0 when it is unset or empty.
base::StatusOr<long> EnvInRange(const char* name, const char* unit, long lo, long hi) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return 0L;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*end != '\0' || value < lo || value > hi) {
    return base::InvalidArgument("{}='{}': expected {} in {}..{}", name, text, unit, lo, hi);
  }
  return value;
}

}  // namespace

base::StatusOr<Options> Options::FromEnvironment() {
  Options options;
  const char* dir = std::getenv(kEnvOutputDir);
  if (!dir || !*dir)
    return base::InvalidArgument("{} is not set (run under `teller record`)", kEnvOutputDir);
  options.output_dir = dir;
  const char* host = std::getenv(kEnvHost);
  options.host = host && *host ? host : LocalHostName();
  TELLER_ASSIGN_OR_RETURN(const long flush_ms, EnvInRange(kEnvFlushMs, "milliseconds", 1, 60000));
  if (flush_ms > 0) options.flush_interval_ms = static_cast<int>(flush_ms);
  if (const char* control = std::getenv(kEnvControlFile); control && *control) {
    options.control_file = control;
  }
  if (const char* signals = std::getenv(kEnvSignals); signals && std::string_view(signals) == "0") {
    options.fatal_signal_handlers = false;
  }
  TELLER_ASSIGN_OR_RETURN(const long kb, EnvInRange(kEnvThreadBufferKb, "KiB", 4, 1 << 20));
  if (kb > 0) options.thread_buffer_bytes = static_cast<size_t>(kb) << 10;
  TELLER_ASSIGN_OR_RETURN(options.ring_ms,
                          EnvInRange(kEnvRingMs, "milliseconds", 1000, 3600 * 1000));
  TELLER_ASSIGN_OR_RETURN(const long mb, EnvInRange(kEnvRingMb, "MiB", 1, 1 << 16));
  if (mb > 0) options.ring_bytes = static_cast<size_t>(mb) << 20;
  if (const char* watch = std::getenv(kEnvWatchFile); watch && *watch) options.watch_file = watch;
  return options;
}

}  // namespace teller::capture
