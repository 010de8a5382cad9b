#include "sim/sim_config.h"

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
  EngineSpec& e = config.engine_spec;
  switch (engine) {
    case EngineKind::kVllmV0:
      e.max_num_batched_tokens = 8192;
      e.chunked_prefill = false;
      e.prefill_mode = ForwardMode::kEager;
      e.decode_mode = ForwardMode::kFullGraph;
      e.graph_capture_steps = 2;
      e.metrics_interval_s = 0.5;
      break;
    case EngineKind::kVllmV1Offline:
      e.max_num_batched_tokens = 4096;
      e.chunked_prefill = true;
      e.prefill_mode = ForwardMode::kPiecewise;
      e.decode_mode = ForwardMode::kPiecewise;
      e.graph_capture_steps = 2;
      config.workload.online = false;
      break;
    case EngineKind::kVllmV1Online:
      e.max_num_batched_tokens = 2048;
      e.chunked_prefill = true;
      e.prefill_mode = ForwardMode::kPiecewise;
      e.decode_mode = ForwardMode::kPiecewise;
      e.graph_capture_steps = 2;
      e.metrics_interval_s = 0.5;
      break;
    case EngineKind::kSglang:
      e.max_num_batched_tokens = 8192;
      e.radix_cache = true;
      e.prefill_mode = ForwardMode::kEager;
      e.decode_mode = ForwardMode::kFullGraph;
      e.graph_capture_steps = 2;
      e.metrics_interval_s = 0.0;  // SGLang logs every prefill batch and every 40 decodes
      config.workload.shared_prefix_fraction = 0.7;
      break;
    case EngineKind::kTorchFsdp:
      config.cluster.tp = 1;
      config.cluster.pp = 1;
      e.max_num_seqs = 4;
      e.prefill_mode = ForwardMode::kEager;
      e.decode_mode = ForwardMode::kEager;
      e.graph_capture_steps = 0;
      break;
  }
  return config;
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
  if (config.engine != EngineKind::kTorchFsdp && c.tp * c.pp != c.world()) {
    return base::InvalidArgument("{} uses every GPU: tp ({}) x pp ({}) must equal {} GPUs",
                                 EngineName(config.engine), c.tp, c.pp, c.world());
  }
  if (config.model.layers < c.pp) {
    return base::InvalidArgument("{} layers cannot be split into {} stages", config.model.layers,
                                 c.pp);
  }
  if (config.workload.num_requests < 1) return base::InvalidArgument("need at least 1 request");
  return base::OkStatus();
}

}  // namespace teller::sim
