#include "sim/sim_config.h"

#include "sim/engine_profile.h"

namespace teller::sim {

std::string_view EngineName(EngineKind engine) {
  switch (engine) {
    case EngineKind::kVllmV0:
      return "vllm-v0";
    case EngineKind::kVllmV1Offline:
      return "vllm-v1-offline";
    case EngineKind::kVllmV1Online:
      return "vllm-v1-online";
    case EngineKind::kSglang:
      return "sglang";
    case EngineKind::kTorchFsdp:
      return "torch-fsdp";
  }
  return "unknown";
}

std::string_view EngineDisplayName(EngineKind engine) {
  switch (engine) {
    case EngineKind::kVllmV0:
      return "vLLM v0";
    case EngineKind::kVllmV1Offline:
      return "vLLM v1 offline";
    case EngineKind::kVllmV1Online:
      return "vLLM v1 online";
    case EngineKind::kSglang:
      return "SGLang";
    case EngineKind::kTorchFsdp:
      return "Torch FSDP";
  }
  return "unknown";
}

base::StatusOr<EngineKind> ParseEngineKind(std::string_view name) {
  for (EngineKind engine : kAllEngines) {
    if (EngineName(engine) == name) return engine;
  }
  return base::InvalidArgument(
      "unknown engine '{}' (expected vllm-v0, vllm-v1-offline, vllm-v1-online, sglang, "
      "torch-fsdp)",
      name);
}

SimConfig DefaultConfig(EngineKind engine) {
  SimConfig config;
  config.engine = engine;
  ProfileFor(engine).ApplyDefaults(&config);
  return config;
}

ModelSpec DenseModernModel() {
  ModelSpec m;
  m.name = "meta-llama/Llama-3.3-70B-Instruct-FP8";
  m.arch = "Llama";
  m.layers = 80;
  m.hidden = 8192;
  m.intermediate = 28672;
  m.heads = 64;
  m.kv_heads = 8;
  m.head_dim = 128;
  m.vocab = 128256;
  m.fp8 = true;
  m.qk_norm = false;
  return m;
}

ModelSpec MoeModel() {
  ModelSpec m;
  m.name = "Qwen/Qwen3-235B-A22B-FP8";
  m.arch = "Qwen3Moe";
  m.layers = 94;
  m.hidden = 4096;
  m.intermediate = 12288;
  m.heads = 64;
  m.kv_heads = 4;
  m.head_dim = 128;
  m.vocab = 151936;
  m.experts = 128;
  m.experts_per_token = 8;
  m.moe_intermediate = 1536;
  m.fp8 = true;
  return m;
}

ModelSpec Fp4MoeModel() {
  ModelSpec m;
  m.name = "openai/gpt-oss-120b";
  m.arch = "GptOss";
  m.layers = 36;
  m.hidden = 2880;
  m.intermediate = 2880;
  m.heads = 64;
  m.kv_heads = 8;
  m.head_dim = 64;
  m.vocab = 201088;
  m.experts = 128;
  m.experts_per_token = 4;
  m.moe_intermediate = 2880;
  m.fp4_experts = true;
  m.qk_norm = false;
  return m;
}

ClusterSpec ModernCluster(GpuKind gpu, int32_t nodes) {
  ClusterSpec c;
  c.nodes = nodes;
  c.gpus_per_node = 8;
  c.tp = 8;
  c.pp = 1;
  c.dp = nodes;
  c.nvls = true;
  c.inter_node_gbps = 45.0;  // ConnectX-7 400 Gb/s InfiniBand per GPU, effective
  switch (gpu) {
    case GpuKind::kH100:
      c.gpu_name = "NVIDIA H100 80GB HBM3";
      c.gpu_bf16_tflops = 989.0;
      c.gpu_mem_bw_gbps = 3350.0;
      c.intra_node_gbps = 360.0;  // NVLink 4 through NVSwitch, all-reduce bus bandwidth
      c.sm = 90;
      break;
    case GpuKind::kH200:
      c.gpu_name = "NVIDIA H200";
      c.gpu_bf16_tflops = 989.0;
      c.gpu_mem_bw_gbps = 4800.0;
      c.intra_node_gbps = 360.0;
      c.sm = 90;
      break;
    case GpuKind::kB200:
      c.gpu_name = "NVIDIA B200";
      c.gpu_bf16_tflops = 2250.0;
      c.gpu_mem_bw_gbps = 8000.0;
      c.intra_node_gbps = 720.0;  // NVLink 5
      c.sm = 100;
      break;
  }
  return c;
}

int32_t NodeOfRank(const ClusterSpec& cluster, int32_t rank) {
  return cluster.gpus_per_node > 0 ? rank / cluster.gpus_per_node : 0;
}

int32_t LocalRankOf(const ClusterSpec& cluster, int32_t rank) {
  return cluster.gpus_per_node > 0 ? rank % cluster.gpus_per_node : rank;
}

base::Status ValidateConfig(const SimConfig& config) {
  const ClusterSpec& c = config.cluster;
  if (c.nodes < 1 || c.gpus_per_node < 1) {
    return base::InvalidArgument("cluster needs at least 1 node and 1 GPU per node");
  }
  if (c.tp < 1 || c.pp < 1 || c.world() % (c.tp * c.pp) != 0) {
    return base::InvalidArgument("tp ({}) x pp ({}) must divide the {} GPUs", c.tp, c.pp,
                                 c.world());
  }
  if (!ProfileFor(config.engine).data_parallel() && c.dp * c.tp * c.pp != c.world()) {
    return base::InvalidArgument(
        "{} uses every GPU: dp ({}) x tp ({}) x pp ({}) must equal {} GPUs",
        EngineName(config.engine), c.dp, c.tp, c.pp, c.world());
  }
  if (c.dp < 1 || (c.dp > 1 && (c.pp != 1 || ProfileFor(config.engine).data_parallel()))) {
    return base::InvalidArgument(
        "dp {}: data-parallel replicas need a serving engine and pp 1 (pp is {})", c.dp, c.pp);
  }
  const ModelSpec& m = config.model;
  if (c.expert_parallel && (c.dp < 2 || m.experts == 0)) {
    return base::InvalidArgument("expert parallelism needs an MoE model and dp > 1");
  }
  if (m.experts > 0 &&
      (m.experts_per_token < 1 || m.experts_per_token > m.experts || m.moe_intermediate < 1)) {
    return base::InvalidArgument(
        "MoE model needs 1 <= top-k ({}) <= experts ({}) and an expert "
        "intermediate size",
        m.experts_per_token, m.experts);
  }
  if (config.model.layers < c.pp) {
    return base::InvalidArgument("{} layers cannot be split into {} stages", config.model.layers,
                                 c.pp);
  }
  if (config.workload.num_requests < 1) return base::InvalidArgument("need at least 1 request");
  return base::OkStatus();
}

}  // namespace teller::sim
