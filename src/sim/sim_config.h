// Configuration of one simulated run: engine, model, cluster, workload, faults.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "sim/fault_spec.h"

namespace teller::sim {

enum class EngineKind { kVllmV0, kVllmV1Offline, kVllmV1Online, kSglang, kTorchFsdp };
inline constexpr EngineKind kAllEngines[] = {EngineKind::kSglang, EngineKind::kTorchFsdp,
                                             EngineKind::kVllmV0, EngineKind::kVllmV1Offline,
                                             EngineKind::kVllmV1Online};

// "vllm-v0", "vllm-v1-offline", "vllm-v1-online", "sglang", "torch-fsdp".
std::string_view EngineName(EngineKind engine);
// Table-1 style label: "vLLM v0", "SGLang", ...
std::string_view EngineDisplayName(EngineKind engine);
base::StatusOr<EngineKind> ParseEngineKind(std::string_view name);

// How a step's forward runs on the host.
enum class ForwardMode {
  kEager,      // one launch per kernel, module ranges per layer
  kFullGraph,  // one cudaGraphLaunch replays every kernel of the forward
  kPiecewise,  // vLLM v1: graph pieces between eager attention calls
};

struct ModelSpec {
  std::string name = "Qwen/Qwen3-8B";
  std::string arch = "Qwen3";  // module class prefix: Qwen3DecoderLayer, ...
  int32_t layers = 36;
  int32_t hidden = 4096;
  int32_t intermediate = 12288;
  int32_t heads = 32;
  int32_t kv_heads = 8;
  int32_t head_dim = 128;
  int32_t vocab = 151936;
  // Every Nth layer is a Mamba2 mixer instead of attention (0: none). The hybrid
  // variant is what the decode-misroute case of the paper's section 6 needs.
  int32_t mamba_period = 0;
  // Mixture of experts (0: a dense MLP): routed experts, experts per token and each
  // expert's intermediate size. Every layer's MLP is then routed and grouped GEMMs.
  int32_t experts = 0;
  int32_t experts_per_token = 0;
  int32_t moe_intermediate = 0;
  // FP8 (e4m3) weights and activations in the linear layers (the modern preset).
  bool fp8 = false;
  // MXFP4 expert weights (gpt-oss): half a byte per weight in the grouped GEMMs.
  bool fp4_experts = false;
  bool qk_norm = true;  // RMSNorm on q and k (Qwen3); Llama and gpt-oss have none
};

// The modern preset's models: a dense FP8 model (Llama 3.3 70B), an MoE model with FP8
// experts for Hopper (Qwen3-235B-A22B, 128 experts, top 8) and one with MXFP4 experts
// for Blackwell (gpt-oss-120b, 128 experts, top 4: the model of the real B200 trace).
ModelSpec DenseModernModel();
ModelSpec MoeModel();
ModelSpec Fp4MoeModel();

struct ClusterSpec {
  int32_t nodes = 2;
  int32_t gpus_per_node = 3;
  int32_t tp = 3;  // tensor parallel size (within a node by default)
  int32_t pp = 2;  // pipeline stages (across nodes by default)
  std::string gpu_name = "NVIDIA A40";
  double gpu_bf16_tflops = 149.7;  // dense peak
  double gpu_mem_bw_gbps = 696.0;
  double intra_node_gbps = 22.0;  // PCIe 4.0 x16, effective
  double inter_node_gbps = 11.5;  // ConnectX-6 100 GbE, effective
  // Data-parallel replicas of a serving engine, each tp x pp GPUs (world = dp x tp x pp).
  // They step in lock step, as MoE expert parallelism needs (the modern preset).
  int32_t dp = 1;
  // MoE experts spread over every rank of the replicas (dp x tp), reached by all-to-all;
  // else each replica holds every expert, tensor-parallel, and all-reduces their output.
  bool expert_parallel = false;
  int32_t sm = 86;    // compute capability x10 (86 Ampere, 90 Hopper, 100 Blackwell)
  bool nvls = false;  // NVSwitch multicast: TP all-reduce is NVLS multimem_all_reduce
  int32_t world() const { return nodes * gpus_per_node; }
};

enum class GpuKind { kH100, kH200, kB200 };
// 8 GPUs per node on NVLink/NVSwitch (NVLS), one 400 Gb/s InfiniBand NIC per GPU between
// nodes, TP 8 inside a node and one data-parallel replica per node.
ClusterSpec ModernCluster(GpuKind gpu, int32_t nodes);

struct WorkloadSpec {
  int32_t num_requests = 12;
  bool online = true;  // Poisson arrivals; false: all at t=0 (offline replay)
  double arrival_rate_per_s = 6.0;
  // Prompt tokens: lognormal around median, clipped; output tokens likewise.
  double prompt_median = 320;
  double prompt_sigma = 0.9;
  int32_t prompt_max = 6000;
  double output_median = 7;
  double output_sigma = 0.7;
  int32_t output_max = 48;
  double shared_prefix_fraction = 0.5;  // requests that share a system prompt
  int32_t shared_prefix_tokens = 128;
};

struct EngineSpec {
  int32_t max_num_batched_tokens = 2048;
  int32_t max_num_seqs = 64;
  int32_t block_size = 16;
  int32_t num_gpu_blocks = 4096;  // KV cache capacity in blocks (per rank group)
  bool chunked_prefill = false;
  bool radix_cache = false;
  ForwardMode prefill_mode = ForwardMode::kEager;
  ForwardMode decode_mode = ForwardMode::kEager;
  int32_t graph_capture_steps = 0;  // warm-up steps that capture CUDA graphs
  double metrics_interval_s = 1.0;  // periodic throughput/KV line
};

struct SimConfig {
  EngineKind engine = EngineKind::kVllmV1Online;
  ModelSpec model;
  ClusterSpec cluster;
  WorkloadSpec workload;
  EngineSpec engine_spec;
  std::vector<FaultSpec> faults;
  uint64_t seed = 1;
  int32_t max_steps = 4000;                         // safety cap
  int64_t start_realtime_ns = 1767225600000000000;  // 2026-01-01T00:00:00Z
  std::string run_id = "run";                       // prefix of ids, names the bundle
  bool warmup = true;                               // emit cold-start / graph-capture steps
  // >0: faults without an explicit duration last this fraction of the run's steps.
  double fault_window_fraction = 0;
};

// The engine's defaults (modes, budgets, cache) on the given cluster.
SimConfig DefaultConfig(EngineKind engine);

// Ranks of a (pp_stage, tp_rank) grid; rank = stage * tp + tp_rank. Node of a rank.
int32_t NodeOfRank(const ClusterSpec& cluster, int32_t rank);
int32_t LocalRankOf(const ClusterSpec& cluster, int32_t rank);

base::Status ValidateConfig(const SimConfig& config);

}  // namespace teller::sim
