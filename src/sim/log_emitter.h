// LogEmitter: service log lines in each engine's real format (vLLM v0 and v1,
// SGLang, a Torch FSDP server's Python logging, NCCL INFO/WARN, ProcessGroupNCCL
// watchdog, Python tracebacks), with request ids where those engines print them.
// Lines are collected per rank with their true time; the simulator writes them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/rng.h"
#include "sim/scheduler.h"
#include "sim/sim_config.h"

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
  void IllegalAccess(int32_t rank, int64_t t_ns, const std::string& kernel);
  void NcclTimeout(int32_t hung_rank, int64_t t_ns, const std::string& op, int64_t sequence,
                   int64_t numel, int32_t group_size, int32_t group_first_rank);
  void Finish(int64_t t_ns);

  // Moves out the lines collected so far (sorted by time).
  std::vector<SimLogLine> Drain();

 private:
  void Add(int32_t rank, int64_t t_ns, bool err, std::string text);
  std::string VllmPrefix(const char* level, int32_t rank, int64_t t_ns, const char* file,
                         int line) const;
  std::string SglangPrefix(int64_t t_ns, bool tp) const;
  std::string PyLogPrefix(const char* level, int64_t t_ns, const char* file, int line) const;
  std::string NcclPrefix(int32_t rank) const;
  int64_t Realtime(int32_t rank, int64_t t_ns) const;
  bool v1() const;

  SimConfig config_;
  Rng* rng_;
  std::vector<int64_t> pids_;
  std::vector<int64_t> realtime_offset_ns_;  // per rank: start + node skew
  std::vector<SimLogLine> lines_;
  int64_t last_metrics_ns_ = 0;
  int64_t prompt_tokens_window_ = 0;
  int64_t gen_tokens_window_ = 0;
  int64_t decode_batches_ = 0;
  int64_t finished_ = 0;
};

}  // namespace teller::sim
