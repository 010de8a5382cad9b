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
  if (!ProfileFor(config.engine).data_parallel() && c.tp * c.pp != c.world()) {
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
