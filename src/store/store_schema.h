// The store's SQL schema (tables, indexes, views) and the text of its enum columns.
// docs/store.md documents every table; keep the two in step.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "model/layer.h"
#include "model/stats.h"
#include "model/trace.h"

namespace teller::store {

// Bump when a table or column changes; stores of another version are refused.
inline constexpr int64_t kSchemaVersion = 1;
// PRAGMA application_id of every teller store ("TLLR").
inline constexpr int64_t kApplicationId = 0x544C4C52;

// CREATE TABLE statements, run before the bulk insert; generated from the column lists
// of model/trace_columns.h (the text is the same as schema_version 1 always had).
const std::string& CreateTablesSql();
// CREATE INDEX statements, run after the bulk insert.
extern const char kCreateIndexes[];
// CREATE VIEW statements for the sqlite3 shell.
extern const char kCreateViews[];

// Text of enum columns, indexed by the enum's value.
std::span<const std::string_view> LayerNames();
std::span<const std::string_view> EventPhaseNames();
std::span<const std::string_view> ArgTypeNames();
std::span<const std::string_view> LogLevelNames();
std::span<const std::string_view> LogStreamNames();
std::span<const std::string_view> LogAlignmentNames();
std::span<const std::string_view> StepPhaseNames();
std::span<const std::string_view> StepSourceNames();
std::span<const std::string_view> TraceFormatNames();
std::span<const std::string_view> StatSeverityNames();

// The names of an enum column's type, for code generated from the column lists.
inline std::span<const std::string_view> EnumNames(model::Layer) { return LayerNames(); }
inline std::span<const std::string_view> EnumNames(model::EventPhase) { return EventPhaseNames(); }
inline std::span<const std::string_view> EnumNames(model::ArgType) { return ArgTypeNames(); }
inline std::span<const std::string_view> EnumNames(model::LogLevel) { return LogLevelNames(); }
inline std::span<const std::string_view> EnumNames(model::LogStream) { return LogStreamNames(); }
inline std::span<const std::string_view> EnumNames(model::LogAlignment) {
  return LogAlignmentNames();
}
inline std::span<const std::string_view> EnumNames(model::StepPhase) { return StepPhaseNames(); }
inline std::span<const std::string_view> EnumNames(model::StepSource) { return StepSourceNames(); }

// Index of text in names, or -1.
int FindName(std::span<const std::string_view> names, std::string_view text);

// A JSON array of strings. Bytes >= 0x80 pass through unchanged, so any byte string
// round-trips (text that is valid UTF-8 stays valid JSON).
std::string EncodeJsonStringArray(const std::vector<std::string>& values);
base::StatusOr<std::vector<std::string>> DecodeJsonStringArray(std::string_view json);

}  // namespace teller::store
