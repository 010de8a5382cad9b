// `teller record --watch`: when to persist the rings of the traced processes. The
// processes keep their last seconds of events in memory (capture/session.h, ring
// mode) and report what they have open in their `progress` side file; the launcher
// decides from those files and from the command's output lines that something went
// wrong, and asks every process to write its ring (docs/capture.md, "Watch mode").
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace teller::record {

struct WatchOptions {
  bool enabled = false;
  int64_t ring_ms = 60'000;  // events kept per process
  int64_t ring_mb = 64;      // and at most this much memory for them
  // Hang: a step (or NVTX range) that completed before has been open this long, and
  // hang_factor times its longest completion.
  int64_t hang_after_ms = 5'000;
  double hang_factor = 10.0;
  // Slowdown: `slow_step_ms` > 0 and `slow_steps` consecutive engine steps longer.
  int64_t slow_step_ms = 0;
  int slow_steps = 5;
};

struct WatchTrigger {
  std::string kind;    // "hang", "crash", "slowdown", "exit"
  std::string detail;  // one sentence: what was seen, where
  int64_t detected_realtime_ns = 0;
};

// A hang in one of the bundle's process folders (their `progress` files), as of
// now_monotonic_ns; the longest-open work first.
std::optional<WatchTrigger> FindHang(const std::string& bundle, const WatchOptions& options,
                                     int64_t now_monotonic_ns);

// An output line that reports a failure the service will not recover from by itself:
// a CUDA error, an NCCL watchdog timeout or error, out of memory, a fatal signal.
bool IsFailureLine(std::string_view line);

}  // namespace teller::record
