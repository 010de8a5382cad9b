#include "model/stats.h"

namespace teller::model {

void Stats::Increment(std::string_view name, int64_t by, StatSeverity severity) {
  auto it = entries_.find(name);
  if (it == entries_.end()) it = entries_.emplace(std::string(name), Entry{0, severity}).first;
  it->second.value += by;
}

void Stats::Set(std::string_view name, int64_t value, StatSeverity severity) {
  auto it = entries_.find(name);
  if (it == entries_.end()) it = entries_.emplace(std::string(name), Entry{0, severity}).first;
  it->second.value = value;
  it->second.severity = severity;
}

int64_t Stats::Get(std::string_view name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? 0 : it->second.value;
}

void Stats::Merge(const Stats& other) {
  for (const auto& [name, entry] : other.entries_) Increment(name, entry.value, entry.severity);
}

std::string_view StatSeverityName(StatSeverity severity) {
  switch (severity) {
    case StatSeverity::kInfo: return "info";
    case StatSeverity::kDataLoss: return "data_loss";
    case StatSeverity::kError: return "error";
  }
  return "unknown";
}

}  // namespace teller::model
