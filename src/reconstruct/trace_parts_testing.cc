#include "reconstruct/trace_parts_testing.h"

#include <algorithm>
#include <type_traits>

#include "model/trace_append.h"
#include "model/trace_columns.h"
#include "reconstruct/call_chain_builder.h"

namespace teller::reconstruct {
namespace {

using model::ColumnTarget;

// Where the copied rows of a part went; kDropped for rows of other processes.
constexpr uint32_t kDropped = UINT32_MAX;
struct RowMaps {
  const model::Trace* from;
  model::Trace* to;
  std::vector<uint32_t> process, thread, event;
};

template <typename T>
T CopyValue(const T& value, ColumnTarget, const RowMaps&) {
  return value;
}
template <typename T>
T CopyEnum(const T& value, ColumnTarget, const RowMaps&) {
  return value;
}
template <typename Id>
Id CopyRef(const Id& id, ColumnTarget target, const RowMaps& maps) {
  if (!id.valid()) return id;
  if constexpr (std::is_same_v<Id, base::StringId>) {
    return maps.to->strings.Intern(maps.from->str(id));  // the part's own pool
  } else {
    using Rep = typename Id::rep_type;
    switch (target) {
      case ColumnTarget::processes:
        return Id(static_cast<Rep>(maps.process[id.value()]));
      case ColumnTarget::threads:
        return Id(static_cast<Rep>(maps.thread[id.value()]));
      case ColumnTarget::events:
        return Id(static_cast<Rep>(maps.event[id.value()]));
      default:
        return id;  // templates are copied whole; steps are not built yet
    }
  }
}

#define TELLER_COPY_COLUMN(sql_name, field, Type, Kind, Target, Base) \
  to->field.push_back(Copy##Kind(from.field[row], ColumnTarget::Target, maps));
#define TELLER_COPY_DERIVED(sql_name, sql_type)
#define TELLER_DEFINE_COPY_ROW(Table, COLUMNS)                                                \
  void CopyRow(const model::Table& from, size_t row, const RowMaps& maps, model::Table* to) { \
    COLUMNS(TELLER_COPY_COLUMN, TELLER_COPY_DERIVED)                                          \
  }
TELLER_DEFINE_COPY_ROW(ProcessTable, TELLER_PROCESS_COLUMNS)
TELLER_DEFINE_COPY_ROW(ThreadTable, TELLER_THREAD_COLUMNS)
TELLER_DEFINE_COPY_ROW(EventTable, TELLER_EVENT_COLUMNS)
TELLER_DEFINE_COPY_ROW(ArgTable, TELLER_ARG_COLUMNS)
TELLER_DEFINE_COPY_ROW(CollectiveTable, TELLER_COLLECTIVE_COLUMNS)
TELLER_DEFINE_COPY_ROW(LogTable, TELLER_LOG_COLUMNS)
TELLER_DEFINE_COPY_ROW(TemplateTable, TELLER_TEMPLATE_COLUMNS)
#undef TELLER_DEFINE_COPY_ROW
#undef TELLER_COPY_DERIVED
#undef TELLER_COPY_COLUMN

void CopyEventWithArgs(const RowMaps& maps, size_t row) {
  const model::Trace& from = *maps.from;
  model::Trace* to = maps.to;
  CopyRow(from.events, row, maps, &to->events);
  const uint32_t begin = from.events.args_begin[row], count = from.events.args_count[row];
  to->events.args_begin.back() = count > 0 ? static_cast<uint32_t>(to->args.size()) : 0;
  for (uint32_t a = begin; a < begin + count; ++a) CopyRow(from.args, a, maps, &to->args);
}

}  // namespace

model::Trace CopyProcesses(const model::Trace& from, const std::vector<uint32_t>& chosen,
                           bool orphan_logs) {
  model::Trace part;
  RowMaps maps{&from, &part, std::vector<uint32_t>(from.processes.size(), kDropped),
               std::vector<uint32_t>(from.threads.size(), kDropped),
               std::vector<uint32_t>(from.events.size(), kDropped)};
  for (uint32_t p : chosen) {
    maps.process[p] = static_cast<uint32_t>(part.processes.size());
    CopyRow(from.processes, p, maps, &part.processes);
  }
  for (size_t t = 0; t < from.threads.size(); ++t) {
    if (maps.process[from.threads.process[t].value()] == kDropped) continue;
    maps.thread[t] = static_cast<uint32_t>(part.threads.size());
    CopyRow(from.threads, t, maps, &part.threads);
  }
  for (size_t row = 0; row < from.events.size(); ++row) {
    if (maps.process[from.events.process[row].value()] == kDropped) continue;
    maps.event[row] = static_cast<uint32_t>(part.events.size());
    CopyEventWithArgs(maps, row);
  }
  for (size_t c = 0; c < from.collectives.size(); ++c) {
    if (maps.event[from.collectives.event[c].value()] == kDropped) continue;
    CopyRow(from.collectives, c, maps, &part.collectives);
  }
  for (size_t i = 0; i < from.logs.size(); ++i) {
    const model::ProcessIndex process = from.logs.process[i];
    const bool taken = process.valid() ? maps.process[process.value()] != kDropped : orphan_logs;
    if (!taken) continue;
    CopyRow(from.logs, i, maps, &part.logs);
  }
  for (size_t i = 0; i < from.templates.size(); ++i) {
    CopyRow(from.templates, i, maps, &part.templates);
  }
  return part;
}

SyntheticOptions RandomSplitOptions(uint64_t seed, int steps_per_process, bool compositions) {
  SyntheticOptions options;
  options.seed = seed;
  options.processes = 3 + static_cast<int>(seed % 4);
  options.hosts = 1 + static_cast<int>(seed % 3);
  options.steps_per_process = steps_per_process;
  if (compositions) {
    options.kernel_names = 2 + static_cast<int>(seed % 3);
    options.reorder_every = 2 + static_cast<int>(seed % 2);
    options.extra_kernel_every = seed % 4 == 0 ? 0 : 3;
  }
  options.comm_kernels_per_step = 1 + static_cast<int>(seed % 3);
  options.communicators = 1 + static_cast<int>(seed / 2 % 3);
  options.collective_sequence = seed % 2 == 0;
  options.host_clock_skew_ns = (seed % 2 ? 1 : -1) * 2'500'000 * static_cast<int64_t>(seed);
  options.shuffle_rows = seed % 5 == 0;
  return options;
}

std::vector<std::vector<uint32_t>> DealProcesses(int processes, int count, std::mt19937_64* rng) {
  std::vector<uint32_t> owner(processes);
  for (int p = 0; p < processes; ++p)
    owner[p] = static_cast<uint32_t>(p < count ? p : (*rng)() % count);
  std::shuffle(owner.begin(), owner.end(), *rng);
  std::vector<std::vector<uint32_t>> parts(count);
  for (int p = 0; p < processes; ++p) parts[owner[p]].push_back(static_cast<uint32_t>(p));
  return parts;
}

std::vector<model::Trace> SplitIntoParts(const model::Trace& whole, uint64_t seed,
                                         bool orphan_logs) {
  std::mt19937_64 rng(seed);
  std::vector<model::Trace> parts;
  const int processes = static_cast<int>(whole.processes.size());
  for (const auto& chosen : DealProcesses(processes, 2 + static_cast<int>(seed % 2), &rng)) {
    parts.push_back(CopyProcesses(whole, chosen, orphan_logs && parts.empty()));
  }
  return parts;
}

base::StatusOr<model::Trace> JoinParts(const std::vector<model::Trace>& parts,
                                       std::vector<PartBase>* bases) {
  model::Trace joined;
  for (const model::Trace& part : parts) {
    bases->push_back(PartBase{static_cast<uint32_t>(joined.processes.size()),
                              static_cast<uint32_t>(joined.events.size()),
                              static_cast<uint32_t>(joined.logs.size())});
    TELLER_RETURN_IF_ERROR(model::AppendTrace(part, &joined));
  }
  return joined;
}

base::StatusOr<CrossRankPlan> BuildParts(std::vector<model::Trace>* parts, size_t planned) {
  std::vector<CollectiveRecords> records;
  for (size_t k = 0; k < parts->size(); ++k) {
    TELLER_RETURN_IF_ERROR(PreparePart(&(*parts)[k]));
    if (k >= planned) continue;
    records.push_back(ExtractCollectiveRecords((*parts)[k]));
    TELLER_RETURN_IF_ERROR(CheckCollectiveRecords(records.back()));
  }
  CrossRankPlan plan = MatchCollectiveRecords(records, /*align_clocks=*/true);
  for (size_t k = 0; k < parts->size(); ++k) {
    const CrossRankPlan::Part share = k < planned ? plan.parts[k] : CrossRankPlan::Part{};
    TELLER_RETURN_IF_ERROR(BuildCallChainsOfPart(&(*parts)[k], share));
  }
  return plan;
}

base::StatusOr<std::vector<model::Trace>> RandomBuiltParts(uint64_t seed,
                                                           int steps_per_process) {
  const SyntheticOptions options =
      RandomSplitOptions(seed, steps_per_process, /*compositions=*/true);
  std::vector<model::Trace> parts = SplitIntoParts(MakeSyntheticTrace(options), seed);
  TELLER_RETURN_IF_ERROR(BuildParts(&parts, parts.size()).status());
  return parts;
}

}  // namespace teller::reconstruct
