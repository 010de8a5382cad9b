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

}  // namespace teller::base
