#include "localize/operator_family.h"

#include <algorithm>
#include <array>
#include <unordered_map>

#include "model/classify.h"

namespace teller::localize {
namespace {

using model::Layer;

// Which events a rule applies to.
enum class Scope : uint8_t {
  kCompute,     // kernels (K) that are not collectives
  kCollective,  // collective kernels (COMM, or a K whose name is a collective)
  kHost,        // runtime and driver calls (RT, DRV, SYNC)
};

struct Rule {
  Scope scope;
  std::string_view pattern;  // lower case; matched as a case-insensitive substring
  OperatorFamily family;
};

using F = OperatorFamily;

// Ordered: the first rule whose pattern occurs in the name wins. Specific
// meanings come before the generic containers they run in (ArgMax inside
// at::native::reduce_kernel is sampling, a ReLU inside vectorized_elementwise_kernel
// is an activation, an MoE GEMM is MoE, an implicit-GEMM convolution is conv).
constexpr std::array kRules = {
    // Collectives.
    Rule{Scope::kCollective, "allreduce", F::kAllReduce},
    Rule{Scope::kCollective, "all_reduce", F::kAllReduce},
    Rule{Scope::kCollective, "cross_device_reduce", F::kAllReduce},  // vLLM custom all-reduce
    Rule{Scope::kCollective, "allgather", F::kAllGather},
    Rule{Scope::kCollective, "all_gather", F::kAllGather},
    Rule{Scope::kCollective, "reducescatter", F::kReduceScatter},
    Rule{Scope::kCollective, "reduce_scatter", F::kReduceScatter},
    Rule{Scope::kCollective, "alltoall", F::kAllToAll},
    Rule{Scope::kCollective, "all_to_all", F::kAllToAll},
    Rule{Scope::kCollective, "sendrecv", F::kSendRecv},
    Rule{Scope::kCollective, "send", F::kSendRecv},
    Rule{Scope::kCollective, "recv", F::kSendRecv},
    Rule{Scope::kCollective, "broadcast", F::kBroadcast},
    Rule{Scope::kCollective, "", F::kCollectiveOther},
    // Device copies named as kernels.
    Rule{Scope::kCompute, "memcpy", F::kMemcpy},
    Rule{Scope::kCompute, "memset", F::kMemset},
    // Mixture of experts: routing, expert GEMMs (trtllm-gen bmm_*, Triton matmul_ogs), finalize.
    Rule{Scope::kCompute, "moe", F::kMoe},
    Rule{Scope::kCompute, "expert", F::kMoe},
    Rule{Scope::kCompute, "routing", F::kMoe},
    Rule{Scope::kCompute, "matmul_ogs", F::kMoe},
    Rule{Scope::kCompute, "finalize_matmul_scatter", F::kMoe},
    Rule{Scope::kCompute, "bitmatrix", F::kMoe},
    Rule{Scope::kCompute, "_topk_forward", F::kMoe},
    Rule{Scope::kCompute, "bmm_mxe", F::kMoe},
    Rule{Scope::kCompute, "mxe2m1", F::kMoe},
    // KV cache writes and block tables (before attention: flashinfer kv indices).
    Rule{Scope::kCompute, "store_kvcache", F::kKvCache},  // not Fp8KVCacheDataType of attention
    Rule{Scope::kCompute, "page_indices", F::kKvCache},
    Rule{Scope::kCompute, "reshape_and_cache", F::kKvCache},
    Rule{Scope::kCompute, "kv_indices", F::kKvCache},
    Rule{Scope::kCompute, "copy_blocks", F::kKvCache},
    Rule{Scope::kCompute, "swap_blocks", F::kKvCache},
    // Attention.
    Rule{Scope::kCompute, "attention", F::kAttention},
    Rule{Scope::kCompute, "attn", F::kAttention},
    Rule{Scope::kCompute, "fmha", F::kAttention},
    Rule{Scope::kCompute, "flash", F::kAttention},
    Rule{Scope::kCompute, "mha_", F::kAttention},
    Rule{Scope::kCompute, "mla_", F::kAttention},
    Rule{Scope::kCompute, "sdpa", F::kAttention},
    Rule{Scope::kCompute, "kv_cache", F::kKvCache},  // after attention: *_with_kv_cache
    // Normalization (before quantization: add_rmsnorm_quant is a norm).
    Rule{Scope::kCompute, "rmsnorm", F::kNorm},
    Rule{Scope::kCompute, "rms_norm", F::kNorm},
    Rule{Scope::kCompute, "layernorm", F::kNorm},
    Rule{Scope::kCompute, "layer_norm", F::kNorm},
    Rule{Scope::kCompute, "groupnorm", F::kNorm},
    Rule{Scope::kCompute, "group_norm", F::kNorm},
    Rule{Scope::kCompute, "batchnorm", F::kNorm},
    Rule{Scope::kCompute, "batch_norm", F::kNorm},
    Rule{Scope::kCompute, "bn_fw", F::kNorm},
    Rule{Scope::kCompute, "gammabeta", F::kNorm},  // layer-norm backward
    Rule{Scope::kCompute, "rowwisemoments", F::kNorm},
    Rule{Scope::kCompute, "bn_bw", F::kNorm},
    Rule{Scope::kCompute, "softmax", F::kSoftmax},
    Rule{Scope::kCompute, "rotary", F::kRotary},
    Rule{Scope::kCompute, "rope", F::kRotary},
    Rule{Scope::kCompute, "quant", F::kQuantization},
    Rule{Scope::kCompute, "fp8rowwise", F::kQuantization},
    // Embedding tables (fbgemm TBE and its sparse-feature helpers).
    Rule{Scope::kCompute, "embedding", F::kEmbedding},
    Rule{Scope::kCompute, "pooled_embs", F::kEmbedding},
    Rule{Scope::kCompute, "fbgemm", F::kEmbedding},
    Rule{Scope::kCompute, "bounds_check_indices", F::kEmbedding},
    Rule{Scope::kCompute, "linearize_index", F::kEmbedding},
    Rule{Scope::kCompute, "recat_copy", F::kEmbedding},
    // Convolution (before GEMM: implicit-GEMM convolutions).
    Rule{Scope::kCompute, "convolution", F::kConv},  // not "convert"
    Rule{Scope::kCompute, "convolve", F::kConv},
    Rule{Scope::kCompute, "conv_", F::kConv},
    Rule{Scope::kCompute, "conv2d", F::kConv},
    Rule{Scope::kCompute, "fprop", F::kConv},
    Rule{Scope::kCompute, "dgrad", F::kConv},
    Rule{Scope::kCompute, "wgrad", F::kConv},
    Rule{Scope::kCompute, "winograd", F::kConv},
    Rule{Scope::kCompute, "fft2d", F::kConv},
    Rule{Scope::kCompute, "scudnn", F::kConv},
    Rule{Scope::kCompute, "cudnn", F::kConv},
    // GEMM: cuBLAS/cuBLASLt (sm90_xmma, ampere_sgemm, nvjet), CUTLASS, rocBLAS/hipBLASLt (Cijk_).
    Rule{Scope::kCompute, "gemm", F::kGemm},
    Rule{Scope::kCompute, "gemv", F::kGemm},
    Rule{Scope::kCompute, "matmul", F::kGemm},
    Rule{Scope::kCompute, "xmma", F::kGemm},
    Rule{Scope::kCompute, "cijk_", F::kGemm},
    Rule{Scope::kCompute, "cublas", F::kGemm},
    Rule{Scope::kCompute, "hipblaslt", F::kGemm},
    Rule{Scope::kCompute, "nvjet", F::kGemm},
    Rule{Scope::kCompute, "cutlass", F::kGemm},
    Rule{Scope::kCompute, "wvsplitk", F::kGemm},
    Rule{Scope::kCompute, "bmm_", F::kGemm},
    // Optimizer updates.
    Rule{Scope::kCompute, "adam", F::kOptimizer},
    Rule{Scope::kCompute, "sgd", F::kOptimizer},
    Rule{Scope::kCompute, "adagrad", F::kOptimizer},
    Rule{Scope::kCompute, "lamb_", F::kOptimizer},  // not "lambda"
    Rule{Scope::kCompute, "multi_tensor_apply", F::kOptimizer},
    // Sampling (before reduction: ArgMax runs in reduce_kernel).
    Rule{Scope::kCompute, "argmax", F::kSampling},
    Rule{Scope::kCompute, "sampl", F::kSampling},
    Rule{Scope::kCompute, "multinomial", F::kSampling},
    Rule{Scope::kCompute, "top_k", F::kSampling},
    Rule{Scope::kCompute, "topk", F::kSampling},
    Rule{Scope::kCompute, "top_p", F::kSampling},
    Rule{Scope::kCompute, "penalt", F::kSampling},
    // Activations (before elementwise: they run in vectorized_elementwise_kernel).
    Rule{Scope::kCompute, "silu", F::kActivation},
    Rule{Scope::kCompute, "gelu", F::kActivation},
    Rule{Scope::kCompute, "relu", F::kActivation},
    Rule{Scope::kCompute, "swiglu", F::kActivation},
    Rule{Scope::kCompute, "act_and_mul", F::kActivation},
    Rule{Scope::kCompute, "sigmoid", F::kActivation},
    Rule{Scope::kCompute, "tanh", F::kActivation},
    Rule{Scope::kCompute, "threshold", F::kActivation},
    Rule{Scope::kCompute, "clamp_scalar", F::kActivation},
    Rule{Scope::kCompute, "pool", F::kPooling},
    Rule{Scope::kCompute, "radix", F::kSort},
    Rule{Scope::kCompute, "sort", F::kSort},
    Rule{Scope::kCompute, "reduce", F::kReduction},
    Rule{Scope::kCompute, "criterion", F::kReduction},  // losses
    Rule{Scope::kCompute, "nll_loss", F::kReduction},
    Rule{Scope::kCompute, "cross_entropy", F::kReduction},
    Rule{Scope::kCompute, "scan", F::kReduction},
    Rule{Scope::kCompute, "cumsum", F::kReduction},
    Rule{Scope::kCompute, "rocprim", F::kReduction},
    Rule{Scope::kCompute, "cub::", F::kReduction},
    Rule{Scope::kCompute, "gather", F::kIndexing},
    Rule{Scope::kCompute, "scatter", F::kIndexing},
    Rule{Scope::kCompute, "indexselect", F::kIndexing},
    Rule{Scope::kCompute, "index_select", F::kIndexing},  // not the index_t of templates
    Rule{Scope::kCompute, "index_put", F::kIndexing},
    Rule{Scope::kCompute, "index_add", F::kIndexing},
    Rule{Scope::kCompute, "indexing", F::kIndexing},
    Rule{Scope::kCompute, "index_kernel", F::kIndexing},
    Rule{Scope::kCompute, "catarray", F::kIndexing},
    Rule{Scope::kCompute, "concat", F::kIndexing},
    Rule{Scope::kCompute, "permute", F::kIndexing},
    Rule{Scope::kCompute, "transpose", F::kIndexing},
    Rule{Scope::kCompute, "elementwise", F::kElementwise},
    Rule{Scope::kCompute, "pointwise", F::kElementwise},
    Rule{Scope::kCompute, "copy_kernel", F::kElementwise},
    Rule{Scope::kCompute, "fill", F::kElementwise},
    Rule{Scope::kCompute, "dropout", F::kElementwise},
    Rule{Scope::kCompute, "distribution", F::kElementwise},
    // Compiler-generated kernels: Inductor names pointwise/reduction/persistent kernels.
    Rule{Scope::kCompute, "triton_poi", F::kElementwise},
    Rule{Scope::kCompute, "triton_red", F::kReduction},
    Rule{Scope::kCompute, "triton_per", F::kReduction},
    Rule{Scope::kCompute, "nvfuser_reduction", F::kReduction},
    Rule{Scope::kCompute, "nvfuser_pointwise", F::kElementwise},
    Rule{Scope::kCompute, "triton", F::kFused},
    Rule{Scope::kCompute, "nvfuser", F::kFused},
    Rule{Scope::kCompute, "fused", F::kFused},
    // Host runtime and driver calls.
    Rule{Scope::kHost, "synchronize", F::kSync},
    Rule{Scope::kHost, "streamwaitevent", F::kSync},
    Rule{Scope::kHost, "graphlaunch", F::kGraphLaunch},
    Rule{Scope::kHost, "memcpy", F::kCopy},
    Rule{Scope::kHost, "memset", F::kCopy},
    Rule{Scope::kHost, "launch", F::kLaunch},
    Rule{Scope::kHost, "malloc", F::kAlloc},
    Rule{Scope::kHost, "free", F::kAlloc},
    Rule{Scope::kHost, "alloc", F::kAlloc},
    Rule{Scope::kHost, "", F::kRuntimeOther},
};

char Lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool ContainsLower(std::string_view haystack, std::string_view lower_needle) {
  if (lower_needle.empty()) return true;
  auto it = std::search(haystack.begin(), haystack.end(), lower_needle.begin(), lower_needle.end(),
                        [](char a, char b) { return Lower(a) == b; });
  return it != haystack.end();
}

OperatorFamily MatchRules(Scope scope, std::string_view name, OperatorFamily fallback) {
  for (const Rule& rule : kRules) {
    if (rule.scope == scope && ContainsLower(name, rule.pattern)) return rule.family;
  }
  return fallback;
}

struct NameHash {
  using is_transparent = void;
  size_t operator()(std::string_view name) const { return std::hash<std::string_view>()(name); }
};

// The rules scan every pattern through the name; a trace repeats a few thousand names
// over millions of events, so each (scope, name) is matched once per thread.
OperatorFamily FirstMatch(Scope scope, std::string_view name, OperatorFamily fallback) {
  using Memo = std::unordered_map<std::string, OperatorFamily, NameHash, std::equal_to<>>;
  thread_local std::array<Memo, 3> memos;
  Memo& memo = memos[static_cast<size_t>(scope)];
  if (auto it = memo.find(name); it != memo.end()) return it->second;
  if (memo.size() > (1u << 16)) memo.clear();  // bounded: traces with unique names
  const OperatorFamily family = MatchRules(scope, name, fallback);
  memo.emplace(std::string(name), family);
  return family;
}

}  // namespace

std::string_view OperatorFamilyName(OperatorFamily family) {
  static constexpr std::array<std::string_view, kOperatorFamilyCount> kNames = {
      "unnamed",
      "gemm",
      "conv",
      "attention",
      "norm",
      "softmax",
      "rotary",
      "activation",
      "elementwise",
      "reduction",
      "sampling",
      "quantization",
      "moe",
      "embedding",
      "kv_cache",
      "optimizer",
      "pooling",
      "sort",
      "indexing",
      "fused",
      "memcpy",
      "memset",
      "allreduce",
      "allgather",
      "reducescatter",
      "alltoall",
      "sendrecv",
      "broadcast",
      "collective_other",
      "sync",
      "launch",
      "graph_launch",
      "copy",
      "alloc",
      "runtime_other",
      "host_op",
      "frontend",
  };
  return kNames[static_cast<size_t>(family)];
}

OperatorFamily ClassifyOperator(model::Layer layer, std::string_view name) {
  switch (layer) {
    case Layer::kStep:
    case Layer::kFe:
      return F::kFrontend;
    case Layer::kBe:
      return F::kHostOp;
    case Layer::kSync:
      return F::kSync;
    case Layer::kRt:
    case Layer::kDrv:
      if (model::IsGraphLaunchName(name)) return F::kGraphLaunch;
      return FirstMatch(Scope::kHost, name, F::kRuntimeOther);
    case Layer::kMem:
      return ContainsLower(name, "memset") ? F::kMemset : F::kMemcpy;
    case Layer::kComm:
      return FirstMatch(Scope::kCollective, name, F::kCollectiveOther);
    case Layer::kK:
      if (model::IsCollectiveKernelName(name)) {
        return FirstMatch(Scope::kCollective, name, F::kCollectiveOther);
      }
      return FirstMatch(Scope::kCompute, name, F::kUnnamed);
    case Layer::kOther:
      break;
  }
  return F::kUnnamed;
}

bool IsDeviceFamily(OperatorFamily family) {
  return family >= F::kGemm && family <= F::kCollectiveOther;
}

bool IsCollectiveFamily(OperatorFamily family) {
  return family >= F::kAllReduce && family <= F::kCollectiveOther;
}

bool IsComputeFamily(OperatorFamily family) { return family >= F::kGemm && family <= F::kFused; }

}  // namespace teller::localize

namespace teller::localize {

OperatorFamily FamilyCache::Get(model::EventRow row) {
  const size_t layer = static_cast<size_t>(trace_.events.layer[row.value()]);
  const size_t name = trace_.events.name[row.value()].value();
  const size_t strings = trace_.strings.size();
  if (families_.size() != strings * model::kLayerCount) {
    families_.assign(strings * model::kLayerCount, 0xff);
  }
  uint8_t& slot = families_[layer * strings + name];
  if (slot == 0xff) {
    slot = static_cast<uint8_t>(ClassifyOperator(static_cast<model::Layer>(layer),
                                                 trace_.str(trace_.events.name[row.value()])));
  }
  return static_cast<OperatorFamily>(slot);
}

FamilyCoverage ComputeFamilyCoverage(const model::Trace& trace, size_t top_unnamed_count) {
  FamilyCoverage coverage;
  coverage.time_by_family_ns.assign(kOperatorFamilyCount, 0);
  FamilyCache cache(trace);
  std::vector<int64_t> unnamed_by_name;
  const model::EventTable& events = trace.events;
  for (size_t i = 0; i < events.size(); ++i) {
    const model::Layer layer = events.layer[i];
    if (!model::IsDeviceWork(layer)) continue;
    if (events.phase[i] != model::EventPhase::kComplete) continue;
    const int64_t dur = events.dur_ns[i];
    const OperatorFamily family = cache.Get(model::EventRow(static_cast<uint32_t>(i)));
    ++coverage.device_events;
    coverage.device_time_ns += dur;
    coverage.time_by_family_ns[static_cast<size_t>(family)] += dur;
    if (family != OperatorFamily::kUnnamed) {
      coverage.named_time_ns += dur;
    } else {
      if (unnamed_by_name.empty()) unnamed_by_name.assign(trace.strings.size(), 0);
      unnamed_by_name[events.name[i].value()] += dur;
    }
  }
  for (size_t id = 0; id < unnamed_by_name.size(); ++id) {
    if (unnamed_by_name[id] > 0) {
      coverage.top_unnamed.emplace_back(
          std::string(trace.strings.Get(base::StringId(static_cast<uint32_t>(id)))),
          unnamed_by_name[id]);
    }
  }
  std::sort(coverage.top_unnamed.begin(), coverage.top_unnamed.end(),
            [](const auto& a, const auto& b) {
              return a.second != b.second ? a.second > b.second : a.first < b.first;
            });
  if (coverage.top_unnamed.size() > top_unnamed_count) {
    coverage.top_unnamed.resize(top_unnamed_count);
  }
  return coverage;
}

}  // namespace teller::localize
