#include "import/nsys_importer.h"

#include <algorithm>
#include <array>
#include <limits>

#include "model/classify.h"

namespace teller::import {
namespace {

using model::EventPhase;
using model::Layer;
using model::StatSeverity;
using model::StringId;

constexpr uint32_t kNoString = std::numeric_limits<uint32_t>::max();
// CUPTI writes this for "no stream" (context-wide sync) and "no event".
constexpr int64_t kCuptiInvalidId = 0xFFFFFFFFll;
constexpr uint64_t kProgressEvery = 1 << 16;
// Device tracks looked up by linear search before the hash map.
constexpr size_t kTrackListSize = 16;
// Dense id -> string map up to this many ids; nsys numbers its strings from 0.
constexpr int64_t kMaxStringId = int64_t{1} << 28;

// ENUM_NSYS_EVENT_TYPE values of NVTX_EVENTS rows.
enum NvtxEventType : int64_t {
  kNvtxCategory = 33,
  kNvtxMark = 34,
  kNvtxPushRange = 35,
  kNvtxPopRange = 36,
  kNvtxStartRange = 37,
  kNvtxEndRange = 38,
  kNvtxPushPopRange = 59,
  kNvtxStartEndRange = 60,
  kNvtxDomainCreate = 75,
};

// ENUM_NSYS_EVENT_CLASS of CUPTI_ACTIVITY_KIND_RUNTIME rows (newer exports keep driver
// calls in the runtime table with this class).
constexpr int64_t kEventClassCudaDriver = 1;

// CUDA memcpy kinds by ENUM_CUDA_MEMCPY_OPER id (= CUpti_ActivityMemcpyKind), spelled
// as wire::CopyKindName spells them.
constexpr std::array<std::string_view, 14> kCopyKinds = {
    "Unknown", "HtoD", "DtoH", "HtoA", "AtoH",     "AtoA",     "AtoD",
    "DtoA",    "DtoD", "HtoH", "PtoP", "UVM HtoD", "UVM DtoH", "UVM DtoD"};
// CUpti_ActivitySynchronizationType, named as Kineto names its cuda_sync events.
constexpr std::array<std::string_view, 5> kSyncNames = {
    "Unknown Sync", "Event Sync", "Stream Wait Event", "Stream Sync", "Context Sync"};

enum ApiColumn {
  kApiStart,
  kApiEnd,
  kApiGlobalTid,
  kApiNameId,
  kApiEventClass,
  kApiCorrelation,
  kApiReturnValue
};
constexpr NsysImporter::ColumnSpec kApiColumns[] = {{"start", true},       {"end", true},
                                                    {"globalTid", true},   {"nameId", true},
                                                    {"eventClass", false}, {"correlationId", false},
                                                    {"returnValue", false}};

enum KernelColumn {
  kKStart,
  kKEnd,
  kKDevice,
  kKStream,
  kKCorrelation,
  kKGlobalPid,
  kKGlobalTid,
  kKDemangledName,
  kKShortName,
  kKMangledName,
  kKGridX,
  kKGridY,
  kKGridZ,
  kKBlockX,
  kKBlockY,
  kKBlockZ,
  kKStaticShared,
  kKDynamicShared,
  kKGraphNodeId,
  kKGraphId
};
constexpr NsysImporter::ColumnSpec kKernelColumns[] = {{"start", true},
                                                       {"end", true},
                                                       {"deviceId", true},
                                                       {"streamId", true},
                                                       {"correlationId", false},
                                                       {"globalPid", false},
                                                       {"globalTid", false, "globalPid"},
                                                       {"demangledName", false},
                                                       {"shortName", false},
                                                       {"mangledName", false, "shortName"},
                                                       {"gridX", false},
                                                       {"gridY", false},
                                                       {"gridZ", false},
                                                       {"blockX", false},
                                                       {"blockY", false},
                                                       {"blockZ", false},
                                                       {"staticSharedMemory", false},
                                                       {"dynamicSharedMemory", false},
                                                       {"graphNodeId", false},
                                                       {"graphId", false}};

enum MemcpyColumn {
  kMcStart,
  kMcEnd,
  kMcDevice,
  kMcStream,
  kMcBytes,
  kMcCopyKind,
  kMcCorrelation,
  kMcGlobalPid,
  kMcGraphNodeId
};
constexpr NsysImporter::ColumnSpec kMemcpyColumns[] = {
    {"start", true},          {"end", true},        {"deviceId", true},
    {"streamId", true},       {"bytes", true},      {"copyKind", true},
    {"correlationId", false}, {"globalPid", false}, {"graphNodeId", false}};

enum MemsetColumn {
  kMsStart,
  kMsEnd,
  kMsDevice,
  kMsStream,
  kMsBytes,
  kMsValue,
  kMsCorrelation,
  kMsGlobalPid,
  kMsGraphNodeId
};
constexpr NsysImporter::ColumnSpec kMemsetColumns[] = {
    {"start", true},          {"end", true},        {"deviceId", true},
    {"streamId", true},       {"bytes", true},      {"value", false},
    {"correlationId", false}, {"globalPid", false}, {"graphNodeId", false}};

enum SyncColumn {
  kSyStart,
  kSyEnd,
  kSyStream,
  kSyDevice,
  kSySyncType,
  kSyDeprecatedSyncType,
  kSyCorrelation,
  kSyGlobalPid,
  kSyEventId
};
constexpr NsysImporter::ColumnSpec kSyncColumns[] = {
    {"start", true},          {"end", true},        {"streamId", true},
    {"deviceId", false},      {"syncType", false},  {"deprecatedSyncType", false, "syncType"},
    {"correlationId", false}, {"globalPid", false}, {"eventId", false}};

enum NvtxColumn {
  kNvStart,
  kNvEnd,
  kNvEventType,
  kNvGlobalTid,
  kNvText,
  kNvTextId,
  kNvDomainId,
  kNvRangeId,
  kNvCategory
};
constexpr NsysImporter::ColumnSpec kNvtxColumns[] = {
    {"start", true},     {"end", false},     {"eventType", true},
    {"globalTid", true}, {"text", false},    {"textId", false},
    {"domainId", false}, {"rangeId", false}, {"category", false}};

static_assert(std::size(kApiColumns) == kApiReturnValue + 1);
static_assert(std::size(kKernelColumns) == kKGraphId + 1);
static_assert(std::size(kMemcpyColumns) == kMcGraphNodeId + 1);
static_assert(std::size(kMemsetColumns) == kMsGraphNodeId + 1);
static_assert(std::size(kSyncColumns) == kSyEventId + 1);
static_assert(std::size(kNvtxColumns) == kNvCategory + 1);

// The args of one event, appended in one go (the hot path of kernels); the rows stay
// contiguous as Trace::AddIntArg keeps them.
class ArgBuffer {
 public:
  void AddInt(StringId key, int64_t value) { Add(key, model::ArgType::kInt, value, {}); }
  void AddString(StringId key, StringId value) { Add(key, model::ArgType::kString, 0, value); }
  void AppendTo(model::Trace* trace, model::EventRow row) const {
    if (count_ == 0) return;
    model::ArgTable& args = trace->args;
    trace->events.args_begin[row.value()] = static_cast<uint32_t>(args.size());
    trace->events.args_count[row.value()] = static_cast<uint16_t>(count_);
    for (size_t i = 0; i < count_; ++i) {
      args.key.push_back(keys_[i]);
      args.type.push_back(types_[i]);
      args.int_value.push_back(ints_[i]);
      args.string_value.push_back(strings_[i]);
    }
  }

 private:
  static constexpr size_t kCapacity = 8;
  void Add(StringId key, model::ArgType type, int64_t int_value, StringId string_value) {
    if (count_ == kCapacity) return;
    keys_[count_] = key;
    types_[count_] = type;
    ints_[count_] = int_value;
    strings_[count_++] = string_value;
  }
  std::array<StringId, kCapacity> keys_;
  std::array<model::ArgType, kCapacity> types_;
  std::array<int64_t, kCapacity> ints_;
  std::array<StringId, kCapacity> strings_{};
  size_t count_ = 0;
};

std::string QuoteIdentifier(std::string_view name) {
  std::string quoted = "\"";
  for (char c : name) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  quoted += '"';
  return quoted;
}

}  // namespace

std::string_view StripNsysApiVersion(std::string_view name) {
  size_t digits = 0;
  while (digits < name.size() && name[name.size() - 1 - digits] >= '0' &&
         name[name.size() - 1 - digits] <= '9') {
    ++digits;
  }
  if (digits < 4 || name.size() < digits + 3) return name;
  std::string_view before = name.substr(0, name.size() - digits);
  if (before.substr(before.size() - 2) != "_v") return name;
  return before.substr(0, before.size() - 2);
}

NsysImporter::NsysImporter(NsysDatabase* db, const ImportOptions& options, model::Trace* trace)
    : db_(db), options_(options), trace_(trace) {
  base::StringPool& pool = trace_->strings;
  keys_ = {pool.Intern("result"),
           pool.Intern("grid"),
           pool.Intern("block"),
           pool.Intern("graph_id"),
           pool.Intern("graph_node_id"),
           pool.Intern("static_shared_memory_bytes"),
           pool.Intern("dynamic_shared_memory_bytes"),
           pool.Intern("short_name"),
           pool.Intern("bytes"),
           pool.Intern("kind"),
           pool.Intern("value"),
           pool.Intern("event"),
           pool.Intern("domain"),
           pool.Intern("category")};
  host_ = base::StringPool::kEmpty;
  source_ = pool.Intern(db_->path());
}

base::Status NsysImporter::Run() {
  bool has_activity = db_->HasTable("StringIds") || db_->HasTable("NVTX_EVENTS");
  for (const std::string& table : db_->tables()) {
    if (table.rfind("CUPTI_ACTIVITY_KIND_", 0) == 0) has_activity = true;
  }
  if (!has_activity) {
    return base::InvalidArgument(
        "{}: not an Nsight Systems export: expected a StringIds, CUPTI_ACTIVITY_KIND_* or "
        "NVTX_EVENTS table, found {} tables",
        db_->path(), db_->tables().size());
  }
  first_event_ = trace_->events.size();
  // Rows per table, and about how many args each row adds.
  uint64_t args_expected = 0;
  for (auto [table, args_per_row] :
       {std::pair<std::string_view, int>{"CUPTI_ACTIVITY_KIND_RUNTIME", 0},
        {"CUPTI_ACTIVITY_KIND_DRIVER", 0},
        {"CUPTI_ACTIVITY_KIND_KERNEL", 3},
        {"CUPTI_ACTIVITY_KIND_MEMCPY", 2},
        {"CUPTI_ACTIVITY_KIND_MEMSET", 2},
        {"CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", 0},
        {"NVTX_EVENTS", 0}}) {
    uint64_t rows = static_cast<uint64_t>(std::max<int64_t>(db_->MaxRowId(table), 0));
    rows_total_ += rows;
    args_expected += rows * args_per_row;
  }
  trace_->events.Reserve(trace_->events.size() + rows_total_);
  model::ArgTable& args = trace_->args;
  args.key.reserve(args.size() + args_expected);
  args.type.reserve(args.size() + args_expected);
  args.int_value.reserve(args.size() + args_expected);
  args.string_value.reserve(args.size() + args_expected);

  // A file cut short (by the crash being diagnosed) fails while some table's rows are
  // read: keep the rows read before the damage and the other tables, and say what was
  // lost. Only when nothing at all was readable is the import an error.
  base::Status first_damage;
  auto keep_going = [&](base::Status status) -> base::Status {
    if (status.ok() || status.code() != base::StatusCode::kDataLoss) return status;
    trace_->stats.Increment(model::stat::kNsysTableUnreadable);
    trace_->meta.notes.push_back(
        fmt::format("{}; the rows read before it were kept", status.message()));
    if (first_damage.ok()) first_damage = status;
    return base::OkStatus();
  };
  base::ReportProgress(options_.progress, "nsys", 0, rows_total_);  // the stage starts now
  TELLER_RETURN_IF_ERROR(keep_going(ReadSessionStart()));
  TELLER_RETURN_IF_ERROR(keep_going(ReadHost()));
  TELLER_RETURN_IF_ERROR(keep_going(ReadProcessNames()));
  TELLER_RETURN_IF_ERROR(keep_going(ReadStrings()));
  TELLER_RETURN_IF_ERROR(keep_going(ReadThreadNames()));
  TELLER_RETURN_IF_ERROR(keep_going(ReadGpus()));
  // Host calls first: device work finds its process through their correlation ids.
  TELLER_RETURN_IF_ERROR(keep_going(ImportApiCalls("CUPTI_ACTIVITY_KIND_RUNTIME", false)));
  TELLER_RETURN_IF_ERROR(keep_going(ImportApiCalls("CUPTI_ACTIVITY_KIND_DRIVER", true)));
  host_events_end_ = trace_->events.size();
  TELLER_RETURN_IF_ERROR(keep_going(ImportKernels()));
  TELLER_RETURN_IF_ERROR(keep_going(ImportMemcpys()));
  TELLER_RETURN_IF_ERROR(keep_going(ImportMemsets()));
  TELLER_RETURN_IF_ERROR(keep_going(ImportSyncs()));
  TELLER_RETURN_IF_ERROR(keep_going(ImportNvtx()));
  if (!first_damage.ok() && trace_->events.size() == first_event_) return first_damage;

  trace_->meta.AddInputFormat(model::TraceFormat::kNsys);
  if (options_.progress) options_.progress->Finish("nsys");
  return base::OkStatus();
}

base::StatusOr<std::optional<NsysImporter::TableQuery>> NsysImporter::OpenTable(
    std::string_view table, std::span<const ColumnSpec> columns, std::string_view where) {
  if (!db_->HasTable(table)) {
    trace_->stats.Increment(model::FamilyStatName(model::stat::kNsysMissingTable, table), 1,
                            model::stat::kNsysMissingTable.severity);
    return std::optional<TableQuery>();
  }
  TELLER_ASSIGN_OR_RETURN(std::vector<std::string> present, db_->Columns(table));
  TableQuery query;
  query.index.assign(columns.size(), -1);
  std::string select = "SELECT ";
  int next = 0;
  auto has = [&](std::string_view column) {
    return std::find(present.begin(), present.end(), column) != present.end();
  };
  for (size_t i = 0; i < columns.size(); ++i) {
    if (columns[i].unless != nullptr && has(columns[i].unless)) continue;
    if (!has(columns[i].name)) {
      if (columns[i].required) {
        CountMissingColumn(table, columns[i].name);
        return std::optional<TableQuery>();
      }
      continue;
    }
    if (next > 0) select += ", ";
    select += QuoteIdentifier(columns[i].name);
    query.index[i] = next++;
  }
  select += " FROM " + QuoteIdentifier(table);
  if (!where.empty()) select += fmt::format(" WHERE {}", where);
  TELLER_ASSIGN_OR_RETURN(query.statement, db_->Prepare(select));
  return std::optional<TableQuery>(std::move(query));
}

void NsysImporter::CountMissingColumn(std::string_view table, std::string_view column) {
  // The value is the number of rows lost with the table.
  trace_->stats.Increment(
      model::FamilyStatName(model::stat::kNsysMissingColumn, fmt::format("{}_{}", table, column)),
      std::max<int64_t>(db_->MaxRowId(table), 1), model::stat::kNsysMissingColumn.severity);
}

void NsysImporter::CountRow() {
  if (++rows_done_ % kProgressEvery == 0) {
    base::ReportProgress(options_.progress, "nsys", rows_done_, rows_total_);
  }
}

model::DurationNs NsysImporter::Duration(int64_t start, int64_t end) {
  if (end < start) {
    trace_->stats.Increment(model::stat::kNsysNegativeDuration);
    return 0;
  }
  return end - start;
}

base::Status NsysImporter::ReadSessionStart() {
  static constexpr ColumnSpec kColumns[] = {{"utcEpochNs", true}};
  TELLER_ASSIGN_OR_RETURN(auto query, OpenTable("TARGET_INFO_SESSION_START_TIME", kColumns));
  bool found = false;
  if (query && query->statement.Step() && !query->Null(0)) {
    clock_offset_ns_ = query->Int(0);
    found = true;
  }
  if (query) TELLER_RETURN_IF_ERROR(query->statement.status());
  if (!found) {
    // Times stay relative to the session start: they cannot align with logs.
    trace_->stats.Increment(model::stat::kNsysSessionStartUnknown);
    trace_->meta.notes.push_back(fmt::format(
        "{}: no TARGET_INFO_SESSION_START_TIME; nsys times kept relative to the session start",
        db_->path()));
  }
  return base::OkStatus();
}

base::Status NsysImporter::ReadHost() {
  // Only the Hostname row: other rows (DeviceEnvironment) hold the recording environment.
  static constexpr ColumnSpec kColumns[] = {{"name", true}, {"value", true}};
  TELLER_ASSIGN_OR_RETURN(auto query,
                          OpenTable("TARGET_INFO_SYSTEM_ENV", kColumns, "name = 'Hostname'"));
  if (!query) return base::OkStatus();
  if (query->statement.Step()) host_ = trace_->strings.Intern(query->statement.Text(1));
  return query->statement.status();
}

base::Status NsysImporter::ReadProcessNames() {
  static constexpr ColumnSpec kColumns[] = {{"pid", true}, {"name", true}};
  TELLER_ASSIGN_OR_RETURN(auto query, OpenTable("PROCESSES", kColumns));
  if (!query) return base::OkStatus();
  while (query->statement.Step()) {
    if (query->Null(0)) continue;
    process_names_.emplace(query->Int(0), std::string(query->statement.Text(1)));
  }
  return query->statement.status();
}

base::Status NsysImporter::ReadThreadNames() {
  static constexpr ColumnSpec kColumns[] = {{"globalTid", true}, {"nameId", true}};
  TELLER_ASSIGN_OR_RETURN(auto query, OpenTable("ThreadNames", kColumns));
  if (!query) return base::OkStatus();
  while (query->statement.Step()) {
    if (query->Null(0) || query->Null(1)) continue;
    thread_name_ids_[query->Int(0)] = query->Int(1);
  }
  return query->statement.status();
}

base::Status NsysImporter::ReadGpus() {
  static constexpr ColumnSpec kGpuColumns[] = {{"id", true}, {"name", true}};
  TELLER_ASSIGN_OR_RETURN(auto gpus, OpenTable("TARGET_INFO_GPU", kGpuColumns));
  if (gpus) {
    while (gpus->statement.Step()) {
      if (!gpus->Null(0)) gpu_names_[gpus->Int(0)] = std::string(gpus->statement.Text(1));
    }
    TELLER_RETURN_IF_ERROR(gpus->statement.status());
  }
  static constexpr ColumnSpec kDeviceColumns[] = {{"gpuId", true}, {"cudaId", true}, {"pid", true}};
  TELLER_ASSIGN_OR_RETURN(auto devices, OpenTable("TARGET_INFO_CUDA_DEVICE", kDeviceColumns));
  if (devices) {
    while (devices->statement.Step()) {
      if (devices->Null(0) || devices->Null(1) || devices->Null(2)) continue;
      cuda_device_gpu_[(devices->Int(2) << 16) | (devices->Int(1) & 0xFFFF)] = devices->Int(0);
    }
    TELLER_RETURN_IF_ERROR(devices->statement.status());
  }
  return base::OkStatus();
}

base::Status NsysImporter::ReadStrings() {
  static constexpr ColumnSpec kColumns[] = {{"id", true}, {"value", true}};
  TELLER_ASSIGN_OR_RETURN(auto query, OpenTable("StringIds", kColumns));
  if (!query) return base::OkStatus();
  while (query->statement.Step()) {
    int64_t id = query->IntOr(0, -1);
    if (id < 0 || id >= kMaxStringId) {
      trace_->stats.Increment(model::stat::kNsysStringIdOutOfRange);
      continue;
    }
    std::string_view value = query->statement.Text(1);
    if (static_cast<size_t>(id) >= string_offset_.size()) {
      string_offset_.resize(id + 1, 0);
      string_size_.resize(id + 1, kNoString);
    }
    string_offset_[id] = static_cast<uint32_t>(string_arena_.size());
    string_size_[id] = static_cast<uint32_t>(value.size());
    string_arena_.append(value);
  }
  interned_.assign(string_offset_.size(), StringId::Invalid());
  api_names_[0].resize(string_offset_.size());
  api_names_[1].resize(string_offset_.size());
  kernel_layer_.assign(string_offset_.size(), -1);
  return query->statement.status();
}

StringId NsysImporter::NsysString(int64_t id) {
  if (id >= 0 && static_cast<size_t>(id) < interned_.size()) {
    StringId& cached = interned_[id];
    if (cached.valid()) return cached;
    if (string_size_[id] != kNoString) {
      cached = trace_->strings.Intern(
          std::string_view(string_arena_).substr(string_offset_[id], string_size_[id]));
      return cached;
    }
  }
  trace_->stats.Increment(model::stat::kNsysUnresolvedStringId);
  return base::StringPool::kEmpty;
}

const NsysImporter::ApiName& NsysImporter::ApiNameFor(int64_t name_id, bool driver) {
  static const ApiName kUnresolved{base::StringPool::kEmpty, Layer::kRt, false, true};
  std::vector<ApiName>& cache = api_names_[driver ? 1 : 0];
  if (name_id < 0 || static_cast<size_t>(name_id) >= cache.size() ||
      string_size_[name_id] == kNoString) {
    trace_->stats.Increment(model::stat::kNsysUnresolvedStringId);
    return kUnresolved;
  }
  ApiName& entry = cache[name_id];
  if (!entry.known) {
    std::string_view raw =
        std::string_view(string_arena_).substr(string_offset_[name_id], string_size_[name_id]);
    std::string_view name = StripNsysApiVersion(raw);
    entry.name = trace_->strings.Intern(name);
    entry.layer = model::ClassifyApiCall(name, driver);
    entry.graph_launch = model::IsGraphLaunchName(name);
    entry.known = true;
  }
  return entry;
}

model::ProcessIndex NsysImporter::NewProcessFor(int64_t pid) {
  auto [it, inserted] = processes_.try_emplace(pid);
  if (inserted) {
    auto name = process_names_.find(pid);
    StringId process_name = name == process_names_.end() ? base::StringPool::kEmpty
                                                         : trace_->strings.Intern(name->second);
    it->second = trace_->processes.Append(pid, host_, process_name, options_.rank_hint, source_);
  }
  last_pid_ = pid;
  last_process_ = it->second;
  return it->second;
}

StringId NsysImporter::Dim3(int64_t x, int64_t y, int64_t z) {
  // Grid x < 2^31, y and z < 2^16 on every CUDA GPU: one 64-bit key.
  bool packable = x >= 0 && x < (int64_t{1} << 31) && y >= 0 && y < 65536 && z >= 0 && z < 65536;
  uint64_t key =
      static_cast<uint64_t>(x) | static_cast<uint64_t>(y) << 32 | static_cast<uint64_t>(z) << 48;
  if (packable) {
    auto it = dim3_.find(key);
    if (it != dim3_.end()) return it->second;
  }
  StringId text = trace_->strings.Intern(fmt::format("{},{},{}", x, y, z));
  if (packable) dim3_.emplace(key, text);
  return text;
}

model::ThreadIndex NsysImporter::ThreadFor(int64_t global_tid) {
  if (global_tid == last_global_tid_) return last_thread_;
  auto [it, inserted] = threads_.try_emplace(global_tid);
  if (inserted) {
    auto name_id = thread_name_ids_.find(global_tid);
    StringId name =
        name_id == thread_name_ids_.end() ? base::StringPool::kEmpty : NsysString(name_id->second);
    it->second = trace_->threads.Append(ProcessFor(NsysPidOf(global_tid)), NsysTidOf(global_tid),
                                        name, false, -1);
  }
  last_global_tid_ = global_tid;
  last_thread_ = it->second;
  return it->second;
}

model::ThreadIndex NsysImporter::DeviceTrackFor(model::ProcessIndex process, int64_t device,
                                                int64_t stream) {
  if (stream == kCuptiInvalidId) stream = -1;
  TrackKey key{process.value(), static_cast<int32_t>(device), stream};
  if (key == last_track_key_) return last_track_;
  // A process has few streams: a short linear search beats hashing.
  for (const auto& [known, track] : track_list_) {
    if (known == key) {
      last_track_key_ = key;
      last_track_ = track;
      return track;
    }
  }
  auto [it, inserted] = tracks_.try_emplace(key);
  if (inserted) {
    int64_t pid = trace_->processes.os_pid[process.value()];
    auto gpu = cuda_device_gpu_.find((pid << 16) | (device & 0xFFFF));
    auto gpu_name = gpu_names_.find(gpu == cuda_device_gpu_.end() ? device : gpu->second);
    std::string where = gpu_name == gpu_names_.end()
                            ? fmt::format("device {}", device)
                            : fmt::format("{}, device {}", gpu_name->second, device);
    std::string name = stream < 0 ? fmt::format("all streams ({})", where)
                                  : fmt::format("stream {} ({})", stream, where);
    it->second = trace_->threads.Append(process, stream, trace_->strings.Intern(name), true,
                                        static_cast<int32_t>(device));
    if (track_list_.size() < kTrackListSize) track_list_.emplace_back(key, it->second);
  }
  last_track_key_ = key;
  last_track_ = it->second;
  return it->second;
}

model::ProcessIndex NsysImporter::DeviceWorkProcess(const TableQuery& query, int pid_column,
                                                    int correlation_column) {
  int64_t value;
  if (query.Get(pid_column, &value)) return ProcessFor(NsysPidOf(value));
  int64_t correlation;
  if (query.Get(correlation_column, &correlation)) {
    if (!correlation_process_built_) {
      // Host calls of this file are the rows [first_event_, host_events_end_).
      const model::EventTable& events = trace_->events;
      for (size_t row = first_event_; row < host_events_end_; ++row) {
        if (!events.correlation[row].valid()) continue;
        auto [it, inserted] =
            correlation_process_.try_emplace(events.correlation[row].value(), events.process[row]);
        if (!inserted && it->second != events.process[row]) {
          it->second = model::ProcessIndex::Invalid();
        }
      }
      correlation_process_built_ = true;
    }
    auto it = correlation_process_.find(correlation);
    if (it != correlation_process_.end() && it->second.valid()) {
      trace_->stats.Increment(model::stat::kNsysDeviceProcessFromCorrelation);
      return it->second;
    }
  }
  if (processes_.size() == 1) {
    trace_->stats.Increment(model::stat::kNsysDeviceProcessFromOnlyProcess);
    return processes_.begin()->second;
  }
  trace_->stats.Increment(model::stat::kNsysDeviceWorkWithoutProcess);
  return model::ProcessIndex::Invalid();
}

base::Status NsysImporter::ImportApiCalls(std::string_view table, bool driver_table) {
  TELLER_ASSIGN_OR_RETURN(auto opened, OpenTable(table, kApiColumns));
  if (!opened) return base::OkStatus();
  TableQuery& q = *opened;
  model::EventTable& events = trace_->events;
  while (q.statement.Step()) {
    CountRow();
    int64_t global_tid;
    if (!q.Get(kApiGlobalTid, &global_tid)) {
      trace_->stats.Increment(model::stat::kNsysApiCallWithoutThread);
      continue;
    }
    bool driver = driver_table || q.IntOrZero(kApiEventClass) == kEventClassCudaDriver;
    const ApiName& api = ApiNameFor(q.Int(kApiNameId), driver);
    model::ThreadIndex thread = ThreadFor(global_tid);
    int64_t start = q.Int(kApiStart);
    model::EventRow row = events.Append(
        api.layer, EventPhase::kComplete, api.name, trace_->threads.process[thread.value()], thread,
        TraceTime(start), Duration(start, q.Int(kApiEnd)), model::EventId::Invalid(),
        q.Correlation(kApiCorrelation),
        api.graph_launch ? model::kFlagGraphLaunch : model::kFlagNone);
    int64_t return_value = q.IntOrZero(kApiReturnValue);
    if (return_value != 0) trace_->AddIntArg(row, keys_.result, return_value);
  }
  return q.statement.status();
}

base::Status NsysImporter::ImportKernels() {
  static constexpr std::string_view kTable = "CUPTI_ACTIVITY_KIND_KERNEL";
  TELLER_ASSIGN_OR_RETURN(auto opened, OpenTable(kTable, kKernelColumns));
  if (!opened) return base::OkStatus();
  TableQuery& q = *opened;
  if (!q.Has(kKDemangledName) && !q.Has(kKShortName) && !q.Has(kKMangledName)) {
    CountMissingColumn(kTable, "demangledName");
    return base::OkStatus();
  }
  const int pid_column = q.Has(kKGlobalPid) ? kKGlobalPid : kKGlobalTid;
  const bool has_launch_shape = q.Has(kKGridX) && q.Has(kKGridY) && q.Has(kKGridZ) &&
                                q.Has(kKBlockX) && q.Has(kKBlockY) && q.Has(kKBlockZ);
  model::EventTable& events = trace_->events;
  while (q.statement.Step()) {
    CountRow();
    model::ProcessIndex process = DeviceWorkProcess(q, pid_column, kKCorrelation);
    if (!process.valid()) continue;
    int64_t short_name_id = -1, name_id = -1;
    q.Get(kKShortName, &short_name_id);
    if (!q.Get(kKDemangledName, &name_id)) {
      name_id = short_name_id >= 0 ? short_name_id : q.IntOr(kKMangledName, -1);
    }
    StringId name = NsysString(name_id);
    Layer layer = Layer::kK;
    if (name_id >= 0 && static_cast<size_t>(name_id) < kernel_layer_.size()) {
      int8_t& cached = kernel_layer_[name_id];
      if (cached < 0) cached = static_cast<int8_t>(model::ClassifyKernel(trace_->str(name)));
      layer = static_cast<Layer>(cached);
    }
    model::ThreadIndex track = DeviceTrackFor(process, q.Int(kKDevice), q.Int(kKStream));
    int64_t start = q.Int(kKStart);
    int64_t graph_node_id = 0;
    bool graph_node = q.Get(kKGraphNodeId, &graph_node_id);
    model::EventRow row = events.Append(
        layer, EventPhase::kComplete, name, process, track, TraceTime(start),
        Duration(start, q.Int(kKEnd)),
        graph_node ? model::EventId(graph_node_id) : model::EventId::Invalid(),
        q.Correlation(kKCorrelation), graph_node ? model::kFlagGraphNode : model::kFlagNone);
    ArgBuffer args;
    if (has_launch_shape) {
      args.AddString(keys_.grid, Dim3(q.Int(kKGridX), q.Int(kKGridY), q.Int(kKGridZ)));
      args.AddString(keys_.block, Dim3(q.Int(kKBlockX), q.Int(kKBlockY), q.Int(kKBlockZ)));
    }
    int64_t value;
    if (graph_node) {
      if (q.Get(kKGraphId, &value)) args.AddInt(keys_.graph_id, value);
      args.AddInt(keys_.graph_node_id, graph_node_id);
    }
    // Shared memory only when set, to keep the arg table small.
    if ((value = q.IntOrZero(kKStaticShared)) != 0) {
      args.AddInt(keys_.static_shared_memory_bytes, value);
    }
    if ((value = q.IntOrZero(kKDynamicShared)) != 0) {
      args.AddInt(keys_.dynamic_shared_memory_bytes, value);
    }
    if (short_name_id >= 0 && short_name_id != name_id) {
      args.AddString(keys_.short_name, NsysString(short_name_id));
    }
    args.AppendTo(trace_, row);
  }
  return q.statement.status();
}

base::Status NsysImporter::ImportMemcpys() {
  TELLER_ASSIGN_OR_RETURN(auto opened, OpenTable("CUPTI_ACTIVITY_KIND_MEMCPY", kMemcpyColumns));
  if (!opened) return base::OkStatus();
  TableQuery& q = *opened;
  std::array<StringId, kCopyKinds.size()> names, kinds;
  for (size_t i = 0; i < names.size(); ++i) {
    kinds[i] = trace_->strings.Intern(kCopyKinds[i]);
    names[i] = trace_->strings.Intern(fmt::format("Memcpy {}", kCopyKinds[i]));
  }
  model::EventTable& events = trace_->events;
  while (q.statement.Step()) {
    CountRow();
    model::ProcessIndex process = DeviceWorkProcess(q, kMcGlobalPid, kMcCorrelation);
    if (!process.valid()) continue;
    int64_t kind = q.Int(kMcCopyKind);
    if (kind < 0 || kind >= static_cast<int64_t>(names.size())) {
      trace_->stats.Increment(model::stat::kNsysMemcpyUnknownCopyKind);
      kind = 0;
    }
    int64_t start = q.Int(kMcStart);
    int64_t graph_node_id = 0;
    bool graph_node = q.Get(kMcGraphNodeId, &graph_node_id);
    model::EventRow row = events.Append(
        Layer::kMem, EventPhase::kComplete, names[kind], process,
        DeviceTrackFor(process, q.Int(kMcDevice), q.Int(kMcStream)), TraceTime(start),
        Duration(start, q.Int(kMcEnd)),
        graph_node ? model::EventId(graph_node_id) : model::EventId::Invalid(),
        q.Correlation(kMcCorrelation), graph_node ? model::kFlagGraphNode : model::kFlagNone);
    trace_->AddIntArg(row, keys_.bytes, q.Int(kMcBytes));
    trace_->AddStringArg(row, keys_.kind, kinds[kind]);
    if (graph_node) trace_->AddIntArg(row, keys_.graph_node_id, graph_node_id);
  }
  return q.statement.status();
}

base::Status NsysImporter::ImportMemsets() {
  TELLER_ASSIGN_OR_RETURN(auto opened, OpenTable("CUPTI_ACTIVITY_KIND_MEMSET", kMemsetColumns));
  if (!opened) return base::OkStatus();
  TableQuery& q = *opened;
  StringId name = trace_->strings.Intern("Memset");
  model::EventTable& events = trace_->events;
  while (q.statement.Step()) {
    CountRow();
    model::ProcessIndex process = DeviceWorkProcess(q, kMsGlobalPid, kMsCorrelation);
    if (!process.valid()) continue;
    int64_t start = q.Int(kMsStart);
    int64_t graph_node_id = 0;
    bool graph_node = q.Get(kMsGraphNodeId, &graph_node_id);
    model::EventRow row = events.Append(
        Layer::kMem, EventPhase::kComplete, name, process,
        DeviceTrackFor(process, q.Int(kMsDevice), q.Int(kMsStream)), TraceTime(start),
        Duration(start, q.Int(kMsEnd)),
        graph_node ? model::EventId(graph_node_id) : model::EventId::Invalid(),
        q.Correlation(kMsCorrelation), graph_node ? model::kFlagGraphNode : model::kFlagNone);
    trace_->AddIntArg(row, keys_.bytes, q.Int(kMsBytes));
    int64_t value;
    if (q.Get(kMsValue, &value)) trace_->AddIntArg(row, keys_.value, value);
    if (graph_node) trace_->AddIntArg(row, keys_.graph_node_id, graph_node_id);
  }
  return q.statement.status();
}

base::Status NsysImporter::ImportSyncs() {
  static constexpr std::string_view kTable = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION";
  TELLER_ASSIGN_OR_RETURN(auto opened, OpenTable(kTable, kSyncColumns));
  if (!opened) return base::OkStatus();
  TableQuery& q = *opened;
  // Older exports name the column syncType, newer ones keep the old values in
  // deprecatedSyncType and add syncType.
  if (!q.Has(kSySyncType) && !q.Has(kSyDeprecatedSyncType)) {
    CountMissingColumn(kTable, "syncType");
    return base::OkStatus();
  }
  std::array<StringId, kSyncNames.size()> names;
  for (size_t i = 0; i < names.size(); ++i) names[i] = trace_->strings.Intern(kSyncNames[i]);
  model::EventTable& events = trace_->events;
  while (q.statement.Step()) {
    CountRow();
    model::ProcessIndex process = DeviceWorkProcess(q, kSyGlobalPid, kSyCorrelation);
    if (!process.valid()) continue;
    int64_t sync_type = q.IntOr(kSySyncType, q.IntOr(kSyDeprecatedSyncType, 0));
    if (sync_type < 0 || sync_type >= static_cast<int64_t>(names.size())) {
      trace_->stats.Increment(model::stat::kNsysSyncUnknownType);
      sync_type = 0;
    }
    int64_t start = q.Int(kSyStart);
    model::EventRow row = events.Append(
        Layer::kSync, EventPhase::kComplete, names[sync_type], process,
        DeviceTrackFor(process, q.IntOr(kSyDevice, -1), q.Int(kSyStream)), TraceTime(start),
        Duration(start, q.Int(kSyEnd)), model::EventId::Invalid(), q.Correlation(kSyCorrelation));
    int64_t event_id = q.IntOr(kSyEventId, kCuptiInvalidId);
    if (event_id != kCuptiInvalidId) trace_->AddIntArg(row, keys_.event, event_id);
  }
  return q.statement.status();
}

base::Status NsysImporter::ImportNvtx() {
  static constexpr std::string_view kTable = "NVTX_EVENTS";
  TELLER_ASSIGN_OR_RETURN(auto opened, OpenTable(kTable, kNvtxColumns));
  if (!opened) return base::OkStatus();
  TableQuery& q = *opened;
  // Older exports carry the text only; newer ones add textId for registered strings.
  if (!q.Has(kNvText) && !q.Has(kNvTextId)) {
    CountMissingColumn(kTable, "text");
    return base::OkStatus();
  }
  model::EventTable& events = trace_->events;
  // Domain args whose NvtxDomainCreate row comes later in the table: patched at the end.
  struct PendingDomain {
    size_t arg_row;
    int64_t key;
  };
  std::vector<PendingDomain> pending;
  while (q.statement.Step()) {
    CountRow();
    int64_t type = q.Int(kNvEventType);
    int64_t global_tid;
    if (!q.Get(kNvGlobalTid, &global_tid)) {
      trace_->stats.Increment(model::stat::kNsysNvtxWithoutThread);
      continue;
    }
    StringId text = base::StringPool::kEmpty;
    bool has_text = true;
    int64_t text_id;
    if (q.Get(kNvTextId, &text_id)) {
      text = NsysString(text_id);
    } else if (!q.Null(kNvText)) {
      text = trace_->strings.Intern(q.statement.Text(q.index[kNvText]));
    } else {
      has_text = false;
    }
    int64_t domain_key = (NsysPidOf(global_tid) << 32) | (q.IntOrZero(kNvDomainId) & 0xFFFFFFFF);
    EventPhase phase;
    int64_t end = 0;
    bool has_end = q.Get(kNvEnd, &end);
    switch (type) {
      case kNvtxPushPopRange:
      case kNvtxStartEndRange:
        phase = has_end ? EventPhase::kComplete : EventPhase::kBegin;
        if (!has_end) {
          trace_->stats.Increment(model::stat::kNsysNvtxRangeWithoutEnd);
        }
        break;
      case kNvtxMark:
        phase = EventPhase::kInstant;
        break;
      case kNvtxPushRange:
      case kNvtxStartRange:
        phase = EventPhase::kBegin;
        break;
      case kNvtxPopRange:
      case kNvtxEndRange:
        phase = EventPhase::kEnd;
        break;
      case kNvtxDomainCreate:
        nvtx_domains_[domain_key] = text;
        continue;
      default:
        // Categories, thread/device naming and other NVTX bookkeeping rows.
        trace_->stats.Increment(model::stat::kNsysNvtxSkippedEventType);
        continue;
    }
    if (!has_text && phase != EventPhase::kEnd) {
      trace_->stats.Increment(model::stat::kNsysNvtxWithoutText);
    }
    model::ThreadIndex thread = ThreadFor(global_tid);
    int64_t start = q.Int(kNvStart);
    int64_t range_id;
    // Marks are OTHER as in the bundle importer; ranges are FE.
    model::EventRow row = events.Append(
        phase == EventPhase::kInstant ? Layer::kOther : Layer::kFe, phase, text,
        trace_->threads.process[thread.value()], thread, TraceTime(start),
        phase == EventPhase::kComplete ? Duration(start, end) : 0,
        q.Get(kNvRangeId, &range_id) ? model::EventId(range_id) : model::EventId::Invalid());
    if ((domain_key & 0xFFFFFFFF) != 0) {
      auto domain = nvtx_domains_.find(domain_key);
      if (domain == nvtx_domains_.end()) pending.push_back({trace_->args.size(), domain_key});
      trace_->AddStringArg(
          row, keys_.domain,
          domain == nvtx_domains_.end() ? base::StringPool::kEmpty : domain->second);
    }
    int64_t category = q.IntOrZero(kNvCategory);
    if (category != 0) trace_->AddIntArg(row, keys_.category, category);
  }
  for (const PendingDomain& p : pending) {
    auto domain = nvtx_domains_.find(p.key);
    if (domain != nvtx_domains_.end()) {
      trace_->args.string_value[p.arg_row] = domain->second;
    } else {
      trace_->stats.Increment(model::stat::kNsysNvtxUnknownDomain);
    }
  }
  return q.statement.status();
}

base::Status ImportNsys(const std::string& path, const ImportOptions& options,
                        model::Trace* trace) {
  TELLER_ASSIGN_OR_RETURN(NsysDatabase db, NsysDatabase::Open(path));
  NsysImporter importer(&db, options, trace);
  return importer.Run();
}

}  // namespace teller::import
