// SGLang: prefill-first batches with a radix cache, FlashInfer attention, full CUDA graphs
// for decode, and its own batch log lines.
#include <fmt/format.h>

#include <algorithm>

#include "sim/kernel_names.h"
#include "sim/log_emitter.h"
#include "sim/op_list.h"
#include "sim/profiles.h"

namespace teller::sim {
namespace {

class Sglang final : public VllmStyleProfile {
 public:
  Sglang()
      : VllmStyleProfile(EngineKind::kSglang, BatchingPolicy::kPrefillFirst,
                         {.schedule = "Scheduler.get_next_batch_to_run",
                          .step = "Scheduler.run_batch",
                          .process_output = "Scheduler.process_batch_result",
                          .model_runner = "ModelRunner.forward",
                          .prepare_inputs = "ForwardBatch.init_new",
                          .graph_replay = "CudaGraphRunner.replay"},
                         4, "RadixAttention", "sgl_kernel::silu_and_mul", kernels::kSglSiluAndMul) {
  }

  void ApplyDefaults(SimConfig* config) const override {
    EngineSpec& e = config->engine_spec;
    e.max_num_batched_tokens = 8192;
    e.radix_cache = true;
    e.prefill_mode = ForwardMode::kEager;
    e.decode_mode = ForwardMode::kFullGraph;
    e.graph_capture_steps = 2;
    e.metrics_interval_s = 0.0;  // SGLang logs every prefill batch and every 40 decodes
    config->workload.shared_prefix_fraction = 0.7;
  }
  std::string RequestId(const std::string&, int32_t, uint64_t a, uint64_t b) const override {
    return fmt::format("{:016x}{:016x}", a, b);
  }
  std::string LaunchCommand(const SimConfig& config) const override {
    return fmt::format("python3 -m sglang.launch_server --model-path {} --tp {} --nnodes {}",
                       config.model.name, config.cluster.tp, config.cluster.nodes);
  }

  void AddAttentionBackend(OpListBuilder& b, int16_t layer) const override {
    b.BeKernel("aten::index_put_", kernels::kStoreKvCache, Family::kKvCache, Work::kCache,
               Api::kLaunch, 0, 0, layer);
    if (b.ctx().has_prefill) {
      b.BeKernel("flashinfer::batch_prefill_with_paged_kv_cache", kernels::kFlashinferPrefill,
                 Family::kAttention, Work::kAttention, Api::kLaunchEx, 1, 0, layer);
    }
    if (b.ctx().has_decode) {
      b.BeKernel("flashinfer::batch_decode_with_paged_kv_cache", kernels::kFlashinferDecode,
                 Family::kAttention, Work::kAttention, Api::kLaunchEx, 2, 0, layer)
          .decode_path = true;
    }
  }

  void LogBanner(LogEmitter& log, int64_t t) const override {
    const SimConfig& config = log.config();
    log.Add(0, t, false,
            Prefix(log, t, false) +
                fmt::format("server_args=ServerArgs(model_path='{}', tp_size={}, "
                            "nnodes={}, chunked_prefill_size=8192, "
                            "disable_radix_cache=False, enable_torch_compile=False)",
                            config.model.name, config.cluster.tp, config.cluster.nodes));
  }
  void LogRequestFinished(LogEmitter& log, const Request& r, int64_t t) const override {
    log.Add(0, t + 300000, false,
            Prefix(log, t + 300000, false) + LogEmitter::AccessLine(r, "/generate"));
  }
  void LogPreempted(LogEmitter& log, const Request&, int64_t t, int64_t) const override {
    Rng* rng = log.rng();
    log.Add(
        0, t, false,
        Prefix(log, t, true) + fmt::format("Decode out of memory happened. "
                                           "#retracted_reqs: 1, #new_token_ratio: {:.4f} -> "
                                           "{:.4f}",
                                           0.4 + rng->Uniform(0, 0.2), 0.7 + rng->Uniform(0, 0.2)));
  }
  // Every prefill batch, and every 40th decode batch.
  void LogStepDone(LogEmitter& log, const StepPlan& plan, double usage,
                   int64_t end) const override {
    LogWindow& w = log.window();
    if (plan.phase != StepPhase::kDecode) {
      int64_t cached = 0;
      for (const StepEntry& e : plan.entries) cached += e.cached_tokens;
      log.Add(
          0, end, false,
          Prefix(log, end, true) +
              fmt::format("Prefill batch. #new-seq: {}, #new-token: {}, #cached-token: {}, "
                          "token usage: {:.2f}, #running-req: {}, #queue-req: {}",
                          plan.added.size(), plan.prefill_tokens, cached, usage,
                          plan.running - static_cast<int32_t>(plan.added.size()), plan.waiting));
    } else if (++w.decode_batches % 40 == 0) {
      const double secs = std::max(1e-3, (end - w.last_metrics_ns) / 1e9);
      log.Add(
          0, end, false,
          Prefix(log, end, true) +
              fmt::format("Decode batch. #running-req: {}, #token: {}, token usage: {:.2f}, "
                          "gen throughput (token/s): {:.2f}, #queue-req: {}",
                          plan.running, plan.kv_blocks_used * log.config().engine_spec.block_size,
                          usage, w.gen_tokens / secs, plan.waiting));
      w.last_metrics_ns = end;
      w.gen_tokens = 0;
    }
  }
  std::string FatalErrorHeader(const LogEmitter& log, int64_t t, std::string_view) const override {
    return Prefix(log, t, true) + "Scheduler hit an exception: Traceback (most recent call last):";
  }
  std::string_view traceback_runner() const override {
    return "sglang/srt/model_executor/model_runner.py";
  }

 private:
  // "[2026-01-01 00:00:01 TP0] "
  static std::string Prefix(const LogEmitter& log, int64_t t_ns, bool tp) {
    const CivilTime c = ToCivil(log.Realtime(0, t_ns));
    return fmt::format("[{:04d}-{:02d}-{:02d} {:02d}:{:02d}:{:02d}{}] ", c.year, c.month, c.day,
                       c.hour, c.minute, c.second, tp ? " TP0" : "");
  }
};

}  // namespace

const EngineProfile& SglangProfile() {
  static const Sglang profile;
  return profile;
}

}  // namespace teller::sim
