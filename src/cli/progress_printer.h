// Progress on stderr for long work: rate and time left, redrawn in place on a
// terminal, a line every few seconds otherwise.
#pragma once

#include <chrono>
#include <string>

#include "base/progress.h"

namespace teller::cli {

class ProgressPrinter : public base::ProgressSink {
 public:
  explicit ProgressPrinter(bool quiet);
  void Update(std::string_view stage, uint64_t done, uint64_t total) override;
  void Finish(std::string_view stage) override;

 private:
  using Clock = std::chrono::steady_clock;
  bool quiet_;
  bool terminal_;
  std::string stage_;
  Clock::time_point stage_start_;
  Clock::time_point last_print_;
  bool printed_ = false;
};

}  // namespace teller::cli
