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

base::StatusOr<Options> Options::FromEnvironment() {
  Options options;
  const char* dir = std::getenv(kEnvOutputDir);
  if (!dir || !*dir)
    return base::InvalidArgument("{} is not set (run under `teller record`)", kEnvOutputDir);
  options.output_dir = dir;
  const char* host = std::getenv(kEnvHost);
  options.host = host && *host ? host : LocalHostName();
  if (const char* flush = std::getenv(kEnvFlushMs); flush && *flush) {
    char* end = nullptr;
    long value = std::strtol(flush, &end, 10);
    if (*end != '\0' || value < 1 || value > 60000) {
      return base::InvalidArgument("{}='{}': expected milliseconds in 1..60000", kEnvFlushMs,
                                   flush);
    }
    options.flush_interval_ms = static_cast<int>(value);
  }
  if (const char* control = std::getenv(kEnvControlFile); control && *control) {
    options.control_file = control;
  }
  if (const char* signals = std::getenv(kEnvSignals); signals && std::string_view(signals) == "0") {
    options.fatal_signal_handlers = false;
  }
  if (const char* kb = std::getenv(kEnvThreadBufferKb); kb && *kb) {
    char* end = nullptr;
    long value = std::strtol(kb, &end, 10);
    if (*end != '\0' || value < 4 || value > (1 << 20)) {
      return base::InvalidArgument("{}='{}': expected KiB in 4..1048576", kEnvThreadBufferKb, kb);
    }
    options.thread_buffer_bytes = static_cast<size_t>(value) << 10;
  }
  if (const char* ms = std::getenv(kEnvRingMs); ms && *ms) {
    char* end = nullptr;
    long value = std::strtol(ms, &end, 10);
    if (*end != '\0' || value < 1000 || value > 3600 * 1000) {
      return base::InvalidArgument("{}='{}': expected milliseconds in 1000..3600000", kEnvRingMs,
                                   ms);
    }
    options.ring_ms = value;
  }
  if (const char* mb = std::getenv(kEnvRingMb); mb && *mb) {
    char* end = nullptr;
    long value = std::strtol(mb, &end, 10);
    if (*end != '\0' || value < 1 || value > (1 << 16)) {
      return base::InvalidArgument("{}='{}': expected MiB in 1..65536", kEnvRingMb, mb);
    }
    options.ring_bytes = static_cast<size_t>(value) << 20;
  }
  if (const char* watch = std::getenv(kEnvWatchFile); watch && *watch) options.watch_file = watch;
  return options;
}

}  // namespace teller::capture
