// The records of a bundle's event files, as the writer takes them and the reader
// yields them. String fields are views: the writer interns them, the reader's views
// stay valid until it finishes the file. Ids 0 mean "none" (correlation, range id,
// graph id); -1 means unknown for ranks, devices, tids and streams.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "wire/wire_format.h"

namespace teller::wire {

struct ProcessInfoRecord {
  int64_t pid = 0;
  int32_t rank = -1;  // global rank
  int32_t local_rank = -1;
  int32_t world_size = -1;
  int32_t device = -1;  // main CUDA device of the process
  std::string_view host;
  std::string_view name;     // process name (comm)
  std::string_view command;  // command line, space separated
  // Since 1.2, appended: what said the rank ("RANK", "OMPI_COMM_WORLD_RANK", ...,
  // "torch.distributed"); empty: unknown, and then not written (a 1.0 record).
  std::string_view rank_source = {};
};

struct ThreadInfoRecord {
  int64_t tid = 0;
  std::string_view name;
};

// NVTX-style push/pop range on one thread.
struct RangePushRecord {
  ClockDomain clock = ClockDomain::kMonotonic;
  int64_t tid = 0;
  int64_t ts_ns = 0;
  RangeLayer layer = RangeLayer::kUnspecified;
  std::string_view domain;
  std::string_view name;
};

struct RangePopRecord {
  ClockDomain clock = ClockDomain::kMonotonic;
  int64_t tid = 0;
  int64_t ts_ns = 0;
  std::string_view domain;
};

// NVTX-style start/end range matched by id, may cross threads.
struct RangeStartRecord {
  ClockDomain clock = ClockDomain::kMonotonic;
  uint64_t range_id = 0;
  int64_t tid = 0;
  int64_t ts_ns = 0;
  RangeLayer layer = RangeLayer::kUnspecified;
  std::string_view domain;
  std::string_view name;
};

struct RangeEndRecord {
  ClockDomain clock = ClockDomain::kMonotonic;
  uint64_t range_id = 0;
  int64_t tid = 0;
  int64_t ts_ns = 0;
  std::string_view domain;
};

// The mark the Python hooks leave when an exception nobody caught ends a thread or the
// process ("teller: uncaught exception: RuntimeError: ..."); the importer makes it a
// log line of its process, so a launcher's shared stderr does not hide who raised it.
inline constexpr std::string_view kUncaughtExceptionMark = "teller: uncaught exception: ";

struct MarkRecord {
  ClockDomain clock = ClockDomain::kMonotonic;
  int64_t tid = 0;
  int64_t ts_ns = 0;
  std::string_view domain;
  std::string_view name;
};

// A key/value field of a host range.
struct Arg {
  std::string_view key;
  ArgType type = ArgType::kInt;
  int64_t int_value = 0;
  double double_value = 0;
  std::string_view string_value;
  std::span<const std::string_view> list_value;  // kStringList

  static Arg Int(std::string_view k, int64_t v) { return {k, ArgType::kInt, v, 0, {}, {}}; }
  static Arg Double(std::string_view k, double v) { return {k, ArgType::kDouble, 0, v, {}, {}}; }
  static Arg String(std::string_view k, std::string_view v) {
    return {k, ArgType::kString, 0, 0, v, {}};
  }
  static Arg StringList(std::string_view k, std::span<const std::string_view> v) {
    return {k, ArgType::kStringList, 0, 0, {}, v};
  }
};

// Keys of a STEP range's args: "step" (int), "phase" (prefill|decode|mixed),
// "requests" (string list of the batch's request ids), "tokens" (int, optional:
// tokens scheduled in the batch, prefill and decode together).
inline constexpr std::string_view kStepArgStep = "step";
inline constexpr std::string_view kStepArgPhase = "phase";
inline constexpr std::string_view kStepArgRequests = "requests";
inline constexpr std::string_view kStepArgTokens = "tokens";

// A complete host range (Python hook, simulator): STEP, FE, BE, ...
struct HostRangeRecord {
  ClockDomain clock = ClockDomain::kMonotonic;
  int64_t tid = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint64_t range_id = 0;  // 0 none; collectives may link to it
  RangeLayer layer = RangeLayer::kUnspecified;
  std::string_view name;
  std::span<const Arg> args;
};

// CUDA runtime or driver API call.
struct ApiCallRecord {
  ClockDomain clock = ClockDomain::kGpu;
  int64_t tid = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint64_t correlation = 0;
  ApiKind api = ApiKind::kRuntime;
  uint32_t cbid = 0;   // CUPTI callback id, 0 unknown
  int32_t result = 0;  // cudaError_t / CUresult, 0 success
  std::string_view name;
};

struct Dim3 {
  int32_t x = 0, y = 0, z = 0;
  bool operator==(const Dim3&) const = default;
};

struct KernelRecord {
  ClockDomain clock = ClockDomain::kGpu;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int32_t device = -1;
  uint32_t context = 0;
  int64_t stream = -1;
  uint64_t correlation = 0;
  Dim3 grid;
  Dim3 block;
  uint32_t static_smem_bytes = 0;
  uint32_t dynamic_smem_bytes = 0;
  uint16_t registers_per_thread = 0;
  uint32_t graph_id = 0;  // 0: not launched from a CUDA graph
  uint64_t graph_node_id = 0;
  std::string_view name;
};

struct MemcpyRecord {
  ClockDomain clock = ClockDomain::kGpu;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int32_t device = -1;
  uint32_t context = 0;
  int64_t stream = -1;
  uint64_t correlation = 0;
  uint64_t size_bytes = 0;
  CopyKind copy_kind = CopyKind::kUnknown;
  uint8_t src_kind = 0;  // CUpti_ActivityMemoryKind
  uint8_t dst_kind = 0;
  uint32_t graph_id = 0;
  uint64_t graph_node_id = 0;
};

struct MemsetRecord {
  ClockDomain clock = ClockDomain::kGpu;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int32_t device = -1;
  uint32_t context = 0;
  int64_t stream = -1;
  uint64_t correlation = 0;
  uint64_t size_bytes = 0;
  uint32_t value = 0;
  uint32_t graph_id = 0;
  uint64_t graph_node_id = 0;
};

struct SyncRecord {
  ClockDomain clock = ClockDomain::kGpu;
  int64_t tid = -1;  // host thread that waited, -1 unknown
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  SyncType type = SyncType::kUnknown;
  int32_t device = -1;
  uint32_t context = 0;
  int64_t stream = -1;
  uint32_t event = 0;  // CUDA event id, 0 none
  uint64_t correlation = 0;
};

// Links a CUPTI correlation id to an id of an outer layer (PyTorch op, ...).
struct ExternalCorrelationRecord {
  ExternalKind external_kind = ExternalKind::kCustom0;
  uint64_t external_id = 0;
  uint64_t correlation = 0;
};

// A collective: linked to its kernel by correlation, or to a host range by range_id,
// or standing alone with its own start/end on thread tid (or on a device stream).
struct CollectiveRecord {
  ClockDomain clock = ClockDomain::kGpu;
  int64_t tid = -1;
  int64_t start_ns = 0;  // start == end == 0: no own times
  int64_t end_ns = 0;
  std::string_view communicator;  // NCCL comm hash or process-group name
  int64_t sequence = -1;          // per-communicator sequence number
  std::string_view op;            // all_reduce, all_gather, ...
  int64_t size_bytes = -1;
  std::string_view dtype;
  int32_t group_size = -1;
  int32_t group_rank = -1;
  uint64_t correlation = 0;  // kernel link, 0 none
  uint64_t range_id = 0;     // host range link, 0 none
  int32_t device = -1;
  int64_t stream = -1;
};

// One captured log line of logs/*.jsonl (JSON, not a binary record). ts_ns is on
// the realtime clock unless clock says monotonic.
struct LogLineRecord {
  int64_t ts_ns = 0;
  ClockDomain clock = ClockDomain::kRealtime;
  int64_t pid = -1;
  std::string_view stream;  // "stdout", "stderr" or "file"
  std::string_view text;
  int32_t rank = -1;
  std::string_view host;    // optional
  std::string_view source;  // optional: original file the line came from
  int64_t line = 0;         // optional: 1-based line in source, 0 none
};

}  // namespace teller::wire
