// Test-only: where two traces differ, so a test that expects the same trace from two
// paths (files imported side by side, a file parsed in parts) names what differs.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "fmt/format.h"
#include "model/trace.h"

namespace teller::model::testing {

namespace internal {

template <typename T>
std::string ColumnDifference(std::string_view table, std::string_view column,
                             const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) {
    return fmt::format("{}.{}: {} rows against {}", table, column, a.size(), b.size());
  }
  for (size_t row = 0; row < a.size(); ++row) {
    if (!(a[row] == b[row])) return fmt::format("{}.{}: row {} differs", table, column, row);
  }
  return {};
}

}  // namespace internal

// The first difference of a and b: a string, the meta, a counter, or a table's column
// (its row count or first differing row); "" when every one is the same.
inline std::string TraceDifference(const Trace& a, const Trace& b) {
  if (a.strings.size() != b.strings.size()) {
    return fmt::format("strings: {} against {}", a.strings.size(), b.strings.size());
  }
  for (size_t i = 0; i < a.strings.size(); ++i) {
    const base::StringId id(static_cast<uint32_t>(i));
    if (a.str(id) != b.str(id)) {
      return fmt::format("string {}: \"{}\" against \"{}\"", i, a.str(id), b.str(id));
    }
  }
  if (a.meta.format != b.meta.format) return "meta.format differs";
  if (a.meta.sources != b.meta.sources) return "meta.sources differ";
  for (size_t i = 0; i < std::max(a.meta.notes.size(), b.meta.notes.size()); ++i) {
    const std::string none = "(none)";
    const std::string& note_a = i < a.meta.notes.size() ? a.meta.notes[i] : none;
    const std::string& note_b = i < b.meta.notes.size() ? b.meta.notes[i] : none;
    if (note_a != note_b)
      return fmt::format("meta.notes[{}]: \"{}\" against \"{}\"", i, note_a, note_b);
  }
  if (a.meta.labels_json != b.meta.labels_json) return "meta.labels_json differs";
  if (a.meta.meta_json != b.meta.meta_json) return "meta.meta_json differs";
  for (const auto& [name, entry] : a.stats.entries()) {
    auto other = b.stats.entries().find(name);
    if (other == b.stats.entries().end()) return fmt::format("counter {}: only in the first", name);
    if (other->second.value != entry.value || other->second.severity != entry.severity) {
      return fmt::format("counter {}: {} against {}", name, entry.value, other->second.value);
    }
  }
  if (a.stats.entries().size() != b.stats.entries().size()) {
    return fmt::format("counters: {} against {}", a.stats.entries().size(),
                       b.stats.entries().size());
  }
  if (a.reconstructed != b.reconstructed) return "reconstructed differs";
  if (a.step_requests != b.step_requests) return "step_requests differ";
  std::string difference;
#define TELLER_DIFF_COLUMN(sql_name, field, Type, Kind, Target, Base)             \
  if (difference.empty()) {                                                       \
    difference = internal::ColumnDifference(table, #field, from.field, to.field); \
  }
#define TELLER_DIFF_DERIVED(sql_name, sql_type)
#define TELLER_DIFF_TABLE(sql_table, member, ModelType, row_column, row_base, COLUMNS) \
  {                                                                                    \
    const std::string_view table = #member;                                            \
    const auto& from = a.member;                                                       \
    const auto& to = b.member;                                                         \
    COLUMNS(TELLER_DIFF_COLUMN, TELLER_DIFF_DERIVED)                                   \
  }
  TELLER_SHARED_TRACE_TABLES(TELLER_DIFF_TABLE)
  TELLER_ROW_TRACE_TABLES(TELLER_DIFF_TABLE)
#undef TELLER_DIFF_TABLE
#undef TELLER_DIFF_DERIVED
#undef TELLER_DIFF_COLUMN
  return difference;
}

}  // namespace teller::model::testing
