#include "cli/progress_printer.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace teller::cli {
namespace {

using std::chrono::milliseconds;
using Clock = ProgressPrinter::Clock;

// A printer writing to memory with a clock the test moves.
class Harness {
 public:
  explicit Harness(bool terminal, bool quiet = false) {
    file_ = open_memstream(&buffer_, &size_);
    printer_ = std::make_unique<ProgressPrinter>(quiet, file_, terminal, [this] { return now_; });
  }
  ~Harness() {
    printer_.reset();
    std::fclose(file_);
    std::free(buffer_);
  }
  void Advance(milliseconds ms) { now_ += ms; }
  ProgressPrinter& printer() { return *printer_; }
  std::string Output() {
    std::fflush(file_);
    return std::string(buffer_, size_);
  }

 private:
  char* buffer_ = nullptr;
  size_t size_ = 0;
  std::FILE* file_ = nullptr;
  Clock::time_point now_ = Clock::time_point(std::chrono::hours(1));
  std::unique_ptr<ProgressPrinter> printer_;
};

size_t Count(const std::string& text, std::string_view needle) {
  size_t count = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++count;
  }
  return count;
}

TEST(ProgressPrinterTest, FormatsCountsAndTimeLeft) {
  EXPECT_EQ(ProgressPrinter::FormatCount(950), "950");
  EXPECT_EQ(ProgressPrinter::FormatCount(0.5), "0.5");
  EXPECT_EQ(ProgressPrinter::FormatCount(12345), "12.3k");
  EXPECT_EQ(ProgressPrinter::FormatCount(4800000), "4.8M");
  EXPECT_EQ(ProgressPrinter::FormatCount(999999), "1M");
  EXPECT_EQ(ProgressPrinter::FormatSeconds(9.2), "9 s");
  EXPECT_EQ(ProgressPrinter::FormatSeconds(184), "3 min 04 s");
  EXPECT_EQ(ProgressPrinter::FormatSeconds(7500), "2 h 05 min");
  // 1200 of 4800 at 400/s: 3600 left take 9 s.
  EXPECT_EQ(ProgressPrinter::FormatLine("import", 1200, 4800, 400),
            "import: 1.2k/4.8k (25%), 400/s, 9 s left");
  EXPECT_EQ(ProgressPrinter::FormatLine("logs", 1200, 0, 400), "logs: 1.2k, 400/s");
  EXPECT_EQ(ProgressPrinter::FormatLine("x", 5, 10, 0), "x: 5/10 (50%), 0/s");
}

TEST(ProgressPrinterTest, TerminalRedrawsInPlaceWithRateAndTimeLeft) {
  Harness h(/*terminal=*/true);
  h.printer().Update("synth dataset", 0, 100);  // the stage starts
  h.Advance(milliseconds(400));
  h.printer().Update("synth dataset", 4, 100);  // under 500 ms: nothing yet
  EXPECT_EQ(h.Output(), "");
  h.Advance(milliseconds(600));  // 1 s in, 10 done: 10/s, 90 left = 9 s
  h.printer().Update("synth dataset", 10, 100);
  EXPECT_EQ(h.Output(), "\r\033[Ksynth dataset: 10/100 (10%), 10/s, 9 s left");
  h.Advance(milliseconds(100));  // under the redraw interval
  h.printer().Update("synth dataset", 11, 100);
  EXPECT_EQ(Count(h.Output(), "\r\033[K"), 1u);
  h.Advance(milliseconds(1000));  // 2.1 s, 21 done
  h.printer().Update("synth dataset", 21, 100);
  EXPECT_EQ(Count(h.Output(), "\r\033[K"), 2u);
  EXPECT_EQ(h.Output().find('\n'), std::string::npos);  // never a new line
  h.printer().Finish("synth dataset");
  EXPECT_TRUE(h.Output().ends_with("\r\033[K"));  // the line is cleared
}

TEST(ProgressPrinterTest, PipeGetsALineEveryFewSeconds) {
  Harness h(/*terminal=*/false);
  h.printer().Update("evaluate", 0, 0);
  int lines_expected = 0;
  for (int second = 1; second <= 20; ++second) {
    h.Advance(milliseconds(1000));
    h.printer().Update("evaluate", second * 50, 0);
  }
  // Printed at 1 s, then at most every 5 s: 1, 6, 11, 16 s.
  lines_expected = 4;
  const std::string out = h.Output();
  EXPECT_EQ(Count(out, "\n"), size_t(lines_expected));
  EXPECT_EQ(out.find('\r'), std::string::npos);
  EXPECT_EQ(out.find("\033"), std::string::npos);
  EXPECT_NE(out.find("evaluate: 50, 50/s\n"), std::string::npos);
}

TEST(ProgressPrinterTest, QuietPrintsNothing) {
  Harness h(/*terminal=*/true, /*quiet=*/true);
  h.printer().Update("import", 0, 10);
  h.Advance(milliseconds(2000));
  h.printer().Update("import", 5, 10);
  h.printer().Note("[1/2] case one");
  h.printer().Finish("import");
  EXPECT_EQ(h.Output(), "");
}

TEST(ProgressPrinterTest, StagesKeepTheirOwnRateAndRestartOnTheNextInput) {
  Harness h(/*terminal=*/false);
  h.printer().Update("bundles", 0, 4);
  h.Advance(milliseconds(100));
  h.printer().Update("import", 0, 1000);  // inner stage of the first bundle
  h.Advance(milliseconds(900));
  h.printer().Update("import", 1000, 1000);  // done: ends the inner stage
  h.Advance(milliseconds(1000));
  h.printer().Update("bundles", 1, 4);  // 2 s in, 1 done: 0.5/s, 3 left = 6 s
  EXPECT_EQ(h.Output(), "bundles: 1/4 (25%), 0.5/s, 6 s left\n");
  // The inner stage again, for the next bundle: a fresh start, not 2 s old.
  h.printer().Update("import", 0, 1000);
  h.Advance(milliseconds(5000));
  h.printer().Update("import", 500, 1000);  // 500 in 5 s = 100/s
  EXPECT_NE(h.Output().find("import: 500/1k (50%), 100/s, 5 s left\n"), std::string::npos);
}

TEST(ProgressPrinterTest, NoteKeepsResultLinesAboveTheProgressLine) {
  Harness h(/*terminal=*/true);
  h.printer().Update("evaluate", 0, 2);
  h.Advance(milliseconds(1000));
  h.printer().Update("evaluate", 1, 2);
  h.printer().Note("[1/2] a hit");
  EXPECT_EQ(h.Output(), "\r\033[Kevaluate: 1/2 (50%), 1/s, 1 s left\r\033[K[1/2] a hit\n");
  h.Advance(milliseconds(50));  // redrawn at once below the note: 1 in 1.05 s
  h.printer().Update("evaluate", 1, 2);
  EXPECT_TRUE(h.Output().ends_with("a hit\n\r\033[Kevaluate: 1/2 (50%), 0.952/s, 1 s left"))
      << h.Output();
}

}  // namespace
}  // namespace teller::cli
