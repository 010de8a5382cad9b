// vLLM v0, vLLM v1 offline (LLM.generate) and vLLM v1 online (vllm serve), and the op-list
// parts every engine built on vLLM's custom ops shares (VllmStyleProfile, also SGLang's).
#include <fmt/format.h>

#include <algorithm>

#include "sim/kernel_names.h"
#include "sim/log_emitter.h"
#include "sim/op_list.h"
#include "sim/profiles.h"

namespace teller::sim {

void VllmStyleProfile::AddNorm(OpListBuilder& b, bool fused, int64_t width, int16_t layer) const {
  b.Fe("RMSNorm");
  b.BeKernel(fused ? "_C::fused_add_rms_norm" : "_C::rms_norm",
             fused ? kernels::kFusedAddRmsNorm : kernels::kRmsNorm, Family::kNorm, Work::kElem,
             Api::kLaunch, width, 0, layer);
  b.Close();
}

void VllmStyleProfile::AddEmbeddingReduce(OpListBuilder& b) const { b.TpAllReduce(-1); }

void VllmStyleProfile::AddQkvProjection(OpListBuilder& b, int16_t layer) const {
  b.Fe("QKVParallelLinear");
  b.Linear(b.q_width() + 2 * b.kv_width(), b.model().hidden, layer);
  b.Close();
  b.Be("aten::split_with_sizes");
  b.Close();
}

void VllmStyleProfile::AddQkNorms(OpListBuilder& b, int16_t layer) const {
  if (!b.model().qk_norm) return;
  AddNorm(b, false, b.q_width(), layer);
  AddNorm(b, false, b.kv_width(), layer);
}

void VllmStyleProfile::AddRotary(OpListBuilder& b, int16_t layer) const {
  b.Fe("RotaryEmbedding");
  b.BeKernel("_C::rotary_embedding", kernels::kRotary, Family::kRotary, Work::kElem, Api::kLaunch,
             b.q_width() + b.kv_width(), 0, layer);
  b.Close();
}

void VllmStyleProfile::AddAttention(OpListBuilder& b, int16_t layer) const {
  b.Fe(attention_module_);  // not called inside compiled pieces
  b.piece_ok = false;
  AddAttentionBackend(b, layer);
  b.piece_ok = true;
  b.Close();
}

void VllmStyleProfile::AddOutputProjection(OpListBuilder& b, int16_t layer) const {
  b.Fe("RowParallelLinear");
  b.Linear(b.model().hidden, b.q_width(), layer);
  b.TpAllReduce(layer);
  b.Close();
}

void VllmStyleProfile::AddMlp(OpListBuilder& b, int16_t layer) const {
  const ModelSpec& m = b.model();
  if (m.experts > 0) {
    b.FusedMoe(silu_op_, silu_kernel_, layer);
    return;
  }
  b.Fe("MergedColumnParallelLinear");
  b.Linear(2 * m.intermediate / b.tp(), m.hidden, layer);
  b.Close();
  b.Fe("SiluAndMul");
  b.BeKernel(silu_op_, silu_kernel_, Family::kActivation, Work::kElem, Api::kLaunch,
             m.intermediate / b.tp(), 0, layer);
  b.Close();
  b.Fe("RowParallelLinear");
  b.Linear(m.hidden, m.intermediate / b.tp(), layer);
  b.TpAllReduce(layer);
  b.Close();
}

namespace {

std::string VllmCommand(const SimConfig& config) {
  return fmt::format("vllm serve {} --tensor-parallel-size {} --pipeline-parallel-size {}",
                     config.model.name, config.cluster.tp, config.cluster.pp);
}

// What vLLM v0 and v1 share: the unified attention op, the log prefix, the PCIe warning.
class VllmProfile : public VllmStyleProfile {
 public:
  void AddAttentionBackend(OpListBuilder& b, int16_t layer) const override {
    b.Be("vllm::unified_attention_with_output");
    b.BeKernel("_C_cache_ops::reshape_and_cache_flash",
               b.cluster().sm >= 100 ? kernels::kReshapeAndCacheFp8 : kernels::kReshapeAndCache,
               Family::kKvCache, Work::kCache, Api::kLaunch, 0, 0, layer);
    AddFlashAttention(b, layer);
    b.Close();
  }

  void LogRankStartup(LogEmitter& log, int32_t r, int64_t tr) const override {
    // PCIe-only GPUs; on an NVSwitch node the custom all-reduce runs.
    if (log.config().cluster.tp <= 2 || log.config().cluster.nvls) return;
    const int64_t ms = 1000000;
    log.Add(r, tr + 45 * ms, false,
            Prefix(log, "WARNING", r, tr + 45 * ms, "custom_all_reduce.py", 137) +
                "Custom allreduce is disabled because it's not supported on more than two "
                "PCIe-only GPUs. To silence this warning, specify disable_custom_all_reduce=True "
                "explicitly.");
  }

 protected:
  VllmProfile(EngineKind kind, BatchingPolicy batching, EngineRangeNames ranges, bool v1)
      : VllmStyleProfile(kind, batching, ranges, 5, "Attention", "_C::silu_and_mul",
                         kernels::kSiluAndMul),
        v1_(v1) {}

  virtual void AddFlashAttention(OpListBuilder& b, int16_t layer) const = 0;

  // "INFO 01-01 00:00:01 file.py:12] " (v1: "[file.py:12] "), after the worker's tag.
  std::string Prefix(const LogEmitter& log, const char* level, int32_t rank, int64_t t_ns,
                     const char* file, int line) const {
    const CivilTime c = ToCivil(log.Realtime(rank, t_ns));
    std::string worker;
    if (rank != 0) {
      worker = v1_ ? fmt::format("(VllmWorker rank={} pid={}) ", rank, log.pid(rank))
                   : fmt::format("(VllmWorkerProcess pid={}) ", log.pid(rank));
    }
    if (v1_) {
      return fmt::format("{}{} {:02d}-{:02d} {:02d}:{:02d}:{:02d} [{}:{}] ", worker, level, c.month,
                         c.day, c.hour, c.minute, c.second, file, line);
    }
    return fmt::format("{}{} {:02d}-{:02d} {:02d}:{:02d}:{:02d} {}:{}] ", worker, level, c.month,
                       c.day, c.hour, c.minute, c.second, file, line);
  }

 private:
  bool v1_;
};

class VllmV0 final : public VllmProfile {
 public:
  VllmV0()
      : VllmProfile(EngineKind::kVllmV0, BatchingPolicy::kPrefillFirst,
                    {.schedule = "Scheduler.schedule",
                     .step = "LLMEngine.step",
                     .process_output = "LLMEngine._process_model_outputs",
                     .model_runner = "ModelRunner.execute_model",
                     .prepare_inputs = "ModelInputForGPUBuilder.build",
                     .graph_replay = "CUDAGraphRunner.forward"},
                    false) {}

  void ApplyDefaults(SimConfig* config) const override {
    EngineSpec& e = config->engine_spec;
    e.max_num_batched_tokens = 8192;
    e.chunked_prefill = false;
    e.prefill_mode = ForwardMode::kEager;
    e.decode_mode = ForwardMode::kFullGraph;
    e.graph_capture_steps = 2;
    e.metrics_interval_s = 0.5;
  }
  std::string RequestId(const std::string&, int32_t, uint64_t a, uint64_t b) const override {
    return fmt::format("cmpl-{:016x}{:016x}", a, b);
  }
  std::string LaunchCommand(const SimConfig& config) const override { return VllmCommand(config); }

  void AddFlashAttention(OpListBuilder& b, int16_t layer) const override {
    if (b.ctx().has_prefill) {
      b.BeKernel("vllm_flash_attn::_flash_attn_varlen_forward", kernels::kFlashFwd,
                 Family::kAttention, Work::kAttention, Api::kLaunchEx, 1, 0, layer);
    }
    if (b.ctx().has_decode) {
      b.BeKernel("_C::paged_attention_v1", kernels::kPagedAttention, Family::kAttention,
                 Work::kAttention, Api::kLaunch, 2, 0, layer)
          .decode_path = true;
    }
  }

  void LogBanner(LogEmitter& log, int64_t t) const override {
    const int64_t ms = 1000000;
    log.Add(0, t, false,
            Prefix(log, "INFO", 0, t, "api_server.py", 712) + "vLLM API server version 0.6.6");
    log.Add(0, t + 3 * ms, false,
            Prefix(log, "WARNING", 0, t + 3 * ms, "config.py", 428) +
                "To see benefits of async output processing, enable CUDA graph. Since, "
                "enforce-eager is enabled, async output processor cannot be used");
  }
  void LogEngineReady(LogEmitter& log, int64_t t) const override {
    const int64_t tk = t + 200 * 1000000;
    log.Add(0, tk, false,
            Prefix(log, "INFO", 0, tk, "model_runner.py", 1505) +
                "Capturing cudagraphs for decoding. This may lead to unexpected "
                "consequences if the model is not static. To run the model in eager mode, "
                "set 'enforce_eager=True' or use '--enforce-eager' in the CLI.");
  }
  void LogRequestArrived(LogEmitter& log, const Request& r, int64_t t) const override {
    log.Add(0, t + 120000, false,
            Prefix(log, "INFO", 0, t + 120000, "async_llm_engine.py", 208) +
                fmt::format("Added request {}.", r.id));
  }
  void LogRequestFinished(LogEmitter& log, const Request& r, int64_t t) const override {
    log.Add(0, t + 100000, false,
            Prefix(log, "INFO", 0, t + 100000, "async_llm_engine.py", 176) +
                fmt::format("Finished request {}.", r.id));
    log.Add(0, t + 300000, false, LogEmitter::AccessLine(r, "/v1/completions"));
  }
  void LogRequestAborted(LogEmitter& log, const Request& r, int64_t t) const override {
    log.Add(0, t, false,
            Prefix(log, "INFO", 0, t, "async_llm_engine.py", 64) +
                fmt::format("Aborted request {}.", r.id));
  }
  void LogPreempted(LogEmitter& log, const Request& r, int64_t t, int64_t total) const override {
    log.Add(0, t, false,
            Prefix(log, "WARNING", 0, t, "scheduler.py", 1560) +
                fmt::format("Sequence group {} is preempted by PreemptionMode.RECOMPUTE mode "
                            "because there is not enough KV cache space. This can affect the "
                            "end-to-end performance. Increase gpu_memory_utilization or "
                            "tensor_parallel_size to provide more KV cache memory. "
                            "total_num_cumulative_preemption={}",
                            r.id, total));
  }
  void LogMetrics(LogEmitter& log, const StepPlan& plan, double usage, double secs,
                  int64_t end) const override {
    const LogWindow& w = log.window();
    log.Add(0, end, false,
            Prefix(log, "INFO", 0, end, "metrics.py", 455) +
                fmt::format("Avg prompt throughput: {:.1f} tokens/s, Avg generation throughput: "
                            "{:.1f} tokens/s, Running: {} reqs, Swapped: 0 reqs, Pending: {} "
                            "reqs, GPU KV cache usage: {:.1f}%, CPU KV cache usage: 0.0%.",
                            w.prompt_tokens / secs, w.gen_tokens / secs, plan.running, plan.waiting,
                            100 * usage));
  }
  std::string FatalErrorHeader(const LogEmitter& log, int64_t t,
                               std::string_view error) const override {
    return Prefix(log, "ERROR", 0, t, "engine.py", 135) + std::string(error);
  }
  std::string_view traceback_runner() const override { return "vllm/worker/model_runner.py"; }
  void LogShutdown(LogEmitter& log, int64_t t) const override {
    log.Add(0, t, false, "INFO:     Shutting down");
  }
};

// vLLM v1: chunked prefill, piecewise CUDA graphs, FlashAttention's split-KV kernel.
class VllmV1 : public VllmProfile {
 public:
  void ApplyDefaults(SimConfig* config) const override {
    EngineSpec& e = config->engine_spec;
    e.chunked_prefill = true;
    e.prefill_mode = ForwardMode::kPiecewise;
    e.decode_mode = ForwardMode::kPiecewise;
    e.graph_capture_steps = 2;
  }

  void AddFlashAttention(OpListBuilder& b, int16_t layer) const override {
    const StepContext& ctx = b.ctx();
    const int64_t parts = (ctx.has_prefill ? 1 : 0) | (ctx.has_decode ? 2 : 0);
    if (b.cluster().sm >= 100) {  // FlashInfer's trtllm-gen kernels on Blackwell
      b.BeKernel("flashinfer::trtllm_batch_context_with_kv_cache", kernels::kFmhaSm100,
                 Family::kAttention, Work::kAttention, Api::kDriverEx, parts, 0, layer);
      return;
    }
    b.Be("vllm_flash_attn::_flash_attn_varlen_forward");
    b.Kernel(kernels::kFlashSplitKv, Family::kAttention, Work::kAttention, Api::kLaunchEx, parts, 0,
             layer);
    if (ctx.has_decode && ctx.decode_seqs > 16) {  // split-KV only pays off for big batches
      b.Kernel(kernels::kFlashCombine, Family::kAttention, Work::kAttnCombine, Api::kLaunchEx, 0, 0,
               layer);
    }
    b.Close();
  }

  void LogEngineReady(LogEmitter& log, int64_t t) const override {
    const int64_t ms = 1000000;
    const int64_t tk = t + 200 * ms;
    const EngineSpec& e = log.config().engine_spec;
    log.Add(0, tk, false,
            Prefix(log, "INFO", 0, tk, "kv_cache_utils.py", 634) +
                fmt::format("GPU KV cache size: {:L} tokens", e.num_gpu_blocks * e.block_size));
    log.Add(0, tk + ms, false,
            Prefix(log, "INFO", 0, tk + ms, "gpu_model_runner.py", 1686) +
                "Graph capturing finished in 9 secs, took 0.41 GiB");
  }
  std::string FatalErrorHeader(const LogEmitter& log, int64_t t, std::string_view) const override {
    return Prefix(log, "ERROR", 0, t, "core.py", 400) + "EngineCore encountered a fatal error.";
  }
  std::string_view traceback_runner() const override {
    return "vllm/v1/worker/gpu_model_runner.py";
  }
  void LogWorkerDied(LogEmitter& log, int32_t rank, int64_t t) const override {
    if (rank == 0) return;
    log.Add(0, t + 2000000, true,
            Prefix(log, "ERROR", 0, t + 2000000, "async_llm.py", 399) +
                "AsyncLLM output_handler failed.");
    log.Add(0, t + 2001000, true,
            "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See "
            "stack trace (above) for the root cause.");
  }

 protected:
  explicit VllmV1(EngineKind kind)
      : VllmProfile(kind, BatchingPolicy::kChunkedPrefill,
                    {.schedule = "Scheduler.schedule",
                     .step = "EngineCore.step",
                     .process_output = "Scheduler.update_from_output",
                     .model_runner = "GPUModelRunner.execute_model",
                     .prepare_inputs = "GPUModelRunner._prepare_inputs",
                     .graph_replay = "CUDAGraphRunner.forward"},
                    true) {}

  void LogPlatform(LogEmitter& log, int64_t t) const {
    log.Add(
        0, t, false,
        Prefix(log, "INFO", 0, t, "__init__.py", 239) + "Automatically detected platform cuda.");
  }
  void LogSamplingWarning(LogEmitter& log, int64_t t) const {
    const int64_t t5 = t + 5 * 1000000;
    log.Add(0, t5, false,
            Prefix(log, "WARNING", 0, t5, "config.py", 1240) +
                "Default sampling parameters have been overridden by the model's Hugging Face "
                "generation config recommended from the model creator. If this is not "
                "intended, please relaunch vLLM instance with `--generation-config vllm`.");
  }
};

// LLM.generate over a fixed prompt list: a tqdm progress bar instead of request lines.
class VllmV1Offline final : public VllmV1 {
 public:
  VllmV1Offline() : VllmV1(EngineKind::kVllmV1Offline) {}

  void ApplyDefaults(SimConfig* config) const override {
    VllmV1::ApplyDefaults(config);
    config->engine_spec.max_num_batched_tokens = 4096;
    config->workload.online = false;
  }
  std::string RequestId(const std::string&, int32_t index, uint64_t, uint64_t) const override {
    return fmt::format("{}", index);
  }
  std::string LaunchCommand(const SimConfig& config) const override {
    return fmt::format("python3 offline_infer.py --model {} -tp {} -pp {}", config.model.name,
                       config.cluster.tp, config.cluster.pp);
  }

  void LogBanner(LogEmitter& log, int64_t t) const override {
    LogPlatform(log, t);
    LogSamplingWarning(log, t);
  }
  void LogRequestFinished(LogEmitter& log, const Request&, int64_t t) const override {
    const int32_t n = log.config().workload.num_requests;
    const int64_t finished = log.window().finished;
    if (finished % std::max(1, n / 4) == 0 || finished == n) {
      const int pct = static_cast<int>(100 * finished / n);
      const int bar = pct / 10;
      Rng* rng = log.rng();
      log.Add(0, t, true,
              fmt::format("Processed prompts: {:3d}%|{}{}| {}/{} [00:0{}<00:00, {:.2f}it/s, est. "
                          "speed input: {:.2f} toks/s, output: {:.2f} toks/s]",
                          pct, std::string(static_cast<size_t>(bar) * 3, '#'),
                          std::string(static_cast<size_t>(10 - bar), ' '), finished, n,
                          std::min<int64_t>(9, t / 1000000000), 8.0 + rng->Uniform(0, 4),
                          2400 + rng->Uniform(0, 800), 60 + rng->Uniform(0, 30)));
    }
  }
};

// vllm serve: the OpenAI API server's request, access and metrics lines.
class VllmV1Online final : public VllmV1 {
 public:
  VllmV1Online() : VllmV1(EngineKind::kVllmV1Online) {}

  void ApplyDefaults(SimConfig* config) const override {
    VllmV1::ApplyDefaults(config);
    config->engine_spec.max_num_batched_tokens = 2048;
    config->engine_spec.metrics_interval_s = 0.5;
  }
  std::string RequestId(const std::string&, int32_t, uint64_t a, uint64_t b) const override {
    return fmt::format("cmpl-{:016x}{:016x}", a, b);
  }
  std::string LaunchCommand(const SimConfig& config) const override { return VllmCommand(config); }

  void LogBanner(LogEmitter& log, int64_t t) const override {
    LogPlatform(log, t);
    const int64_t t2 = t + 2 * 1000000;
    log.Add(0, t2, false,
            Prefix(log, "INFO", 0, t2, "api_server.py", 1043) + "vLLM API server version 0.8.5");
    LogSamplingWarning(log, t);
  }
  void LogRequestArrived(LogEmitter& log, const Request& r, int64_t t) const override {
    log.Add(
        0, t, false,
        Prefix(log, "INFO", 0, t, "logger.py", 39) +
            fmt::format("Received request {}: prompt: '', params: SamplingParams(n=1, "
                        "presence_penalty=0.0, frequency_penalty=0.0, repetition_penalty=1.0, "
                        "temperature=0.7, top_p=0.8, top_k=20, min_p=0.0, seed=None, stop=[], "
                        "max_tokens={}, min_tokens=0), prompt_token_ids: None, lora_request: None.",
                        r.id, r.output_tokens));
    log.Add(0, t + 150000, false,
            Prefix(log, "INFO", 0, t + 150000, "async_llm.py", 252) +
                fmt::format("Added request {}.", r.id));
  }
  void LogRequestFinished(LogEmitter& log, const Request& r, int64_t t) const override {
    log.Add(0, t + 300000, false, LogEmitter::AccessLine(r, "/v1/completions"));
  }
  void LogRequestAborted(LogEmitter& log, const Request& r, int64_t t) const override {
    log.Add(
        0, t, false,
        Prefix(log, "INFO", 0, t, "async_llm.py", 420) + fmt::format("Aborted request {}.", r.id));
  }
  void LogMetrics(LogEmitter& log, const StepPlan& plan, double usage, double secs,
                  int64_t end) const override {
    const LogWindow& w = log.window();
    Rng* rng = log.rng();
    log.Add(0, end, false,
            Prefix(log, "INFO", 0, end, "loggers.py", 111) +
                fmt::format("Engine 000: Avg prompt throughput: {:.1f} tokens/s, Avg generation "
                            "throughput: {:.1f} tokens/s, Running: {} reqs, Waiting: {} reqs, "
                            "GPU KV cache usage: {:.1f}%, Prefix cache hit rate: {:.1f}%",
                            w.prompt_tokens / secs, w.gen_tokens / secs, plan.running, plan.waiting,
                            100 * usage, 30.0 + rng->Uniform(0, 10)));
    log.Add(0, end + 2000000, false,
            fmt::format("INFO:     10.0.3.2:{} - \"GET /metrics HTTP/1.1\" 200 OK",
                        50000 + rng->UniformInt(0, 9999)));
  }
  void LogShutdown(LogEmitter& log, int64_t t) const override {
    log.Add(0, t, false, "INFO:     Shutting down");
  }
};

}  // namespace

const EngineProfile& VllmV0Profile() {
  static const VllmV0 profile;
  return profile;
}

const EngineProfile& VllmV1OfflineProfile() {
  static const VllmV1Offline profile;
  return profile;
}

const EngineProfile& VllmV1OnlineProfile() {
  static const VllmV1Online profile;
  return profile;
}

}  // namespace teller::sim
