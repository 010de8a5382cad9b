// LogEmitter: service log lines in each engine's real format (vLLM v0 and v1,
// SGLang, a Torch FSDP server's Python logging, NCCL INFO/WARN, ProcessGroupNCCL
// watchdog, Python tracebacks), with request ids where those engines print them.
// The engine's own lines come from its EngineProfile; the NCCL lines and the traceback
// body every engine shares are written here. Lines are collected per rank with their
// true time; the simulator writes them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/rng.h"
#include "sim/scheduler.h"
#include "sim/sim_config.h"
#include "sim/step_emitter.h"

namespace teller::sim {

struct SimLogLine {
  int64_t true_ns = 0;
  int32_t rank = 0;
  bool stderr_stream = false;
  std::string text;
};

// Calendar text of a UTC epoch time: "%m-%d %H:%M:%S" and friends.
struct CivilTime {
  int year, month, day, hour, minute, second;
  int64_t nanos;
};
CivilTime ToCivil(int64_t epoch_ns);

class EngineProfile;

// What the periodic metrics lines count.
struct LogWindow {
  int64_t last_metrics_ns = 0;
  int64_t prompt_tokens = 0;
  int64_t gen_tokens = 0;
  int64_t decode_batches = 0;
  int64_t finished = 0;  // requests finished so far
};

class LogEmitter {
 public:
  LogEmitter(const SimConfig& config, Rng* rng, std::vector<int64_t> pids,
             std::vector<int64_t> realtime_offset_ns);

  void Startup(int64_t t_ns);
  void RequestArrived(const Request& r, int64_t t_ns);
  void RequestFinished(const Request& r, int64_t t_ns);
  void RequestAborted(const Request& r, int64_t t_ns);
  void Preempted(const Request& r, int64_t t_ns, int64_t total_preemptions);
  // Per step: SGLang batch lines, periodic metrics lines.
  void StepDone(const StepPlan& plan, const EngineScheduler& scheduler, int64_t end_ns);
  void LinkRetry(int32_t rank, int64_t t_ns);
  // CUDA's illegal-address error as the engine prints it where it came back (`call`): a
  // Python traceback from the worker's call (a launch in the forward pass, or the copy and
  // synchronization that fetch the sampled tokens), or, when only ProcessGroupNCCL's
  // watchdog thread saw it (cudaEventQuery), the watchdog's line and the abort.
  // group_rank: the rank in its NCCL group. Returns the lines written.
  int IllegalAccess(int32_t rank, int64_t t_ns, std::string_view call, int32_t group_rank);
  // PyTorch's OutOfMemoryError as the engine prints it (a full card: the request is
  // larger than the cache's unallocated reserve), from the call that allocated at site;
  // returns the lines written.
  int OutOfMemory(int32_t rank, int64_t t_ns, double requested_gib, int32_t device,
                  AllocationSite site);
  void NcclTimeout(int32_t hung_rank, int64_t t_ns, const std::string& op, int64_t sequence,
                   int64_t numel, int32_t group_size, int32_t group_first_rank);
  void Finish(int64_t t_ns);

  // Moves out the lines collected so far (sorted by time).
  std::vector<SimLogLine> Drain();

  // For the engine profiles, which write the engine's own lines.
  void Add(int32_t rank, int64_t t_ns, bool err, std::string text);
  int64_t Realtime(int32_t rank, int64_t t_ns) const;
  int64_t pid(int32_t rank) const { return pids_[static_cast<size_t>(rank)]; }
  const SimConfig& config() const { return config_; }
  Rng* rng() const { return rng_; }
  LogWindow& window() { return window_; }
  const LogWindow& window() const { return window_; }
  // The API server's access line of a finished request: `INFO:     10.0.3.x:port - "POST
  // route HTTP/1.1" 200 OK`.
  static std::string AccessLine(const Request& r, std::string_view route);

 private:
  std::string NcclPrefix(int32_t rank) const;

  SimConfig config_;
  const EngineProfile& profile_;
  Rng* rng_;
  std::vector<int64_t> pids_;
  std::vector<int64_t> realtime_offset_ns_;  // per rank: start + node skew
  std::vector<SimLogLine> lines_;
  LogWindow window_;
};

}  // namespace teller::sim
