// Nsight Systems SQLite export -> trace model. Entry point: ImportNsys() in
// importer.h; this class holds the per-file state (string, thread and track maps).
// Columns are found by name, so exports of different nsys versions import alike;
// a missing table or column is a named counter, never a failed import.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "import/importer.h"
#include "import/nsys_database.h"
#include "model/trace.h"

namespace teller::import {

// globalTid / globalPid of nsys: (hardware/VM id << 48) | (pid << 24) | tid.
inline int64_t NsysPidOf(int64_t global_id) { return (global_id >> 24) & 0xFFFFFF; }
inline int64_t NsysTidOf(int64_t global_id) { return global_id & 0xFFFFFF; }

// nsys appends the CUDA version that introduced a runtime call ("cudaLaunchKernel_v7000");
// Kineto and CUPTI name it without. Strips a trailing "_v" + 4 or more digits only, so
// real names such as "cuGetProcAddress_v2" stay.
std::string_view StripNsysApiVersion(std::string_view name);

class NsysImporter {
 public:
  NsysImporter(NsysDatabase* db, const ImportOptions& options, model::Trace* trace);
  base::Status Run();

  struct ColumnSpec {
    const char* name;
    bool required;
    // Read only when the table lacks this column (an older or newer spelling).
    const char* unless = nullptr;
  };

 private:
  // A SELECT over the columns of one table that this export has; index[i] is the
  // result column of spec i, or -1 when the export lacks it.
  struct TableQuery {
    NsysStatement statement;
    std::vector<int> index;
    bool Has(int column) const { return index[column] >= 0; }
    bool Null(int column) const { return index[column] < 0 || statement.IsNull(index[column]); }
    int64_t Int(int column) const { return statement.Int(index[column]); }
    // Reads a nullable column; false (value untouched) when absent or NULL.
    bool Get(int column, int64_t* value) const {
      return index[column] >= 0 && statement.IntIfPresent(index[column], value);
    }
    // 0 when absent or NULL: one SQLite call.
    int64_t IntOrZero(int column) const {
      return index[column] < 0 ? 0 : statement.Int(index[column]);
    }
    int64_t IntOr(int column, int64_t fallback) const {
      Get(column, &fallback);
      return fallback;
    }
    model::CorrelationId Correlation(int column) const {
      int64_t value;
      return Get(column, &value) ? model::CorrelationId(value) : model::CorrelationId::Invalid();
    }
  };
  struct ApiName {
    model::StringId name;
    model::Layer layer = model::Layer::kRt;
    bool graph_launch = false;
    bool known = false;
  };
  struct TrackKey {
    uint32_t process;
    int32_t device;
    int64_t stream;
    bool operator==(const TrackKey&) const = default;
  };
  struct TrackKeyHash {
    size_t operator()(const TrackKey& key) const {
      return std::hash<int64_t>()(key.stream * 1000003 + key.device * 131 + key.process);
    }
  };

  // Returns nullopt (and counts why) when the table or one of its required columns
  // is missing.
  base::StatusOr<std::optional<TableQuery>> OpenTable(std::string_view table,
                                                      std::span<const ColumnSpec> columns,
                                                      std::string_view where = {});
  // Counts a table skipped for lacking every one of several alternative columns.
  void CountMissingColumn(std::string_view table, std::string_view column);

  base::Status ReadSessionStart();
  base::Status ReadHost();
  base::Status ReadProcessNames();
  base::Status ReadThreadNames();
  base::Status ReadGpus();
  base::Status ReadStrings();
  base::Status ImportApiCalls(std::string_view table, bool driver_table);
  base::Status ImportKernels();
  base::Status ImportMemcpys();
  base::Status ImportMemsets();
  base::Status ImportSyncs();
  base::Status ImportNvtx();

  model::StringId NsysString(int64_t id);
  const ApiName& ApiNameFor(int64_t name_id, bool driver);
  model::ProcessIndex ProcessFor(int64_t pid) {
    if (pid == last_pid_) return last_process_;
    return NewProcessFor(pid);
  }
  model::ProcessIndex NewProcessFor(int64_t pid);
  model::ThreadIndex ThreadFor(int64_t global_tid);
  // "x,y,z" of a grid or block, interned once per distinct shape.
  model::StringId Dim3(int64_t x, int64_t y, int64_t z);
  model::ThreadIndex DeviceTrackFor(model::ProcessIndex process, int64_t device, int64_t stream);
  // Process of device work: its globalPid/globalTid column, else the process of the
  // host call with its correlation id, else the only process; invalid when none.
  model::ProcessIndex DeviceWorkProcess(const TableQuery& query, int pid_column,
                                        int correlation_column);
  model::TimeNs TraceTime(int64_t nsys_ns) const { return nsys_ns + clock_offset_ns_; }
  model::DurationNs Duration(int64_t start, int64_t end);
  void CountRow();

  NsysDatabase* db_;
  ImportOptions options_;
  model::Trace* trace_;
  size_t first_event_ = 0;
  size_t host_events_end_ = 0;
  int64_t clock_offset_ns_ = 0;
  model::StringId host_;
  model::StringId source_;
  uint64_t rows_done_ = 0;
  uint64_t rows_total_ = 0;

  // StringIds, read once into one arena; interned into the trace on first use.
  std::string string_arena_;
  std::vector<uint32_t> string_offset_;
  std::vector<uint32_t> string_size_;  // kNoString when the id is absent
  std::vector<model::StringId> interned_;
  std::vector<ApiName> api_names_[2];  // [from_driver_domain] by nsys string id
  std::vector<int8_t> kernel_layer_;   // by nsys string id, -1 unknown

  std::unordered_map<int64_t, std::string> process_names_;  // pid -> PROCESSES.name
  std::unordered_map<int64_t, int64_t> thread_name_ids_;    // globalTid -> nameId
  std::unordered_map<int64_t, std::string> gpu_names_;      // TARGET_INFO_GPU.id -> name
  std::unordered_map<int64_t, int64_t> cuda_device_gpu_;    // (pid << 16 | cudaId) -> gpuId
  std::unordered_map<int64_t, model::ProcessIndex> processes_;
  std::unordered_map<int64_t, model::ThreadIndex> threads_;
  std::unordered_map<TrackKey, model::ThreadIndex, TrackKeyHash> tracks_;
  std::vector<std::pair<TrackKey, model::ThreadIndex>> track_list_;  // the first few
  int64_t last_pid_ = -1;
  model::ProcessIndex last_process_;
  int64_t last_global_tid_ = -1;
  model::ThreadIndex last_thread_;
  TrackKey last_track_key_{UINT32_MAX, -1, -1};
  model::ThreadIndex last_track_;
  // correlation id -> process of the host call, built on first need; invalid = ambiguous.
  std::unordered_map<int64_t, model::ProcessIndex> correlation_process_;
  bool correlation_process_built_ = false;
  std::unordered_map<uint64_t, model::StringId> dim3_;
  // (pid << 32 | domainId) -> NVTX domain name.
  std::unordered_map<int64_t, model::StringId> nvtx_domains_;

  struct ArgKeys {
    model::StringId result, grid, block, graph_id, graph_node_id, static_shared_memory_bytes,
        dynamic_shared_memory_bytes, short_name, bytes, kind, value, event, domain, category;
  } keys_;
};

}  // namespace teller::import
