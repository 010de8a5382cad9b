#include "cli/progress_printer.h"

#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

namespace teller::cli {

ProgressPrinter::ProgressPrinter(bool quiet) : quiet_(quiet), terminal_(isatty(STDERR_FILENO)) {}

void ProgressPrinter::Update(std::string_view stage, uint64_t done, uint64_t total) {
  if (quiet_) return;
  Clock::time_point now = Clock::now();
  if (stage != stage_) {
    stage_ = std::string(stage);
    stage_start_ = now;
    last_print_ = now;
    return;
  }
  auto since_print = now - last_print_;
  if (since_print < (terminal_ ? std::chrono::milliseconds(200) : std::chrono::seconds(5))) return;
  if (now - stage_start_ < std::chrono::milliseconds(500)) return;
  last_print_ = now;
  double seconds = std::chrono::duration<double>(now - stage_start_).count();
  double rate = seconds > 0 ? done / seconds : 0;
  std::string line = fmt::format("{}: {}", stage_, done);
  if (total > 0) {
    double left = rate > 0 ? (total - std::min(done, total)) / rate : 0;
    line += fmt::format("/{} ({:.0f}%), {:.3g}/s, {:.0f} s left", total, 100.0 * done / total, rate,
                        left);
  } else {
    line += fmt::format(", {:.3g}/s", rate);
  }
  std::fprintf(stderr, terminal_ ? "\r\033[K%s" : "%s\n", line.c_str());
  printed_ = true;
}

void ProgressPrinter::Finish(std::string_view stage) {
  if (quiet_ || !printed_) return;
  if (terminal_) std::fprintf(stderr, "\r\033[K");
  printed_ = false;
}

}  // namespace teller::cli
