// A Torch FSDP generation server: Hugging Face eager modules, every rank a data-parallel
// replica that all-gathers each layer's parameters, static batches, Python logging.
#include <fmt/format.h>

#include "sim/kernel_names.h"
#include "sim/log_emitter.h"
#include "sim/op_list.h"
#include "sim/profiles.h"

namespace teller::sim {
namespace {

class TorchFsdp final : public EngineProfile {
 public:
  TorchFsdp()
      : EngineProfile(EngineKind::kTorchFsdp, BatchingPolicy::kStaticPerRank,
                      {.schedule = "GenerationMixin.prepare_batch",
                       .step = "GenerationMixin.generate_step",
                       .process_output = "GenerationMixin.update_outputs",
                       .model_runner = "GenerationMixin._sample",
                       .prepare_inputs = "prepare_inputs_for_generation",
                       .graph_replay = "CUDAGraphRunner.forward"},
                      2, true) {}

  void ApplyDefaults(SimConfig* config) const override {
    config->cluster.tp = 1;
    config->cluster.pp = 1;
    EngineSpec& e = config->engine_spec;
    e.max_num_seqs = 4;
    e.prefill_mode = ForwardMode::kEager;
    e.decode_mode = ForwardMode::kEager;
    e.graph_capture_steps = 0;
  }
  std::string RequestId(const std::string& run_id, int32_t index, uint64_t,
                        uint64_t) const override {
    return fmt::format("req-{}-{:04d}", run_id, index);
  }
  std::string LaunchCommand(const SimConfig& config) const override {
    return fmt::format("torchrun --nnodes {} --nproc-per-node {} serve_fsdp.py --model {}",
                       config.cluster.nodes, config.cluster.gpus_per_node, config.model.name);
  }

  // LlamaRMSNorm-style: pow, mean, mul.
  void AddNorm(OpListBuilder& b, bool, int64_t width, int16_t layer) const override {
    b.Fe(b.ModelName("RMSNorm"));
    b.BeKernel("aten::pow", kernels::kPowKernel, Family::kNorm, Work::kElem, Api::kLaunch, width, 0,
               layer);
    b.BeKernel("aten::mean", kernels::kMeanKernel, Family::kNorm, Work::kElem, Api::kLaunch, width,
               0, layer);
    b.BeKernel("aten::mul", kernels::kMulKernel, Family::kNorm, Work::kElem, Api::kLaunch, width, 0,
               layer);
    b.Close();
  }
  // Each layer is an FSDP unit: its parameters are all-gathered before its forward.
  void AddLayerWrapperOpen(OpListBuilder& b, int16_t layer) const override {
    b.Fe("FullyShardedDataParallel");
    b.Be("FSDP::pre_forward");
    b.Collective("", "nccl:_all_gather_base", kernels::kAllGather, Work::kParamGather, Comm::kDp,
                 "_allgather_base", layer);
    b.Close();
  }
  void AddLayerWrapperClose(OpListBuilder& b) const override { b.Close(); }
  void AddEmbeddingReduce(OpListBuilder&) const override {}
  void AddQkvProjection(OpListBuilder& b, int16_t layer) const override {
    b.Linear(b.q_width(), b.model().hidden, layer);
    b.Linear(b.kv_width(), b.model().hidden, layer);
    b.Linear(b.kv_width(), b.model().hidden, layer);
  }
  void AddQkNorms(OpListBuilder& b, int16_t layer) const override {
    b.BeKernel("aten::mul", kernels::kMulKernel, Family::kNorm, Work::kElem, Api::kLaunch,
               b.q_width(), 0, layer);
    b.BeKernel("aten::mul", kernels::kMulKernel, Family::kNorm, Work::kElem, Api::kLaunch,
               b.kv_width(), 0, layer);
  }
  void AddRotary(OpListBuilder& b, int16_t layer) const override {
    b.BeKernel("aten::mul", kernels::kRotaryHf, Family::kRotary, Work::kElem, Api::kLaunch,
               b.q_width() + b.kv_width(), 0, layer);
  }
  void AddAttention(OpListBuilder& b, int16_t layer) const override {
    const StepContext& ctx = b.ctx();
    const int64_t parts = (ctx.has_prefill ? 1 : 0) | (ctx.has_decode ? 2 : 0);
    b.Be("aten::scaled_dot_product_attention");
    b.BeKernel("aten::_scaled_dot_product_flash_attention",
               ctx.has_prefill ? kernels::kSdpaFlash : kernels::kSdpaSplitKv, Family::kAttention,
               Work::kAttention, Api::kLaunchEx, parts, 0, layer);
    b.Close();
  }
  void AddOutputProjection(OpListBuilder& b, int16_t layer) const override {
    b.Linear(b.model().hidden, b.q_width(), layer);
  }
  void AddMlp(OpListBuilder& b, int16_t layer) const override {
    const ModelSpec& m = b.model();
    b.Linear(m.intermediate, m.hidden, layer);
    b.Linear(m.intermediate, m.hidden, layer);
    b.BeKernel("aten::silu", kernels::kSiluKernel, Family::kActivation, Work::kElem, Api::kLaunch,
               m.intermediate, 0, layer);
    b.BeKernel("aten::mul", kernels::kMulKernel, Family::kActivation, Work::kElem, Api::kLaunch,
               m.intermediate, 0, layer);
    b.Linear(m.hidden, m.intermediate, layer);
  }

  void LogBanner(LogEmitter& log, int64_t t) const override {
    log.Add(0, t, true,
            "/usr/local/lib/python3.10/dist-packages/torch/distributed/fsdp/_init_utils.py:444: "
            "UserWarning: FSDP is switching to use `NO_SHARD` instead of "
            "ShardingStrategy.FULL_SHARD since the world size is 1.");
    const int64_t t1 = t + 1000000;
    log.Add(0, t1, false,
            Prefix(log, "INFO", t1, "serve_fsdp.py", 57) +
                fmt::format("loaded {} with FSDP on {} ranks", log.config().model.name,
                            log.config().cluster.world()));
  }
  void LogRequestArrived(LogEmitter& log, const Request& r, int64_t t) const override {
    log.Add(0, t, false,
            Prefix(log, "INFO", t, "serve_fsdp.py", 88) +
                fmt::format("queued {} on rank {} ({} prompt tokens)", r.id, r.dp_rank,
                            r.prompt_tokens));
  }
  void LogRequestFinished(LogEmitter& log, const Request& r, int64_t t) const override {
    log.Add(0, t + 100000, false,
            Prefix(log, "INFO", t + 100000, "serve_fsdp.py", 131) +
                fmt::format("finished {} in {:.3f} s ({} tokens)", r.id,
                            (r.finish_ns - r.arrival_ns) / 1e9, r.generated));
  }
  void LogMetrics(LogEmitter& log, const StepPlan& plan, double, double secs,
                  int64_t end) const override {
    log.Add(0, end, false,
            Prefix(log, "INFO", end, "serve_fsdp.py", 102) +
                fmt::format("{} running, {} queued, {:.1f} tok/s", plan.running, plan.waiting,
                            log.window().gen_tokens / secs));
  }
  std::string FatalErrorHeader(const LogEmitter&, int64_t, std::string_view) const override {
    return "";
  }
  std::string_view traceback_runner() const override { return "transformers/generation/utils.py"; }

 private:
  // Python logging: "2026-01-01 00:00:01,234 - INFO - file.py:12 - ".
  static std::string Prefix(const LogEmitter& log, const char* level, int64_t t_ns,
                            const char* file, int line) {
    const CivilTime c = ToCivil(log.Realtime(0, t_ns));
    return fmt::format("{:04d}-{:02d}-{:02d} {:02d}:{:02d}:{:02d},{:03d} - {} - {}:{} - ", c.year,
                       c.month, c.day, c.hour, c.minute, c.second, c.nanos / 1000000, level, file,
                       line);
  }
};

}  // namespace

const EngineProfile& TorchFsdpProfile() {
  static const TorchFsdp profile;
  return profile;
}

}  // namespace teller::sim
