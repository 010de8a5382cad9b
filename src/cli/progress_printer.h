// Progress on stderr for long work: count, rate and time left, redrawn in place on a
// terminal, a line every few seconds otherwise, nothing when quiet. Library code
// reports through base::ProgressSink; this is the CLI's sink. Clock and stream are
// injectable for tests.
#pragma once

#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "base/phase_timer.h"
#include "base/progress.h"

namespace teller::cli {

class ProgressPrinter : public base::ProgressSink {
 public:
  using Clock = std::chrono::steady_clock;
  using Now = std::function<Clock::time_point()>;

  // A redraw at most this often on a terminal, a line at most this often otherwise.
  static constexpr std::chrono::milliseconds kTerminalInterval{200};
  static constexpr std::chrono::milliseconds kLogInterval{5000};
  // Nothing shown for work that ends sooner.
  static constexpr std::chrono::milliseconds kQuietStart{500};

  // stderr, the steady clock; in place when stderr is a terminal.
  explicit ProgressPrinter(bool quiet);
  ProgressPrinter(bool quiet, std::FILE* out, bool terminal, Now now);

  // Stages may interleave (an outer loop over inputs around an import); each keeps
  // its own start, so its rate and time left stay right. A stage starts over when
  // done goes back (the next file), and ends when done reaches a known total.
  void Update(std::string_view stage, uint64_t done, uint64_t total) override;
  void Finish(std::string_view stage) override;
  // A line of its own (a per-item result), kept above the redrawn progress line.
  void Note(std::string_view line);

  // "import: 1.20M/4.80M (25%), 400k/s, 9 s left"; total 0: "import: 1.20M, 400k/s".
  static std::string FormatLine(std::string_view stage, uint64_t done, uint64_t total,
                                double rate_per_s);
  // 950 -> "950", 12345 -> "12.3k", 4800000 -> "4.80M".
  static std::string FormatCount(double value);
  // 9.2 -> "9 s", 184 -> "3 min 04 s", 7500 -> "2 h 05 min".
  static std::string FormatSeconds(double seconds);

 private:
  struct StageState {
    Clock::time_point start;
    uint64_t start_done = 0;
    uint64_t last_done = 0;
    bool printed = false;
  };
  void Write(const std::string& text);

  bool quiet_;
  std::FILE* out_;
  bool terminal_;
  Now now_;
  std::map<std::string, StageState, std::less<>> stages_;
  Clock::time_point last_print_{};
  bool line_drawn_ = false;  // terminal: a progress line is on screen
};

// --timings: "teller: timings {"phases": {"kineto": 0.41, ...}, "total_s": 0.83}" on stderr.
void PrintTimings(const base::PhaseTimer& timer);

}  // namespace teller::cli
