// Named counters: a malformed event is a counter, not an aborted import.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>

#include "model/stat_list.h"

namespace teller::model {

enum class StatSeverity : uint8_t { kInfo, kDataLoss, kError };

// A counter declared in model/stat_list.h: its name (a family's prefix), severity and
// what it counts.
struct StatDef {
  std::string_view name;
  StatSeverity severity;
  std::string_view description;
  std::string_view suffix = {};  // a family's "<what follows the prefix>"; empty otherwise
  bool family() const { return !suffix.empty(); }
};

// The declared counters, as constants: stat::kKinetoEventBadTs.
namespace stat {
#define TELLER_DECLARE_STAT(constant, name, severity, description) \
  inline constexpr StatDef constant{name, StatSeverity::severity, description};
#define TELLER_DECLARE_STAT_FAMILY(constant, prefix, suffix, severity, description) \
  inline constexpr StatDef constant{prefix, StatSeverity::severity, description, suffix};
TELLER_STATS(TELLER_DECLARE_STAT)
TELLER_STAT_FAMILIES(TELLER_DECLARE_STAT_FAMILY)
#undef TELLER_DECLARE_STAT_FAMILY
#undef TELLER_DECLARE_STAT
}  // namespace stat

// Every declared counter, then every family, in the order of model/stat_list.h.
std::span<const StatDef> DeclaredStats();
// The name of a family's counter: its prefix and suffix.
std::string FamilyStatName(const StatDef& family, std::string_view suffix);
// The declared counter a stats entry's name belongs to (itself, or the family whose
// prefix it starts with); nullptr for an undeclared name.
const StatDef* FindDeclaredStat(std::string_view name);
// The declared counters as text (name, severity, description per line), or as the
// markdown page docs/counters.md.
std::string RenderDeclaredStats(bool markdown);

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
  // A declared counter (model/stat_list.h), with its declared severity.
  void Increment(const StatDef& stat, int64_t by = 1) { Increment(stat.name, by, stat.severity); }
  void Set(const StatDef& stat, int64_t value) { Set(stat.name, value, stat.severity); }
  int64_t Get(const StatDef& stat) const { return Get(stat.name); }
  const std::map<std::string, Entry, std::less<>>& entries() const { return entries_; }
  void Merge(const Stats& other);

 private:
  std::map<std::string, Entry, std::less<>> entries_;
};

std::string_view StatSeverityName(StatSeverity severity);

}  // namespace teller::model
