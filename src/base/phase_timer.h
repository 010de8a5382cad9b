// Wall time of the phases of long work: a progress sink that records when each stage is
// first reported and when it finishes, and passes everything on to another sink (the
// CLI's progress line). Phases the library does not report are timed with Begin/End.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "base/progress.h"

namespace teller::base {

class PhaseTimer : public ProgressSink {
 public:
  using Clock = std::chrono::steady_clock;
  struct Phase {
    std::string name;
    double seconds = 0;
  };

  explicit PhaseTimer(ProgressSink* inner) : inner_(inner), start_(Clock::now()) {}

  void Update(std::string_view stage, uint64_t done, uint64_t total) override;
  void Finish(std::string_view stage) override;
  void Begin(std::string_view stage);
  // Ends a phase that began; one that never did is not made up.
  void End(std::string_view stage);

  // Takes the phases another timer measured (on another thread, once it is done).
  void Merge(const PhaseTimer& other);

  // In the order they began; a phase not finished runs until now.
  std::vector<Phase> phases() const;
  double total_seconds() const;

 private:
  struct Open {
    std::string name;
    Clock::time_point begin;
    Clock::time_point end;
    bool done = false;
  };
  Open& Find(std::string_view stage);

  ProgressSink* inner_;
  Clock::time_point start_;
  std::vector<Open> phases_;
};

}  // namespace teller::base
