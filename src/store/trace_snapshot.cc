#include "store/trace_snapshot.h"

#include <cstring>
#include <type_traits>
#include <vector>

#include "base/byte_io.h"
#include "base/file_util.h"
#include "model/trace_columns.h"
#include "store/trace_check.h"

namespace teller::store {
namespace {

// Calls visit(column vector, table, field) for every column of every table, in one
// fixed order (model/trace_columns.h).
#define TELLER_SNAPSHOT_COLUMN(sql_name, field, Type, Kind, Target, Base) \
  visit(table.field, table_name, #field);
#define TELLER_SNAPSHOT_DERIVED(sql_name, sql_type)
#define TELLER_SNAPSHOT_TABLE(sql_table, member, ModelType, row_column, row_base, COLUMNS) \
  {                                                                                        \
    auto& table = trace->member;                                                           \
    const char* table_name = #sql_table;                                                   \
    COLUMNS(TELLER_SNAPSHOT_COLUMN, TELLER_SNAPSHOT_DERIVED)                               \
  }

template <typename TraceType, typename Visit>
void VisitColumns(TraceType* trace, Visit&& visit) {
  TELLER_SHARED_TRACE_TABLES(TELLER_SNAPSHOT_TABLE)
  TELLER_ROW_TRACE_TABLES(TELLER_SNAPSHOT_TABLE)
  visit(trace->step_requests, "trace", "step_requests");
}

#undef TELLER_SNAPSHOT_TABLE
#undef TELLER_SNAPSHOT_DERIVED
#undef TELLER_SNAPSHOT_COLUMN

// Writes a snapshot's sections (base::ByteWriter: a column is its row count, then its values).
using Writer = base::ByteWriter;

// Reads a snapshot's sections (base::ByteReader with its strings and columns).
class Reader : public base::ByteReader {
 public:
  using ByteReader::ByteReader;
  using ByteReader::String;
  base::Status String(std::string* text, const char* what) {
    std::string_view view;
    TELLER_RETURN_IF_ERROR(ByteReader::String(what, &view));
    *text = std::string(view);
    return base::OkStatus();
  }
};

base::Status ReadPool(Reader* in, base::StringPool* pool) {
  uint64_t count = 0;
  TELLER_RETURN_IF_ERROR(in->Value(&count, "the string count"));
  if (count == 0 || count > in->left() / sizeof(uint64_t) + 1)
    return in->Bad(fmt::format("{} strings", count));
  for (uint64_t i = 0; i < count; ++i) {
    std::string_view text;
    TELLER_RETURN_IF_ERROR(in->String("a string", &text));
    if (pool->Intern(text).value() != i)
      return in->Bad(fmt::format("string {} is a repeat or id 0 is not empty", i));
  }
  return base::OkStatus();
}

base::Status ReadMetaAndStats(Reader* in, model::Trace* trace) {
  uint8_t format = 0;
  TELLER_RETURN_IF_ERROR(in->Value(&format, "the trace format"));
  if (format > static_cast<uint8_t>(model::TraceFormat::kMixed))
    return in->Bad(fmt::format("trace format {}", format));
  trace->meta.format = static_cast<model::TraceFormat>(format);
  TELLER_RETURN_IF_ERROR(in->Strings("sources", &trace->meta.sources));
  TELLER_RETURN_IF_ERROR(in->Strings("notes", &trace->meta.notes));
  TELLER_RETURN_IF_ERROR(in->String(&trace->meta.labels_json, "labels"));
  TELLER_RETURN_IF_ERROR(in->String(&trace->meta.meta_json, "meta.json"));
  uint64_t stats = 0;
  TELLER_RETURN_IF_ERROR(in->Value(&stats, "the stat count"));
  for (uint64_t i = 0; i < stats; ++i) {
    std::string_view name;
    int64_t value = 0;
    uint8_t severity = 0;
    TELLER_RETURN_IF_ERROR(in->String("a stat name", &name));
    TELLER_RETURN_IF_ERROR(in->Value(&value, "a stat value"));
    TELLER_RETURN_IF_ERROR(in->Value(&severity, "a stat severity"));
    if (severity > static_cast<uint8_t>(model::StatSeverity::kError))
      return in->Bad(fmt::format("stat {} has severity {}", name, severity));
    trace->stats.Set(name, value, static_cast<model::StatSeverity>(severity));
  }
  return base::OkStatus();
}

}  // namespace

uint64_t SnapshotLayoutHash() {
  // Trace's and TraceMeta's sizes stand for the members outside the column lists.
  std::string layout = fmt::format("teller-snapshot/1 trace {} meta {};", sizeof(model::Trace),
                                   sizeof(model::TraceMeta));
  model::Trace empty;
  VisitColumns(&empty, [&](const auto& column, const char* table, const char* field) {
    layout += fmt::format("{}.{}:{};", table, field, sizeof(column[0]));
  });
  uint64_t hash = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : layout) hash = (hash ^ c) * 1099511628211ull;
  return hash;
}

std::string SerializeTraceSnapshot(const model::Trace& trace) {
  Writer out;
  out.Bytes(kSnapshotMagic);
  out.Value<uint64_t>(SnapshotLayoutHash());
  out.Value<uint8_t>(trace.reconstructed);
  out.Value<uint64_t>(trace.strings.size());
  for (size_t i = 0; i < trace.strings.size(); ++i)
    out.String(trace.strings.Get(base::StringId(static_cast<uint32_t>(i))));
  out.Value<uint8_t>(static_cast<uint8_t>(trace.meta.format));
  out.Strings(trace.meta.sources);
  out.Strings(trace.meta.notes);
  out.String(trace.meta.labels_json);
  out.String(trace.meta.meta_json);
  out.Value<uint64_t>(trace.stats.entries().size());
  for (const auto& [name, entry] : trace.stats.entries()) {
    out.String(name);
    out.Value<int64_t>(entry.value);
    out.Value<uint8_t>(static_cast<uint8_t>(entry.severity));
  }
  VisitColumns(&trace, [&](const auto& column, const char*, const char*) { out.Column(column); });
  return out.Take();
}

base::StatusOr<model::Trace> ParseTraceSnapshot(std::string_view bytes, const std::string& path) {
  Reader in(bytes, path);
  std::string_view magic;
  TELLER_RETURN_IF_ERROR(in.Bytes(kSnapshotMagic.size(), "the magic", &magic));
  if (magic != kSnapshotMagic)
    return base::DataLoss("{}: offset 0: not a teller snapshot (expected {})", path,
                          kSnapshotMagic);
  uint64_t layout = 0;
  TELLER_RETURN_IF_ERROR(in.Value(&layout, "the layout hash"));
  if (layout != SnapshotLayoutHash())
    return base::InvalidArgument("{}: a snapshot of another teller build's trace layout", path);
  model::Trace trace;
  uint8_t reconstructed = 0;
  TELLER_RETURN_IF_ERROR(in.Value(&reconstructed, "the reconstructed flag"));
  trace.reconstructed = reconstructed != 0;
  TELLER_RETURN_IF_ERROR(ReadPool(&in, &trace.strings));
  TELLER_RETURN_IF_ERROR(ReadMetaAndStats(&in, &trace));
  base::Status status;
  VisitColumns(&trace, [&](auto& column, const char*, const char* field) {
    if (status.ok()) status = in.Column(field, &column);
  });
  TELLER_RETURN_IF_ERROR(status);
  if (in.left() != 0) return in.Bad(fmt::format("{} bytes after the last column", in.left()));
  if (base::Status checked = CheckTrace(trace); !checked.ok())
    return base::DataLoss("{}: {}", path, checked.message());
  return trace;
}

base::Status WriteTraceSnapshot(const model::Trace& trace, const std::string& path) {
  return base::WriteFileAtomic(path, SerializeTraceSnapshot(trace));
}

base::StatusOr<model::Trace> ReadTraceSnapshot(const std::string& path) {
  TELLER_ASSIGN_OR_RETURN(std::string bytes, base::ReadFile(path));
  return ParseTraceSnapshot(bytes, path);
}

}  // namespace teller::store
