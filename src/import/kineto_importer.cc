// Kineto / PyTorch-profiler chrome-trace JSON -> trace model. Field mapping and
// counters: docs/importers/kineto.md.
#include "import/kineto_importer.h"

#include <simdjson.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <unordered_map>

#include "base/parallel_for.h"
#include "base/time.h"
#include "import/kineto_json_key.h"
#include "import/kineto_json_scanner.h"
#include "import/kineto_parts.h"
#include "import/kineto_raw_event.h"
#include "model/classify.h"

namespace teller::import {
namespace {

namespace od = simdjson::ondemand;
using base::StringId;
using model::EventPhase;
using model::EventRow;
using model::Layer;
using model::ProcessIndex;
using model::StatSeverity;
using model::ThreadIndex;

enum class Category : uint8_t {
  kNone,
  kCpuOp,
  kUserAnnotation,
  kPythonFunction,
  kRuntime,
  kDriver,
  kKernel,
  kMemcpy,
  kMemset,
  kGpuUserAnnotation,
  kCudaSync,
  kCpuInstant,
  kOverhead,
  kTraceSpan,
  kFlowLaunch,
  kFlowFwdBwd,
  kUnknown,
  // The legacy autograd profiler (PyTorch without Kineto) writes no category and names
  // its pids: "CPU functions" holds ops and record_function ranges alike, "CUDA
  // functions" (releases before 1.13) kernels, on a tid that is the device index.
  kLegacyHostRange,
  kLegacyKernel,
};

// Current category names and the legacy 2021 schema ones (trace #11 of the manifest),
// dispatched on length first: this runs once per event.
Category ParseCategory(std::string_view cat) {
  switch (cat.size()) {
    case 0:
      return Category::kNone;
    case 4:
      if (Is(cat, "ac2g")) return Category::kFlowLaunch;
      break;
    case 5:
      if (Is(cat, "async")) return Category::kFlowLaunch;
      if (Is(cat, "Trace")) return Category::kTraceSpan;
      break;
    case 6:
      if (Is(cat, "cpu_op")) return Category::kCpuOp;
      if (Is(cat, "kernel") || Is(cat, "Kernel") || Is(cat, "gpu_op")) return Category::kKernel;
      if (Is(cat, "fwdbwd")) return Category::kFlowFwdBwd;
      if (Is(cat, "Memcpy")) return Category::kMemcpy;
      if (Is(cat, "Memset")) return Category::kMemset;
      break;
    case 7:
      if (Is(cat, "Runtime")) return Category::kRuntime;
      break;
    case 8:
      if (Is(cat, "Operator")) return Category::kCpuOp;
      if (Is(cat, "overhead")) return Category::kOverhead;
      break;
    case 9:
      if (Is(cat, "cuda_sync")) return Category::kCudaSync;
      break;
    case 10:
      if (Is(cat, "gpu_memcpy")) return Category::kMemcpy;
      if (Is(cat, "gpu_memset")) return Category::kMemset;
      break;
    case 11:
      if (Is(cat, "cuda_driver")) return Category::kDriver;
      break;
    case 12:
      if (Is(cat, "cuda_runtime")) return Category::kRuntime;
      break;
    case 15:
      if (Is(cat, "python_function")) return Category::kPythonFunction;
      if (Is(cat, "user_annotation")) return Category::kUserAnnotation;
      break;
    case 16:
      if (Is(cat, "async_cpu_to_gpu")) return Category::kFlowLaunch;
      break;
    case 17:
      if (Is(cat, "cpu_instant_event")) return Category::kCpuInstant;
      break;
    case 19:
      if (Is(cat, "gpu_user_annotation")) return Category::kGpuUserAnnotation;
      if (Is(cat, "cuda_profiler_range")) return Category::kUserAnnotation;
      break;
    default:
      break;
  }
  return Category::kUnknown;
}

bool IsDeviceCategory(Category category) {
  return category == Category::kKernel || category == Category::kLegacyKernel ||
         category == Category::kMemcpy || category == Category::kMemset ||
         category == Category::kGpuUserAnnotation || category == Category::kCudaSync;
}

// Size of one element of a PyTorch dtype name ("Float", "BFloat16"), 0 when unknown.
int64_t DtypeBytes(std::string_view dtype) {
  struct Entry {
    std::string_view name;
    int64_t bytes;
  };
  static constexpr std::array<Entry, 17> kSizes = {{
      {"Float", 4},
      {"BFloat16", 2},
      {"Half", 2},
      {"Double", 8},
      {"Int", 4},
      {"Long", 8},
      {"Short", 2},
      {"Char", 1},
      {"Byte", 1},
      {"Bool", 1},
      {"Float8_e4m3fn", 1},
      {"Float8_e5m2", 1},
      {"Float8_e4m3fnuz", 1},
      {"Float8_e5m2fnuz", 1},
      {"ComplexFloat", 8},
      {"ComplexDouble", 16},
      {"ComplexHalf", 4},
  }};
  for (const Entry& entry : kSizes) {
    if (entry.name == dtype) return entry.bytes;
  }
  return 0;
}

// Index of rank in a "[0, 1, 2]" list, -1 when absent.
int32_t IndexInRankList(std::string_view list, int32_t rank) {
  int32_t index = 0;
  size_t i = 0;
  while (i < list.size()) {
    while (i < list.size() && (list[i] < '0' || list[i] > '9')) ++i;
    if (i == list.size()) break;
    int64_t value = 0;
    while (i < list.size() && list[i] >= '0' && list[i] <= '9')
      value = value * 10 + (list[i++] - '0');
    if (value == rank) return index;
    ++index;
  }
  return -1;
}

struct PairKey {
  int64_t a;
  int64_t b;
  bool operator==(const PairKey&) const = default;
};
struct PairKeyHash {
  size_t operator()(const PairKey& key) const {
    uint64_t h = static_cast<uint64_t>(key.a) * 0x9E3779B97F4A7C15ull;
    h ^= static_cast<uint64_t>(key.b) + 0x7F4A7C159E3779B9ull + (h << 6) + (h >> 2);
    return static_cast<size_t>(h ^ (h >> 31));
  }
};

constexpr uint32_t kNoRow = UINT32_MAX;

// Gives back growth slack so resident columns stay near their size.
template <typename Vector>
void ShrinkIfSlack(Vector* v) {
  if (v->capacity() > v->size() + v->size() / 32 + 4096) v->shrink_to_fit();
}

void ShrinkEventColumns(model::Trace* trace) {
  model::EventTable& e = trace->events;
  ShrinkIfSlack(&e.layer);
  ShrinkIfSlack(&e.phase);
  ShrinkIfSlack(&e.flags);
  ShrinkIfSlack(&e.name);
  ShrinkIfSlack(&e.process);
  ShrinkIfSlack(&e.thread);
  ShrinkIfSlack(&e.start_ns);
  ShrinkIfSlack(&e.dur_ns);
  ShrinkIfSlack(&e.id);
  ShrinkIfSlack(&e.correlation);
  ShrinkIfSlack(&e.args_begin);
  ShrinkIfSlack(&e.args_count);
  model::ArgTable& a = trace->args;
  ShrinkIfSlack(&a.key);
  ShrinkIfSlack(&a.type);
  ShrinkIfSlack(&a.int_value);
  ShrinkIfSlack(&a.string_value);
}

class KinetoImporter {
 public:
  KinetoImporter(std::string source, const ImportOptions& options, model::Trace* trace)
      : source_(std::move(source)), options_(options), trace_(trace) {}

  base::Status Run(base::ChunkReader* reader, const KinetoReadConfig& config);

 private:
  struct Keys {
    StringId grid_block, sequence_number, fwd_thread_id, python_parent_id, bytes, sync_kind,
        wait_on_stream, wait_on_event_correlation, memory_bytes, total_allocated, total_reserved,
        device_id, device_type, pg_desc, pg_ranks, in_nelems, out_nelems, src_rank, dst_rank;
  };

  void InternKeys();
  // The scan on this thread alone: each item handled as the scanner gives it.
  base::Status ScanInOrder(KinetoJsonScanner* scanner);
  // The scan in parts: batches parsed on `threads` threads, handled in order. Where a
  // batch's elements cross its end, *scanner is replaced by one that scans input again
  // from there.
  base::Status ScanInParts(const KinetoReadConfig& config, int threads, ReplayReader* input,
                           std::unique_ptr<KinetoJsonScanner>* scanner);
  // The checks at the end of the scan, then Finish.
  base::Status CheckAndFinish(const KinetoJsonScanner& scanner);
  // Parses a wrapped batch "[e1, ...]"; returns nullptr when all of it was used, else
  // where exact splitting must resume.
  const char* HandleBatch(std::string_view wrapped);
  // A batch parsed in parts: its events, then (where the batch could not be parsed
  // whole) its other elements split exactly. Returns nullptr, or where that splitting
  // would cross the batch's end.
  const char* HandleParsedBatch(const KinetoPart& part);
  void ReportProgress(uint64_t offset);
  void Dispatch(const RawEvent& event);
  bool EventPhaseOf(const RawEvent& event, Category category, EventPhase* phase);
  bool EventTimes(const RawEvent& event, Category category, EventPhase phase,
                  base::TimeNs* start_ns, base::DurationNs* dur_ns);
  bool EventTrack(const RawEvent& event, Category category, EventPhase phase, ProcessIndex* process,
                  ThreadIndex* thread);
  Layer EventLayer(const RawEvent& event, Category category, StringId name, uint8_t* flags);
  // Layer of a kernel or API call name, classified once per distinct name.
  Layer CachedLayer(Category category, StringId name, std::string_view text);
  void HandleEvent(std::string_view text);
  void HandleMetadata(const RawEvent& event);
  void HandleFlow(const RawEvent& event, Category category);
  void HandleTopLevel(std::string_view key, std::string_view text, uint64_t offset);
  void AddArgs(EventRow row, Category category, const RawEvent& event);
  void AddCollective(EventRow row, const RawEvent& event);
  void Finish(const KinetoJsonScanner& scanner);

  ProcessIndex MainProcess();
  ProcessIndex HostProcess(int64_t pid, std::string_view pid_name);
  ThreadIndex HostThread(ProcessIndex process, int64_t pid, int64_t tid);
  ThreadIndex DeviceTrack(int64_t device, int64_t stream);
  // tid as an integer: numbers, numeric strings, "stream N"; other strings get
  // stable negative ids.
  bool ResolveTid(const IdField& tid, int64_t* out);
  // pid as an integer: numbers and numeric strings; names ("CPU functions") get stable
  // negative ids from -2 on; false for a missing or empty pid and other JSON types.
  bool ResolvePid(const IdField& pid, int64_t* out);
  void Count(const model::StatDef& stat) { trace_->stats.Increment(stat); }

  std::string source_;
  const ImportOptions& options_;
  model::Trace* trace_;
  KinetoEventParser parser_;
  Keys keys_{};
  base::ChunkReader* reader_ = nullptr;  // for progress
  uint64_t last_progress_ = 0;

  size_t first_event_ = 0;
  size_t first_process_ = 0;
  size_t first_thread_ = 0;
  size_t first_collective_ = 0;
  ProcessIndex main_process_ = ProcessIndex::Invalid();
  bool main_pid_known_ = false;
  std::unordered_map<int64_t, ProcessIndex> processes_;
  std::unordered_map<PairKey, ThreadIndex, PairKeyHash> host_threads_;
  std::unordered_map<PairKey, ThreadIndex, PairKeyHash> device_tracks_;
  std::unordered_map<std::string, int64_t> string_tids_;
  std::unordered_map<std::string, int64_t> string_pids_;
  PairKey last_host_key_{INT64_MIN, INT64_MIN};
  ThreadIndex last_host_thread_ = ThreadIndex::Invalid();
  PairKey last_device_key_{INT64_MIN, INT64_MIN};
  ThreadIndex last_device_thread_ = ThreadIndex::Invalid();
  std::vector<uint32_t> last_row_of_thread_;  // by thread - first_thread_

  // Metadata, applied at the end (it may come before or after the events).
  std::unordered_map<PairKey, StringId, PairKeyHash> thread_names_;
  std::unordered_map<int64_t, StringId> process_names_;
  bool has_base_time_ = false;
  int64_t base_time_ns_ = 0;
  int32_t file_rank_ = -1;
  int32_t world_size_ = -1;
  std::string backend_;
  std::vector<std::string> device_notes_;
  int64_t events_read_ = 0;
  int64_t events_imported_ = 0;
  // By StringId: 0 unknown, else kCachedValid | layer | kCachedGraphLaunch.
  static constexpr uint8_t kCachedLayerMask = 0x1F;
  static constexpr uint8_t kCachedValid = 0x40;
  static constexpr uint8_t kCachedGraphLaunch = 0x80;
  std::vector<uint8_t> layer_cache_;
};

void KinetoImporter::InternKeys() {
  base::StringPool& s = trace_->strings;
  keys_.grid_block = s.Intern("grid;block");
  keys_.sequence_number = s.Intern("Sequence number");
  keys_.fwd_thread_id = s.Intern("Fwd thread id");
  keys_.python_parent_id = s.Intern("Python parent id");
  keys_.bytes = s.Intern("bytes");
  keys_.sync_kind = s.Intern("cuda_sync_kind");
  keys_.wait_on_stream = s.Intern("wait_on_stream");
  keys_.wait_on_event_correlation = s.Intern("wait_on_cuda_event_record_corr_id");
  keys_.memory_bytes = s.Intern("Bytes");
  keys_.total_allocated = s.Intern("Total Allocated");
  keys_.total_reserved = s.Intern("Total Reserved");
  keys_.device_id = s.Intern("Device Id");
  keys_.device_type = s.Intern("Device Type");
  keys_.pg_desc = s.Intern("Process Group Description");
  keys_.pg_ranks = s.Intern("Process Group Ranks");
  keys_.in_nelems = s.Intern("In msg nelems");
  keys_.out_nelems = s.Intern("Out msg nelems");
  keys_.src_rank = s.Intern("Src Rank");
  keys_.dst_rank = s.Intern("Dst Rank");
}

ProcessIndex KinetoImporter::MainProcess() {
  if (!main_process_.valid()) {
    main_process_ = trace_->processes.Append(-1, base::StringPool::kEmpty, base::StringPool::kEmpty,
                                             -1, trace_->strings.Intern(source_));
  }
  return main_process_;
}

ProcessIndex KinetoImporter::HostProcess(int64_t pid, std::string_view pid_name) {
  auto it = processes_.find(pid);
  if (it != processes_.end()) return it->second;
  ProcessIndex process;
  if (!main_pid_known_) {
    // The first host pid owns the file's device tracks.
    process = MainProcess();
    trace_->processes.os_pid[process.value()] = pid;
    main_pid_known_ = true;
  } else {
    process = trace_->processes.Append(pid, base::StringPool::kEmpty, base::StringPool::kEmpty, -1,
                                       trace_->strings.Intern(source_));
  }
  // A named pid names its process, unless process_name metadata does (Finish).
  if (!pid_name.empty()) trace_->processes.name[process.value()] = trace_->strings.Intern(pid_name);
  processes_.emplace(pid, process);
  return process;
}

bool KinetoImporter::ResolvePid(const IdField& pid, int64_t* out) {
  if (pid.present && pid.numeric) {
    *out = pid.number;
    return true;
  }
  if (!pid.named()) return false;
  auto it = string_pids_.find(std::string(pid.text));
  if (it == string_pids_.end()) {
    it = string_pids_.emplace(std::string(pid.text), -2 - static_cast<int64_t>(string_pids_.size()))
             .first;
  }
  *out = it->second;
  return true;
}

bool KinetoImporter::ResolveTid(const IdField& tid, int64_t* out) {
  if (!tid.present) return false;
  if (tid.numeric) {
    *out = tid.number;
    return true;
  }
  std::string_view text = tid.text;
  if (text.substr(0, 7) == "stream ") {
    if (ParseIntText(TrimRight(text.substr(7)), out)) return true;
  }
  auto it = string_tids_.find(std::string(text));
  if (it == string_tids_.end()) {
    it = string_tids_.emplace(std::string(text), -2 - static_cast<int64_t>(string_tids_.size()))
             .first;
  }
  *out = it->second;
  return true;
}

ThreadIndex KinetoImporter::HostThread(ProcessIndex process, int64_t pid, int64_t tid) {
  PairKey key{pid, tid};
  if (key == last_host_key_) return last_host_thread_;
  auto it = host_threads_.find(key);
  ThreadIndex thread;
  if (it != host_threads_.end()) {
    thread = it->second;
  } else {
    thread = trace_->threads.Append(process, tid, base::StringPool::kEmpty, false, -1);
    host_threads_.emplace(key, thread);
    last_row_of_thread_.push_back(kNoRow);
  }
  last_host_key_ = key;
  last_host_thread_ = thread;
  return thread;
}

ThreadIndex KinetoImporter::DeviceTrack(int64_t device, int64_t stream) {
  PairKey key{device, stream};
  if (key == last_device_key_) return last_device_thread_;
  auto it = device_tracks_.find(key);
  ThreadIndex thread;
  if (it != device_tracks_.end()) {
    thread = it->second;
  } else {
    thread = trace_->threads.Append(MainProcess(), stream, base::StringPool::kEmpty, true,
                                    static_cast<int32_t>(device));
    device_tracks_.emplace(key, thread);
    last_row_of_thread_.push_back(kNoRow);
  }
  last_device_key_ = key;
  last_device_thread_ = thread;
  return thread;
}

void KinetoImporter::HandleEvent(std::string_view text) {
  ++events_read_;
  if (text.empty() || text[0] != '{') {
    Count(model::stat::kKinetoEventNotObject);
    return;
  }
  RawEvent event;
  if (!parser_.ParseEvent(text, &event)) {
    Count(model::stat::kKinetoEventMalformed);
    return;
  }
  Dispatch(event);
}

const char* KinetoImporter::HandleBatch(std::string_view wrapped) {
  return parser_.ParseBatch(wrapped, [this](const RawEvent& event) {
    ++events_read_;
    Dispatch(event);
  });
}

const char* KinetoImporter::HandleParsedBatch(const KinetoPart& part) {
  RawEvent event;
  for (size_t i = 0; i < part.events.size(); ++i) {
    part.events.Get(i, &event);
    ++events_read_;
    Dispatch(event);
  }
  if (!part.resume) return nullptr;
  // The one-thread scan would Resume here: split the rest as it would, while that
  // stays within the batch.
  const char* cut = part.view().data() + part.size - 1;
  return SplitElementsBefore(part.resume, cut, [this](std::string_view text, bool mismatched) {
    if (mismatched) Count(model::stat::kKinetoEventBracketsMismatched);
    HandleEvent(text);
  });
}

// The event's phase; false when the event is not a trace event (metadata, flows) or
// is skipped, which this handles or counts.
bool KinetoImporter::EventPhaseOf(const RawEvent& event, Category category, EventPhase* phase) {
  switch (event.ph) {
    case 'X':
      *phase = EventPhase::kComplete;
      return true;
    case 'B':
      *phase = EventPhase::kBegin;
      return true;
    case 'E':
      *phase = EventPhase::kEnd;
      return true;
    case 'i':
    case 'I':
      *phase = EventPhase::kInstant;
      return true;
    case 'M':
      HandleMetadata(event);
      return false;
    case 's':
    case 'f':
    case 't':
      HandleFlow(event, category);
      return false;
    case 'C':
      Count(model::stat::kKinetoCounterEventsSkipped);
      return false;
    case 'b':
    case 'e':
    case 'n':
      Count(model::stat::kKinetoAsyncEventsSkipped);
      return false;
    case 0:
      Count(model::stat::kKinetoEventMissingPh);
      return false;
    default:
      Count(model::stat::kKinetoEventUnknownPhase);
      return false;
  }
}

// Skips profiler spans and overhead, and counts events without a name or a valid
// start or duration; false when the event is dropped.
bool KinetoImporter::EventTimes(const RawEvent& event, Category category, EventPhase phase,
                                base::TimeNs* start_ns, base::DurationNs* dur_ns) {
  if (category == Category::kTraceSpan) {
    Count(model::stat::kKinetoProfilerSpanSkipped);
    return false;
  }
  if (category == Category::kOverhead) {
    Count(model::stat::kKinetoOverheadSkipped);
    return false;
  }
  if (!event.has_name && phase != EventPhase::kEnd) {
    Count(model::stat::kKinetoEventMissingName);
    return false;
  }
  if (!event.has_ts) {
    Count(model::stat::kKinetoEventMissingTs);
    return false;
  }
  if (!event.TsNs(start_ns)) {
    Count(model::stat::kKinetoEventBadTs);
    return false;
  }
  *dur_ns = 0;
  if (phase != EventPhase::kComplete) return true;
  if (!event.has_dur) {
    Count(model::stat::kKinetoEventMissingDur);
    return true;
  }
  if (!event.DurNs(dur_ns)) {
    Count(model::stat::kKinetoEventBadDur);
    return false;
  }
  if (*dur_ns < 0) {
    Count(model::stat::kKinetoEventNegativeDur);
    *dur_ns = 0;
  }
  return true;
}

// Track: device stream for device work, else the host thread; false when the event
// has no usable host pid or tid.
bool KinetoImporter::EventTrack(const RawEvent& event, Category category, EventPhase phase,
                                ProcessIndex* process, ThreadIndex* thread) {
  if (category == Category::kLegacyKernel) {
    // The tid is the device; the stream is not written.
    if (!event.tid.numeric) Count(model::stat::kKinetoDeviceEventWithoutDevice);
    *thread = DeviceTrack(event.tid.numeric ? event.tid.number : -1, -1);
    *process = MainProcess();
    return true;
  }
  if (IsDeviceCategory(category)) {
    int64_t device = -1;
    int64_t stream = -1;
    if (!event.HasInt(kArgDevice, &device) && event.pid.numeric) device = event.pid.number;
    if (!event.HasInt(kArgStream, &stream) && !ResolveTid(event.tid, &stream)) stream = -1;
    if (device < 0) Count(model::stat::kKinetoDeviceEventWithoutDevice);
    *thread = DeviceTrack(device, stream);
    *process = MainProcess();
    return true;
  }
  // A named pid of an instant is a global mark (Kineto's "Traces"); of other host
  // events a process of that name (the legacy profiler's "CPU functions").
  int64_t pid = 0;
  if (phase == EventPhase::kInstant && !event.pid.numeric) {
    Count(model::stat::kKinetoGlobalInstantSkipped);
    return false;
  }
  if (!ResolvePid(event.pid, &pid)) {
    Count(model::stat::kKinetoEventBadPid);
    return false;
  }
  int64_t tid = 0;
  if (!ResolveTid(event.tid, &tid)) {
    Count(model::stat::kKinetoEventMissingTid);
    return false;
  }
  *process = HostProcess(pid, event.pid.numeric ? std::string_view() : event.pid.text);
  *thread = HostThread(*process, pid, tid);
  return true;
}

// The event's layer by category (and name), and its graph-launch flag.
Layer KinetoImporter::EventLayer(const RawEvent& event, Category category, StringId name,
                                 uint8_t* flags) {
  switch (category) {
    case Category::kCpuOp:
      return model::ClassifyHostOp(event.name);
    case Category::kUserAnnotation:
      return model::ClassifyUserAnnotation(event.name);
    case Category::kLegacyHostRange:
      return model::ClassifyHostRange(event.name);
    case Category::kPythonFunction:
    case Category::kGpuUserAnnotation:
      return Layer::kFe;
    case Category::kRuntime:
    case Category::kDriver: {
      Layer layer = CachedLayer(category, name, event.name);
      if (layer_cache_[name.value()] & kCachedGraphLaunch) *flags |= model::kFlagGraphLaunch;
      return layer;
    }
    case Category::kKernel:
    case Category::kLegacyKernel:
      return CachedLayer(Category::kKernel, name, event.name);
    case Category::kMemcpy:
    case Category::kMemset:
      return Layer::kMem;
    case Category::kCudaSync:
      return Layer::kSync;
    case Category::kCpuInstant:
      return Layer::kOther;
    case Category::kNone:
    case Category::kUnknown:
    case Category::kFlowLaunch:
    case Category::kFlowFwdBwd:
      Count(model::stat::kKinetoUnknownCategory);
      return Layer::kOther;
    case Category::kOverhead:
    case Category::kTraceSpan:
      break;
  }
  return Layer::kOther;
}

void KinetoImporter::Dispatch(const RawEvent& event) {
  Category category = ParseCategory(event.cat);
  if (category == Category::kNone && event.pid.named()) {
    category =
        event.pid.text == "CUDA functions" ? Category::kLegacyKernel : Category::kLegacyHostRange;
  }
  EventPhase phase;
  if (!EventPhaseOf(event, category, &phase)) return;
  base::TimeNs start_ns = 0;
  base::DurationNs dur_ns = 0;
  if (!EventTimes(event, category, phase, &start_ns, &dur_ns)) return;
  ThreadIndex thread;
  ProcessIndex process;
  if (!EventTrack(event, category, phase, &process, &thread)) return;

  StringId name = event.has_name ? trace_->strings.Intern(event.name) : base::StringPool::kEmpty;
  uint8_t flags = model::kFlagNone;
  Layer layer = EventLayer(event, category, name, &flags);

  int64_t value = 0;
  model::EventId id = model::EventId::Invalid();
  if (category == Category::kPythonFunction && event.HasInt(kArgPythonId, &value)) {
    id = model::EventId(value);
  } else if (event.HasInt(kArgExternalId, &value)) {
    id = model::EventId(value);
  }
  model::CorrelationId correlation = model::CorrelationId::Invalid();
  if (event.HasInt(kArgCorrelation, &value)) correlation = model::CorrelationId(value);

  EventRow row = trace_->events.Append(layer, phase, name, process, thread, start_ns, dur_ns, id,
                                       correlation, flags);
  ++events_imported_;
  if (event.pid.named()) Count(model::stat::kKinetoEventNamedPid);
  last_row_of_thread_[thread.value() - first_thread_] = row.value();
  if (event.args_present != 0) AddArgs(row, category, event);
}

Layer KinetoImporter::CachedLayer(Category category, StringId name, std::string_view text) {
  // One cache per name; kernels, runtime and driver calls never share a name.
  if (layer_cache_.size() <= name.value()) layer_cache_.resize(trace_->strings.size() + 1024, 0);
  uint8_t& cached = layer_cache_[name.value()];
  if (cached == 0) {
    Layer layer = category == Category::kKernel
                      ? model::ClassifyKernel(text)
                      : model::ClassifyApiCall(text, category == Category::kDriver);
    cached = static_cast<uint8_t>(kCachedValid | static_cast<uint8_t>(layer));
    if (category != Category::kKernel && model::IsGraphLaunchName(text)) {
      cached |= kCachedGraphLaunch;
    }
  }
  return static_cast<Layer>(cached & kCachedLayerMask);
}

void KinetoImporter::AddArgs(EventRow row, Category category, const RawEvent& event) {
  int64_t value = 0;
  switch (category) {
    case Category::kKernel:
      // One interned "grid;block" arg ("512,1,1;128,1,1") keeps kernels at one arg row.
      if (!event.Text(kArgGrid).empty() || !event.Text(kArgBlock).empty()) {
        std::array<char, 100> text;
        auto out = fmt::format_to_n(text.data(), text.size(), "{};{}", event.Text(kArgGrid),
                                    event.Text(kArgBlock));
        trace_->AddStringArg(row, keys_.grid_block,
                             trace_->strings.Intern(std::string_view(text.data(), out.size)));
      }
      break;
    case Category::kMemcpy:
    case Category::kMemset:
      if (event.HasInt(kArgBytes, &value)) trace_->AddIntArg(row, keys_.bytes, value);
      break;
    case Category::kCpuOp:
      if (event.HasInt(kArgSequenceNumber, &value)) {
        trace_->AddIntArg(row, keys_.sequence_number, value);
      }
      if (event.HasInt(kArgFwdThreadId, &value)) trace_->AddIntArg(row, keys_.fwd_thread_id, value);
      break;
    case Category::kPythonFunction:
      if (event.HasInt(kArgPythonParentId, &value)) {
        trace_->AddIntArg(row, keys_.python_parent_id, value);
      }
      break;
    case Category::kCudaSync:
      if (!event.Text(kArgSyncKind).empty()) {
        trace_->AddStringArg(row, keys_.sync_kind,
                             trace_->strings.Intern(event.Text(kArgSyncKind)));
      }
      if (event.HasInt(kArgWaitOnStream, &value))
        trace_->AddIntArg(row, keys_.wait_on_stream, value);
      if (event.HasInt(kArgWaitOnEventCorrelation, &value)) {
        trace_->AddIntArg(row, keys_.wait_on_event_correlation, value);
      }
      break;
    case Category::kCpuInstant:
      if (event.HasInt(kArgMemoryBytes, &value)) trace_->AddIntArg(row, keys_.memory_bytes, value);
      if (event.HasInt(kArgTotalAllocated, &value)) {
        trace_->AddIntArg(row, keys_.total_allocated, value);
      }
      if (event.HasInt(kArgTotalReserved, &value)) {
        trace_->AddIntArg(row, keys_.total_reserved, value);
      }
      if (event.HasInt(kArgDeviceId, &value)) trace_->AddIntArg(row, keys_.device_id, value);
      if (event.HasInt(kArgDeviceType, &value)) trace_->AddIntArg(row, keys_.device_type, value);
      break;
    default:
      break;
  }
  if (event.Has(kArgCollectiveName)) AddCollective(row, event);
}

void KinetoImporter::AddCollective(EventRow row, const RawEvent& event) {
  base::StringPool& strings = trace_->strings;
  int64_t value = 0;
  int64_t in_nelems = -1;
  int64_t out_nelems = -1;
  event.HasInt(kArgInMsgNelems, &in_nelems);
  event.HasInt(kArgOutMsgNelems, &out_nelems);
  if (in_nelems >= 0) trace_->AddIntArg(row, keys_.in_nelems, in_nelems);
  if (out_nelems >= 0) trace_->AddIntArg(row, keys_.out_nelems, out_nelems);
  if (!event.Text(kArgPgDesc).empty()) {
    trace_->AddStringArg(row, keys_.pg_desc, strings.Intern(event.Text(kArgPgDesc)));
  }
  if (!event.Text(kArgPgRanks).empty()) {
    trace_->AddStringArg(row, keys_.pg_ranks, strings.Intern(event.Text(kArgPgRanks)));
  }
  if (event.HasInt(kArgSrcRank, &value)) trace_->AddIntArg(row, keys_.src_rank, value);
  if (event.HasInt(kArgDstRank, &value)) trace_->AddIntArg(row, keys_.dst_rank, value);

  model::CollectiveTable& c = trace_->collectives;
  c.event.push_back(row);
  // The process group name is the communicator ("0", "3"); numeric names arrive as numbers too.
  StringId communicator = base::StringPool::kEmpty;
  if (event.Has(kArgPgName)) {
    communicator = event.IsText(kArgPgName)
                       ? strings.Intern(event.Text(kArgPgName))
                       : strings.Intern(fmt::format("{}", event.arg_int[kArgPgName]));
  }
  c.communicator.push_back(communicator);
  int64_t sequence = -1;
  if (!event.HasInt(kArgSeq, &sequence)) sequence = -1;
  c.sequence.push_back(sequence);
  c.op.push_back(strings.Intern(event.Text(kArgCollectiveName)));
  std::string_view dtype = event.Text(kArgDtype);
  c.dtype.push_back(strings.Intern(dtype));
  int64_t element_bytes = DtypeBytes(dtype);
  int64_t nelems = std::max(in_nelems, out_nelems);
  c.size_bytes.push_back(element_bytes > 0 && nelems >= 0 ? nelems * element_bytes : -1);
  int64_t group_size = -1;
  event.HasInt(kArgGroupSize, &group_size);
  c.group_size.push_back(static_cast<int32_t>(group_size));
  int64_t group_rank = -1;
  event.HasInt(kArgRank, &group_rank);
  c.group_rank.push_back(static_cast<int32_t>(group_rank));
}

void KinetoImporter::HandleMetadata(const RawEvent& event) {
  Count(model::stat::kKinetoMetadataEvents);
  int64_t pid = 0;
  if (event.Text(kArgName).empty() || !ResolvePid(event.pid, &pid)) return;
  std::string_view value = TrimRight(event.Text(kArgName));
  if (event.name == "process_name") {
    process_names_[pid] = trace_->strings.Intern(value);
  } else if (event.name == "thread_name") {
    int64_t tid = 0;
    if (ResolveTid(event.tid, &tid)) {
      thread_names_[PairKey{pid, tid}] = trace_->strings.Intern(value);
    }
  }
}

void KinetoImporter::HandleFlow(const RawEvent& event, Category category) {
  Count(model::stat::kKinetoFlowEvents);
  // Launch flows duplicate the correlation arg; use them only where an event lacks one.
  if (category != Category::kFlowLaunch || !event.has_id || !event.has_ts || !event.pid.numeric) {
    return;
  }
  int64_t tid = 0;
  if (!ResolveTid(event.tid, &tid)) return;
  ThreadIndex thread = ThreadIndex::Invalid();
  auto device = device_tracks_.find(PairKey{event.pid.number, tid});
  if (device != device_tracks_.end()) {
    thread = device->second;
  } else {
    auto host = host_threads_.find(PairKey{event.pid.number, tid});
    if (host != host_threads_.end()) thread = host->second;
  }
  if (!thread.valid()) return;
  uint32_t row = last_row_of_thread_[thread.value() - first_thread_];
  if (row == kNoRow) return;
  int64_t ts = 0;
  if (!event.TsNs(&ts) || trace_->events.start_ns[row] != ts) return;
  model::CorrelationId& correlation = trace_->events.correlation[row];
  if (!correlation.valid()) {
    correlation = model::CorrelationId(event.id);
    Count(model::stat::kKinetoFlowBoundCorrelation);
  } else if (correlation.value() != event.id) {
    Count(model::stat::kKinetoFlowCorrelationMismatch);
  }
}

void KinetoImporter::HandleTopLevel(std::string_view key, std::string_view text, uint64_t offset) {
  if (key == "baseTimeNanoseconds") {
    int64_t base = 0;
    if (ParseIntText(TrimRight(text), &base)) {
      has_base_time_ = true;
      base_time_ns_ = base;
    } else {
      Count(model::stat::kKinetoBadBaseTime);
    }
    return;
  }
  if (key != "distributedInfo" && key != "deviceProperties") return;
  od::document doc;
  if (parser_.parser()
          .iterate(text.data(), text.size(), text.size() + KinetoJsonScanner::kPaddingBytes)
          .get(doc)) {
    Count(model::stat::kKinetoBadTopLevelValue);
    return;
  }
  if (key == "distributedInfo") {
    od::object object;
    if (doc.get_object().get(object)) {
      Count(model::stat::kKinetoBadTopLevelValue);
      return;
    }
    for (auto field_result : object) {
      od::field field;
      if (std::move(field_result).get(field)) break;
      std::string_view name = RawKey(field.key());
      od::value value = field.value();
      int64_t number = 0;
      std::string_view string_value;
      if (name == "rank" && !value.get_int64().get(number)) {
        file_rank_ = static_cast<int32_t>(number);
      } else if (name == "world_size" && !value.get_int64().get(number)) {
        world_size_ = static_cast<int32_t>(number);
      } else if (name == "backend" && !value.get_string().get(string_value)) {
        backend_ = std::string(string_value);
      }
    }
    return;
  }
  // deviceProperties: [{id, name, totalGlobalMem, computeMajor, computeMinor, numSms}, ...]
  od::array devices;
  if (doc.get_array().get(devices)) {
    Count(model::stat::kKinetoBadTopLevelValue);
    return;
  }
  for (auto device_result : devices) {
    od::object device;
    if (device_result.get_object().get(device)) break;
    int64_t id = -1, memory = -1, major = -1, minor = -1, sms = -1;
    std::string_view name;
    for (auto field_result : device) {
      od::field field;
      if (std::move(field_result).get(field)) break;
      std::string_view field_name = RawKey(field.key());
      od::value value = field.value();
      simdjson::error_code error = simdjson::SUCCESS;
      if (field_name == "id") {
        error = value.get_int64().get(id);
      } else if (field_name == "name") {
        error = value.get_string().get(name);
      } else if (field_name == "totalGlobalMem") {
        error = value.get_int64().get(memory);
      } else if (field_name == "computeMajor") {
        error = value.get_int64().get(major);
      } else if (field_name == "computeMinor") {
        error = value.get_int64().get(minor);
      } else if (field_name == "numSms") {
        error = value.get_int64().get(sms);
      }
      if (error) Count(model::stat::kKinetoBadDeviceProperty);
    }
    device_notes_.push_back(fmt::format("GPU {}: {} (compute {}.{}, {} SMs, {} bytes)", id,
                                        name.empty() ? "unnamed" : name, major, minor, sms,
                                        memory));
  }
  (void)offset;
}

void KinetoImporter::Finish(const KinetoJsonScanner& scanner) {
  model::EventTable& events = trace_->events;
  // ts is relative to baseTimeNanoseconds when the file has one (it may follow the events).
  if (has_base_time_ && base_time_ns_ != 0) {
    for (size_t i = first_event_; i < events.size(); ++i) events.start_ns[i] += base_time_ns_;
  }
  // Names from metadata events.
  for (size_t i = first_thread_; i < trace_->threads.size(); ++i) {
    int64_t tid = trace_->threads.os_tid[i];
    bool device = trace_->threads.is_device[i] != 0;
    int64_t owner = device ? trace_->threads.device[i]
                           : trace_->processes.os_pid[trace_->threads.process[i].value()];
    auto it = thread_names_.find(PairKey{owner, tid});
    if (it != thread_names_.end()) {
      trace_->threads.name[i] = it->second;
    } else if (device) {
      trace_->threads.name[i] = trace_->strings.Intern(fmt::format("stream {}", tid));
    } else if (tid < -1) {
      for (const auto& [text, id] : string_tids_) {
        if (id == tid) trace_->threads.name[i] = trace_->strings.Intern(text);
      }
    }
  }
  int32_t rank = file_rank_ >= 0 ? file_rank_ : options_.rank_hint;
  for (size_t i = first_process_; i < trace_->processes.size(); ++i) {
    auto it = process_names_.find(trace_->processes.os_pid[i]);
    if (it != process_names_.end()) trace_->processes.name[i] = it->second;
    trace_->processes.rank[i] = rank;
  }
  // Ranks within process groups, from the group's rank list and this file's rank.
  model::CollectiveTable& c = trace_->collectives;
  if (rank >= 0) {
    for (size_t i = first_collective_; i < c.size(); ++i) {
      if (c.group_rank[i] >= 0) continue;
      StringId ranks;
      if (trace_->FindStringArg(c.event[i], keys_.pg_ranks, &ranks)) {
        c.group_rank[i] = IndexInRankList(trace_->str(ranks), rank);
      }
    }
  }

  model::TraceMeta& meta = trace_->meta;
  meta.AddInputFormat(model::TraceFormat::kKineto);
  meta.sources.push_back(source_);
  if (file_rank_ >= 0 || world_size_ >= 0) {
    meta.notes.push_back(fmt::format("{}: rank {} of {} ({}), from distributedInfo", source_,
                                     file_rank_, world_size_,
                                     backend_.empty() ? "backend unknown" : backend_));
  }
  for (const std::string& note : device_notes_) meta.notes.push_back(source_ + ": " + note);

  ShrinkEventColumns(trace_);
  model::Stats& stats = trace_->stats;
  stats.Increment(model::stat::kKinetoEventsRead, events_read_);
  stats.Increment(model::stat::kKinetoEventsImported, events_imported_);
  if (scanner.truncated() || !scanner.reader_error().empty()) {
    stats.Increment(model::stat::kKinetoTruncatedFile);
    std::string where = scanner.truncated()
                            ? fmt::format("JSON ends at byte {} where {} was expected",
                                          scanner.truncated_offset(), scanner.truncation_reason())
                            : scanner.reader_error();
    meta.notes.push_back(
        fmt::format("{}: truncated file: {}; the {} complete events before the cut were imported",
                    source_, where, events_read_));
  }
}

void KinetoImporter::ReportProgress(uint64_t offset) {
  if (options_.progress && offset > last_progress_ + (8u << 20)) {
    last_progress_ = offset;
    base::ReportProgress(options_.progress, "kineto", reader_->file_offset(), reader_->file_size());
  }
}

base::Status KinetoImporter::ScanInOrder(KinetoJsonScanner* scanner) {
  while (true) {
    TELLER_ASSIGN_OR_RETURN(KinetoJsonScanner::Item item, scanner->Next());
    if (item.kind == KinetoJsonScanner::ItemKind::kEnd) return base::OkStatus();
    if (item.kind == KinetoJsonScanner::ItemKind::kEventBatch) {
      const char* resume = HandleBatch(item.text);
      if (resume) scanner->Resume(resume);
    } else if (item.kind == KinetoJsonScanner::ItemKind::kEvent) {
      if (item.mismatched_brackets) Count(model::stat::kKinetoEventBracketsMismatched);
      HandleEvent(item.text);
    } else {
      HandleTopLevel(item.key, item.text, item.offset);
    }
    ReportProgress(item.offset);
  }
}

base::Status KinetoImporter::ScanInParts(const KinetoReadConfig& config, int threads,
                                         ReplayReader* input,
                                         std::unique_ptr<KinetoJsonScanner>* scanner) {
  // The caller parses too; twice the threads in parts keeps every thread busy.
  KinetoPartQueue parts(threads - 1, 2 * static_cast<size_t>(threads) + 1);
  bool scanned = false;  // the scanner gave its end or an error
  while (true) {
    while (!scanned) {
      KinetoPart* next = parts.NextFree();
      if (!next) break;
      base::StatusOr<KinetoJsonScanner::Item> item = (*scanner)->Next();
      if (item.ok()) {
        next->Fill(*item, scanner->get());
        scanned = item->kind == KinetoJsonScanner::ItemKind::kEnd;
        ReportProgress(item->offset);
      } else {
        next->Fill(item.status());
        scanned = true;
      }
      parts.Push();
    }
    const KinetoPart& part = *parts.Front();
    if (!part.error.ok()) return part.error;
    switch (part.kind) {
      case KinetoJsonScanner::ItemKind::kEnd:
        return base::OkStatus();
      case KinetoJsonScanner::ItemKind::kTopLevelValue:
        HandleTopLevel(part.key, part.view(), part.offset);
        break;
      case KinetoJsonScanner::ItemKind::kEvent:
        if (part.mismatched_brackets) Count(model::stat::kKinetoEventBracketsMismatched);
        HandleEvent(part.view());
        break;
      case KinetoJsonScanner::ItemKind::kEventBatch: {
        const char* stop = HandleParsedBatch(part);
        if (!stop) break;
        // What the one-thread scan does from here depends on bytes past the batch,
        // which the scanner read as further elements: drop the parts read ahead and
        // scan again from the byte before stop, as after Resume, with the bytes the
        // parts and the scanner hold.
        const uint64_t at = part.offset + (stop - part.view().data());
        const uint64_t exact_until = part.offset + part.size - 1;
        const bool bare_array = (*scanner)->bare_array();
        std::string bytes;
        uint64_t from = at - 1;
        parts.Clear([&](const KinetoPart& held) { held.AppendInput(&from, &bytes); });
        bytes += (*scanner)->BytesFrom(from);
        input->GiveBack(std::move(bytes));
        auto again = std::make_unique<KinetoJsonScanner>(input, source_, config.chunk_bytes);
        TELLER_RETURN_IF_ERROR(again->StartInEvents(at - 1, at, exact_until, bare_array));
        *scanner = std::move(again);
        scanned = false;
        if (config.rewinds) ++*config.rewinds;
        continue;
      }
    }
    parts.Pop();
  }
}

base::Status KinetoImporter::Run(base::ChunkReader* reader, const KinetoReadConfig& config) {
  InternKeys();
  first_event_ = trace_->events.size();
  first_process_ = trace_->processes.size();
  first_thread_ = trace_->threads.size();
  first_collective_ = trace_->collectives.size();
  // About 250 bytes of JSON per event; gzip traces inflate about 15x.
  uint64_t size = reader->file_size();
  size_t expected = static_cast<size_t>(size / 250);
  trace_->events.Reserve(trace_->events.size() + expected);

  reader_ = reader;
  base::ReportProgress(options_.progress, "kineto", 0, size);  // the stage starts now
  // The dispatch on this thread is about a quarter of the work, so more than a few
  // parsing threads wait on it; each holds two parts in memory.
  constexpr int kMaxThreads = 8;
  const int threads = std::min(base::ThreadCount(options_.threads), kMaxThreads);
  ReplayReader input(reader);
  auto scanner = std::make_unique<KinetoJsonScanner>(threads > 1 ? &input : reader, source_,
                                                     config.chunk_bytes);
  if (threads > 1) {
    TELLER_RETURN_IF_ERROR(ScanInParts(config, threads, &input, &scanner));
  } else {
    TELLER_RETURN_IF_ERROR(ScanInOrder(scanner.get()));
  }
  TELLER_RETURN_IF_ERROR(CheckAndFinish(*scanner));
  if (options_.progress) options_.progress->Finish("kineto");
  return base::OkStatus();
}

base::Status KinetoImporter::CheckAndFinish(const KinetoJsonScanner& scanner) {
  if (!scanner.saw_trace_events() && !scanner.truncated()) {
    return base::InvalidArgument("{}: byte {}: the JSON object has no traceEvents array", source_,
                                 scanner.bytes_consumed());
  }
  if (!scanner.saw_trace_events() && events_read_ == 0) {
    return base::DataLoss("{}: truncated at byte {} before traceEvents ({} expected)", source_,
                          scanner.truncated_offset(), scanner.truncation_reason());
  }
  Finish(scanner);
  return base::OkStatus();
}

}  // namespace

base::Status ImportKinetoFromReader(base::ChunkReader* reader, const std::string& source_name,
                                    const ImportOptions& options, const KinetoReadConfig& config,
                                    model::Trace* trace) {
  KinetoImporter importer(source_name, options, trace);
  return importer.Run(reader, config);
}

base::Status ImportKineto(const std::string& path, const ImportOptions& options,
                          model::Trace* trace) {
  TELLER_ASSIGN_OR_RETURN(std::unique_ptr<base::ChunkReader> reader,
                          base::ChunkReader::Open(path, /*read_ahead=*/true));
  return ImportKinetoFromReader(reader.get(), path, options, KinetoReadConfig(), trace);
}

}  // namespace teller::import
