// Out of memory: the CUDA caching allocator's message (PyTorch's OutOfMemoryError) read
// from the logs: the allocation that failed, the GPU's capacity and free memory, what
// the process and PyTorch held, and what was reserved but unallocated. Its figures
// tell three cases apart, each with its own fix: a full GPU (lower the engine's
// memory demand), a fragmented cache (its unallocated reserve would hold the request),
// and memory held outside the process's PyTorch (another process, NCCL buffers).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/tuning.h"
#include "model/trace.h"

namespace teller::cause {

enum class OomKind : uint8_t {
  kFull,           // PyTorch holds the GPU: weights, KV cache, activations
  kFragmented,     // reserved but unallocated >= the request: no block fits
  kOutsidePyTorch  // another process or non-PyTorch memory holds a large share
};
std::string_view OomKindName(OomKind kind);  // "full", "fragmented", "outside_pytorch"

// PyTorch's allocator counters on one GPU before an out-of-memory error: the profiler's
// "[memory]" events ("Total Allocated", "Total Reserved", "Device Id") over the last
// minute of samples. Byte figures are -1 when no sample gives them.
struct MemoryTrend {
  bool found = false;
  int32_t device = -1;
  uint32_t samples = 0;
  model::TimeNs first_ns = 0;
  model::TimeNs last_ns = 0;
  double first_allocated = -1;
  double last_allocated = -1;
  double peak_allocated = -1;
  double last_reserved = -1;
  double peak_reserved = -1;
};

// The trend on `device` (-1: the GPU with the most samples) from samples at or before
// before_ns, over the minute before the last of them.
MemoryTrend FindMemoryTrend(const model::Trace& trace, int32_t device, model::TimeNs before_ns);

// The trend in parts (docs/fleet.md, "Analysis in parts"): where the first out-of-memory
// message points it (its GPU, and its time on the joined trace; INT64_MAX without one).
struct OomSite {
  bool found = false;
  int32_t device = -1;
  model::TimeNs before_ns = 0;
};
// The site of the first out-of-memory message of `logs` (their text in `strings`).
OomSite FindOomSite(const model::LogTable& logs, const base::StringPool& strings);

struct MemorySample {
  model::TimeNs ts = 0;
  int64_t allocated = 0;
  int64_t reserved = -1;  // -1: not given
};
// One part's samples of one GPU at or before the site's time: how many, and those of the
// minute before its last one (the run's window lies inside), by time then event order.
struct DeviceSamples {
  int32_t device = -1;
  uint64_t count = 0;
  std::vector<MemorySample> recent;
};
using MemoryTrendPart = std::vector<DeviceSamples>;  // by device ascending

MemoryTrendPart SummarizeMemoryTrend(const model::Trace& part, model::TimeNs before_ns);
// The trend of the parts' joined trace on `device`, from their summaries in plan order.
MemoryTrend MergeMemoryTrends(const std::vector<MemoryTrendPart>& parts, int32_t device);
// "" when equal, else the first field that differs with both values.
std::string MemoryTrendDifference(const MemoryTrend& a, const MemoryTrend& b);

// Byte figures are -1 when the message does not give them (the older format names
// fewer; a raw cudaMalloc failure none).
// Which case an out-of-memory message is (base/tuning_list.h, docs/tuning.md).
struct OomOptions {
  TELLER_TUNED_OOM(TELLER_TUNED_FIELD)
};

struct OomReport {
  bool found = false;
  int32_t rank = -1;
  int32_t device = -1;  // the GPU index the message names
  model::TimeNs at_ns = 0;
  std::string source;  // file:line of the log line
  double requested_bytes = -1;
  double capacity_bytes = -1;
  double free_bytes = -1;
  double process_bytes = -1;    // in use by this process, non-PyTorch memory included
  double allocated_bytes = -1;  // allocated by PyTorch
  double reserved_unallocated_bytes = -1;
  double other_processes_bytes = -1;  // listed other processes, or capacity - free - process
  int32_t other_processes = 0;        // how many the message lists
  OomKind kind = OomKind::kFull;
  int64_t step = -1;                  // the step on that rank at the message, -1 none
  std::vector<std::string> requests;  // in flight in that step
  MemoryTrend trend;                  // before the message, when the trace has counters
};

// The first out-of-memory message in the trace's logs; found = false without one. `trend`:
// its memory trend found elsewhere (a distributed run merges every unit's summary), else
// FindMemoryTrend here.
OomReport FindOom(const model::Trace& trace, const OomOptions& options = {},
                  const MemoryTrend* trend = nullptr);

// The step a log line aligns on, by its index, when the steps are not the lines' trace's
// own: its number and the ids of the requests it serves.
struct StepOfLine {
  int64_t number = -1;
  std::vector<std::string> requests;
};
using StepsOfLines = std::function<StepOfLine(model::StepIndex)>;

// FindOom of log lines aligned on steps held elsewhere (a distributed run: the first
// process's lines aligned on the rows merged from every part, fleet/analysis_parts.h): the
// first message of `logs` (their text in `strings`), its step's number and requests from
// `step_of` when its line aligns on a step, and the trend given.
OomReport FindOom(const model::LogTable& logs, const base::StringPool& strings,
                  const StepsOfLines& step_of, const MemoryTrend& trend,
                  const OomOptions& options = {});

// "" when the reports are equal, else the first field that differs with both values.
std::string OomDifference(const OomReport& a, const OomReport& b);

// Parses one message (either PyTorch format); found = false when it is not one.
OomReport ParseOomMessage(std::string_view text, const OomOptions& options = {});

}  // namespace teller::cause
