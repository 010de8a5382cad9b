// EngineProfile: everything the simulator knows about one engine, behind one interface:
// its defaults, batching policy and parallel layout, request ids, launch command, the
// host ranges its Python code opens, the engine-specific parts of a stage's op list, and
// its service log format. One profile per EngineKind (vLLM v0, v1 offline and online in
// profile_vllm.cc, SGLang in profile_sglang.cc, Torch FSDP in profile_torch_fsdp.cc);
// ProfileFor picks it. The rest of src/sim/ asks the profile instead of switching on
// the engine.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "sim/scheduler.h"
#include "sim/sim_config.h"

namespace teller::sim {

class LogEmitter;
class OpListBuilder;

// How the scheduler forms a step's batch.
enum class BatchingPolicy : uint8_t {
  kChunkedPrefill,  // vLLM v1: one token budget shared by decodes and prefill chunks
  kPrefillFirst,    // vLLM v0, SGLang: a prefill batch when prompts fit, else a decode batch
  kStaticPerRank,   // Torch FSDP: each data-parallel rank runs a static batch to completion
};

// Host ranges the engine's Python code opens in every step.
struct EngineRangeNames {
  std::string_view schedule;        // driver, before the forward
  std::string_view step;            // the STEP range of every rank
  std::string_view process_output;  // driver, after the forward
  std::string_view model_runner;    // around one stage's forward
  std::string_view prepare_inputs;  // around the host-to-device input copies
  std::string_view graph_replay;    // around a full CUDA-graph replay
};

class EngineProfile {
 public:
  virtual ~EngineProfile() = default;

  EngineKind kind() const { return kind_; }
  BatchingPolicy batching() const { return batching_; }
  const EngineRangeNames& ranges() const { return ranges_; }
  // Host-to-device copies of the step's inputs (token ids, positions, block tables, ...).
  int32_t input_copies() const { return input_copies_; }
  // Torch FSDP: every rank is a data-parallel replica of the whole model (one stage, one
  // communicator over all ranks); the serving engines split the model by tp x pp.
  bool data_parallel() const { return data_parallel_; }

  // Layout on a cluster.
  int32_t DataParallelSize(const ClusterSpec& cluster) const;
  int32_t PipelineStages(const ClusterSpec& cluster) const;
  int32_t CollectiveGroupSize(const ClusterSpec& cluster) const;  // ranks of a layer's NCCL group
  int32_t CommunicatorCount(const ClusterSpec& cluster) const;

  // Configuration, ids, command line.
  virtual void ApplyDefaults(SimConfig* config) const = 0;
  // a and b are two random words drawn for every request, whether the format uses them or not.
  virtual std::string RequestId(const std::string& run_id, int32_t index, uint64_t a,
                                uint64_t b) const = 0;
  virtual std::string LaunchCommand(const SimConfig& config) const = 0;

  // The engine's parts of a decoder layer's op list (op_list.cc builds the rest).
  virtual void AddNorm(OpListBuilder& b, bool fused, int64_t width, int16_t layer) const = 0;
  virtual void AddLayerWrapperOpen(OpListBuilder& b, int16_t layer) const;
  virtual void AddLayerWrapperClose(OpListBuilder& b) const;
  virtual void AddEmbeddingReduce(OpListBuilder& b) const = 0;
  virtual void AddQkvProjection(OpListBuilder& b, int16_t layer) const = 0;
  virtual void AddQkNorms(OpListBuilder& b, int16_t layer) const = 0;
  virtual void AddRotary(OpListBuilder& b, int16_t layer) const = 0;
  virtual void AddAttention(OpListBuilder& b, int16_t layer) const = 0;
  virtual void AddOutputProjection(OpListBuilder& b, int16_t layer) const = 0;
  virtual void AddMlp(OpListBuilder& b, int16_t layer) const = 0;

  // Service log lines (log_emitter.cc writes the NCCL lines every engine shares).
  virtual void LogBanner(LogEmitter& log, int64_t t) const = 0;
  virtual void LogRankStartup(LogEmitter& log, int32_t rank, int64_t t) const;
  virtual void LogEngineReady(LogEmitter& log, int64_t t) const;
  virtual void LogRequestArrived(LogEmitter& log, const Request& r, int64_t t) const;
  virtual void LogRequestFinished(LogEmitter& log, const Request& r, int64_t t) const = 0;
  virtual void LogRequestAborted(LogEmitter& log, const Request& r, int64_t t) const;
  virtual void LogPreempted(LogEmitter& log, const Request& r, int64_t t, int64_t total) const;
  // Default: a metrics line (LogMetrics) every metrics interval.
  virtual void LogStepDone(LogEmitter& log, const StepPlan& plan, double kv_usage,
                           int64_t end) const;
  virtual void LogMetrics(LogEmitter& log, const StepPlan& plan, double kv_usage, double secs,
                          int64_t end) const;
  // A fatal CUDA error (illegal access, out of memory): the engine's first error line
  // (empty: none; `error` is the exception's repr, which vLLM v0 logs), the model runner
  // file of the traceback, and what the front end prints when a worker died.
  virtual std::string FatalErrorHeader(const LogEmitter& log, int64_t t,
                                       std::string_view error) const = 0;
  virtual std::string_view traceback_runner() const = 0;
  virtual void LogWorkerDied(LogEmitter& log, int32_t rank, int64_t t) const;
  virtual void LogShutdown(LogEmitter& log, int64_t t) const;

 protected:
  EngineProfile(EngineKind kind, BatchingPolicy batching, EngineRangeNames ranges,
                int32_t input_copies, bool data_parallel)
      : kind_(kind),
        batching_(batching),
        ranges_(ranges),
        input_copies_(input_copies),
        data_parallel_(data_parallel) {}

 private:
  EngineKind kind_;
  BatchingPolicy batching_;
  EngineRangeNames ranges_;
  int32_t input_copies_;
  bool data_parallel_;
};

const EngineProfile& ProfileFor(EngineKind engine);

}  // namespace teller::sim
