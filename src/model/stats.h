// Named counters: a malformed event is a counter, not an aborted import.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace teller::model {

enum class StatSeverity : uint8_t { kInfo, kDataLoss, kError };

class Stats {
 public:
  struct Entry {
    int64_t value = 0;
    StatSeverity severity = StatSeverity::kInfo;
  };

  // Names are snake_case and start with the stage or importer ("kineto_event_missing_ts").
  void Increment(std::string_view name, int64_t by = 1,
                 StatSeverity severity = StatSeverity::kError);
  void Set(std::string_view name, int64_t value, StatSeverity severity = StatSeverity::kInfo);
  int64_t Get(std::string_view name) const;
  const std::map<std::string, Entry, std::less<>>& entries() const { return entries_; }
  void Merge(const Stats& other);

 private:
  std::map<std::string, Entry, std::less<>> entries_;
};

std::string_view StatSeverityName(StatSeverity severity);

}  // namespace teller::model
