#include "record/watch.h"

#include <algorithm>
#include <array>
#include <filesystem>

#include <fmt/format.h>

#include "base/file_util.h"
#include "capture/process_status.h"
#include "wire/bundle_writer.h"

namespace teller::record {
namespace {

namespace fs = std::filesystem;

std::string Seconds(int64_t ns) { return fmt::format("{:.1f} s", static_cast<double>(ns) / 1e9); }

// "40 us", "5.2 ms", "1.3 s".
std::string Short(int64_t ns) {
  const double value = static_cast<double>(ns);
  if (ns < 1'000'000) return fmt::format("{:.0f} us", value / 1e3);
  if (ns < 1'000'000'000) return fmt::format("{:.1f} ms", value / 1e6);
  return Seconds(ns);
}

// Open work that is a hang: it completed before, and is open past both limits.
bool IsHang(const capture::OpenWork& work, const WatchOptions& options, int64_t now_ns) {
  const int64_t open_ns = now_ns - work.since_ns;
  return work.completions > 0 && open_ns >= options.hang_after_ms * 1'000'000 &&
         static_cast<double>(open_ns) >= options.hang_factor * static_cast<double>(work.longest_ns);
}

// How many of the last steps ran longer than the limit, counted from the newest.
int SlowStreak(const std::vector<int64_t>& steps_ns, int64_t limit_ns) {
  int streak = 0;
  for (auto it = steps_ns.rbegin(); it != steps_ns.rend() && *it > limit_ns; ++it) ++streak;
  return streak;
}

}  // namespace

std::optional<WatchTrigger> FindHang(const std::string& bundle, const WatchOptions& options,
                                     int64_t now_monotonic_ns) {
  std::optional<WatchTrigger> found;
  int64_t longest_open_ns = -1;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(bundle, ec)) {
    const std::string folder = entry.path().filename().string();
    if (folder.rfind("proc-", 0) != 0) continue;
    auto text = base::ReadFile((entry.path() / capture::kProgressFileName).string());
    if (!text.ok()) continue;
    const capture::ProcessProgress progress = capture::ParseProgress(*text);
    for (const capture::OpenWork& work : progress.open) {
      const int64_t open_ns = now_monotonic_ns - work.since_ns;
      if (!IsHang(work, options, now_monotonic_ns) || open_ns <= longest_open_ns) continue;
      longest_open_ns = open_ns;
      found = WatchTrigger{
          "hang",
          fmt::format("{} '{}' in {} has been open for {} (its {} earlier runs took at most {})",
                      work.step ? "the engine step" : "the range", work.name, folder,
                      Seconds(open_ns), work.completions, Short(work.longest_ns)),
          wire::SampleHostClocks().realtime_ns};
    }
    if (options.slow_step_ms <= 0 || found) continue;
    const int streak = SlowStreak(progress.recent_step_ns, options.slow_step_ms * 1'000'000);
    if (streak >= options.slow_steps) {
      found = WatchTrigger{"slowdown",
                           fmt::format("the last {} engine steps in {} took over {} ms each",
                                       streak, folder, options.slow_step_ms),
                           wire::SampleHostClocks().realtime_ns};
    }
  }
  return found;
}

bool IsFailureLine(std::string_view line) {
  // What PyTorch, NCCL, the CUDA runtime and the kernel's OOM report print when the
  // process cannot go on; a handled Python traceback is not one of them.
  static constexpr std::array<std::string_view, 12> kFailures = {
      "CUDA error:",
      "an illegal memory access was encountered",
      "unspecified launch failure",
      "misaligned address",
      "Watchdog caught collective operation timeout",
      "NCCL error",
      "ncclInternalError",
      "ncclSystemError",
      "CUDA out of memory",
      "OutOfMemoryError",
      "Fatal Python error",
      "Segmentation fault",
  };
  return std::any_of(kFailures.begin(), kFailures.end(), [&](std::string_view failure) {
    return line.find(failure) != std::string_view::npos;
  });
}

}  // namespace teller::record
