// Progress of long work, reported by library code and shown by the CLI.
#pragma once

#include <cstdint>
#include <string_view>

namespace teller::base {

class ProgressSink {
 public:
  virtual ~ProgressSink() = default;
  // total is 0 when unknown. Called often; implementations throttle.
  virtual void Update(std::string_view stage, uint64_t done, uint64_t total) = 0;
  virtual void Finish(std::string_view stage) {}
};

// Calls a possibly null sink.
inline void ReportProgress(ProgressSink* sink, std::string_view stage, uint64_t done,
                           uint64_t total) {
  if (sink) sink->Update(stage, done, total);
}

// A stage reported as begun when made and finished when it goes out of scope (what a
// PhaseTimer times).
class ScopedStage {
 public:
  ScopedStage(ProgressSink* sink, std::string_view stage) : sink_(sink), stage_(stage) {
    ReportProgress(sink_, stage_, 0, 0);
  }
  ~ScopedStage() {
    if (sink_) sink_->Finish(stage_);
  }
  ScopedStage(const ScopedStage&) = delete;
  ScopedStage& operator=(const ScopedStage&) = delete;

 private:
  ProgressSink* sink_;
  std::string_view stage_;
};

}  // namespace teller::base
