#include "cli/progress_printer.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace teller::cli {

ProgressPrinter::ProgressPrinter(bool quiet)
    : ProgressPrinter(quiet, stderr, isatty(STDERR_FILENO) != 0, [] { return Clock::now(); }) {}

ProgressPrinter::ProgressPrinter(bool quiet, std::FILE* out, bool terminal, Now now)
    : quiet_(quiet), out_(out), terminal_(terminal), now_(std::move(now)) {}

std::string ProgressPrinter::FormatCount(double value) {
  if (value < 1000) {
    return value == std::floor(value) ? fmt::format("{:.0f}", value) : fmt::format("{:.3g}", value);
  }
  static constexpr const char* kSuffixes[] = {"k", "M", "G", "T"};
  size_t unit = 0;
  value /= 1000;
  while (value >= 999.5 && unit + 1 < std::size(kSuffixes)) {
    value /= 1000;
    ++unit;
  }
  return fmt::format("{:.3g}{}", value, kSuffixes[unit]);
}

std::string ProgressPrinter::FormatSeconds(double seconds) {
  const int64_t s = static_cast<int64_t>(std::llround(std::max(seconds, 0.0)));
  if (s < 60) return fmt::format("{} s", s);
  if (s < 3600) return fmt::format("{} min {:02} s", s / 60, s % 60);
  return fmt::format("{} h {:02} min", s / 3600, (s % 3600) / 60);
}

std::string ProgressPrinter::FormatLine(std::string_view stage, uint64_t done, uint64_t total,
                                        double rate_per_s) {
  std::string line = fmt::format("{}: {}", stage, FormatCount(static_cast<double>(done)));
  if (total > 0) {
    const uint64_t clamped = std::min(done, total);
    line += fmt::format("/{} ({:.0f}%), {}/s", FormatCount(static_cast<double>(total)),
                        100.0 * static_cast<double>(clamped) / static_cast<double>(total),
                        FormatCount(rate_per_s));
    if (rate_per_s > 0) {
      line += ", " + FormatSeconds(static_cast<double>(total - clamped) / rate_per_s) + " left";
    }
  } else {
    line += fmt::format(", {}/s", FormatCount(rate_per_s));
  }
  return line;
}

void ProgressPrinter::Write(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), out_);
  std::fflush(out_);
}

void ProgressPrinter::Update(std::string_view stage, uint64_t done, uint64_t total) {
  if (quiet_) return;
  const Clock::time_point now = now_();
  auto it = stages_.find(stage);
  if (it != stages_.end() && done < it->second.last_done) {
    Finish(stage);  // the same stage again, for the next input
    it = stages_.end();
  }
  if (it == stages_.end()) {
    stages_.emplace(std::string(stage), StageState{now, done, done, false});
    return;
  }
  StageState& state = it->second;
  state.last_done = done;
  if (total > 0 && done >= total) {
    Finish(stage);
    return;
  }
  if (now - state.start < kQuietStart) return;
  const auto interval = terminal_ ? kTerminalInterval : kLogInterval;
  if (line_drawn_ || !terminal_) {
    if (last_print_ != Clock::time_point{} && now - last_print_ < interval) return;
  }
  last_print_ = now;
  const double seconds = std::chrono::duration<double>(now - state.start).count();
  const double rate = done > state.start_done ? (done - state.start_done) / seconds : 0.0;
  const std::string line = FormatLine(stage, done, total, rate);
  Write(terminal_ ? "\r\033[K" + line : line + "\n");
  state.printed = true;
  line_drawn_ = terminal_;
}

void ProgressPrinter::Finish(std::string_view stage) {
  if (quiet_) return;
  auto it = stages_.find(stage);
  if (it == stages_.end()) return;
  const bool printed = it->second.printed;
  stages_.erase(it);
  if (printed && terminal_ && line_drawn_) {
    Write("\r\033[K");
    line_drawn_ = false;
  }
}

void ProgressPrinter::Note(std::string_view line) {
  if (quiet_) return;
  std::string text = terminal_ && line_drawn_ ? "\r\033[K" : "";
  text += line;
  text += "\n";
  Write(text);
  line_drawn_ = false;
}

void PrintTimings(const base::PhaseTimer& timer) {
  std::string json = "{\"phases\": {";
  bool first = true;
  for (const base::PhaseTimer::Phase& phase : timer.phases()) {
    json += fmt::format("{}\"{}\": {:.4f}", first ? "" : ", ", phase.name, phase.seconds);
    first = false;
  }
  json += fmt::format("}}, \"total_s\": {:.4f}}}", timer.total_seconds());
  std::fprintf(stderr, "teller: timings %s\n", json.c_str());
}

}  // namespace teller::cli
