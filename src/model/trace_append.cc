#include "model/trace_append.h"

#include <type_traits>
#include <vector>

#include "model/trace_columns.h"

namespace teller::model {
namespace {

struct Shifts {
  std::vector<base::StringId> strings;  // src string id -> dst string id
  int64_t processes = 0, threads = 0, events = 0, args = 0, templates = 0;

  int64_t Of(ColumnTarget target) const {
    switch (target) {
      case ColumnTarget::processes:
        return processes;
      case ColumnTarget::threads:
        return threads;
      case ColumnTarget::events:
        return events;
      case ColumnTarget::templates:
        return templates;
      default:
        return 0;
    }
  }
  int64_t Of(ColumnBase base) const {
    switch (base) {
      case ColumnBase::event:
        return events;
      case ColumnBase::arg:
        return args;
      default:
        return 0;
    }
  }
};

template <typename T>
void AppendValue(const std::vector<T>& src, ColumnTarget, ColumnBase base, const Shifts& shifts,
                 std::vector<T>* dst) {
  const int64_t shift = shifts.Of(base);
  for (const T& value : src) dst->push_back(static_cast<T>(static_cast<int64_t>(value) + shift));
}

template <typename T>
void AppendEnum(const std::vector<T>& src, ColumnTarget, ColumnBase, const Shifts&,
                std::vector<T>* dst) {
  dst->insert(dst->end(), src.begin(), src.end());
}

template <typename Id>
void AppendRef(const std::vector<Id>& src, ColumnTarget target, ColumnBase, const Shifts& shifts,
               std::vector<Id>* dst) {
  using Rep = typename Id::rep_type;
  for (const Id& id : src) {
    if (!id.valid() || target == ColumnTarget::none) {
      dst->push_back(id);
    } else if constexpr (std::is_same_v<Id, base::StringId>) {
      dst->push_back(shifts.strings[id.value()]);
    } else {
      dst->push_back(Id(static_cast<Rep>(static_cast<int64_t>(id.value()) + shifts.Of(target))));
    }
  }
}

// Every column of every table (model/trace_columns.h); the tables reconstruction
// fills are empty in src.
#define TELLER_APPEND_COLUMN(sql_name, field, Type, Kind, Target, Base) \
  Append##Kind(from.field, ColumnTarget::Target, ColumnBase::Base, shifts, &to.field);
#define TELLER_APPEND_DERIVED(sql_name, sql_type)
#define TELLER_APPEND_TABLE(sql_table, member, ModelType, row_column, row_base, COLUMNS) \
  {                                                                                      \
    const auto& from = src.member;                                                       \
    auto& to = dst->member;                                                              \
    COLUMNS(TELLER_APPEND_COLUMN, TELLER_APPEND_DERIVED)                                 \
  }

void AppendColumns(const Trace& src, const Shifts& shifts, Trace* dst) {
  TELLER_SHARED_TRACE_TABLES(TELLER_APPEND_TABLE)
  TELLER_ROW_TRACE_TABLES(TELLER_APPEND_TABLE)
}

#undef TELLER_APPEND_TABLE
#undef TELLER_APPEND_DERIVED
#undef TELLER_APPEND_COLUMN

}  // namespace

base::Status AppendTrace(const Trace& src, Trace* dst) {
  if (src.reconstructed || src.nodes.size() || src.steps.size() || src.requests.size() ||
      src.collective_matches.size() || !src.step_requests.empty()) {
    return base::InvalidArgument("AppendTrace: the appended trace is reconstructed already");
  }
  Shifts shifts;
  shifts.strings.reserve(src.strings.size());
  for (size_t i = 0; i < src.strings.size(); ++i)
    shifts.strings.push_back(
        dst->strings.Intern(src.str(base::StringId(static_cast<uint32_t>(i)))));
  shifts.processes = static_cast<int64_t>(dst->processes.size());
  shifts.threads = static_cast<int64_t>(dst->threads.size());
  shifts.events = static_cast<int64_t>(dst->events.size());
  shifts.args = static_cast<int64_t>(dst->args.size());
  shifts.templates = static_cast<int64_t>(dst->templates.size());
  AppendColumns(src, shifts, dst);
  // An event without fields keeps args_begin 0, as Trace::Add*Arg leaves it.
  for (size_t row = static_cast<size_t>(shifts.events); row < dst->events.size(); ++row) {
    if (dst->events.args_count[row] == 0) dst->events.args_begin[row] = 0;
  }
  dst->meta.AddInputFormat(src.meta.format);
  dst->meta.sources.insert(dst->meta.sources.end(), src.meta.sources.begin(),
                           src.meta.sources.end());
  dst->meta.notes.insert(dst->meta.notes.end(), src.meta.notes.begin(), src.meta.notes.end());
  dst->stats.Merge(src.stats);
  return base::OkStatus();
}

}  // namespace teller::model
