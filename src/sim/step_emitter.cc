#include "sim/step_emitter.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "sim/interpreter.h"
#include "sim/step_ops.h"

namespace teller::sim {

std::string_view FamilyName(Family family) {
  switch (family) {
    case Family::kGemm:
      return "gemm";
    case Family::kAttention:
      return "attention";
    case Family::kNorm:
      return "norm";
    case Family::kRotary:
      return "rotary";
    case Family::kActivation:
      return "activation";
    case Family::kKvCache:
      return "kv_cache";
    case Family::kEmbedding:
      return "embedding";
    case Family::kSampling:
      return "sampling";
    case Family::kElementwise:
      return "elementwise";
    case Family::kCommunication:
      return "communication";
    case Family::kSsm:
      return "ssm";
    case Family::kMemory:
      return "memory";
    case Family::kSync:
      return "sync";
    case Family::kLaunch:
      return "launch";
    case Family::kHost:
      return "host";
  }
  return "other";
}

void RankBuffer::Clear() {
  ranges.clear();
  api_calls.clear();
  kernels.clear();
  memcpys.clear();
  syncs.clear();
  collectives.clear();
  range_hit.clear();
  api_hit.clear();
  kernel_hit.clear();
  memcpy_hit.clear();
  sync_hit.clear();
  collective_hit.clear();
  kernel_family.clear();
  step_requests.clear();
  any_hit = false;
}
StepEmitter::StepEmitter(const SimConfig& config, Rng* rng) : config_(config), rng_(rng) {
  const ClusterSpec& c = config.cluster;
  world_ = c.world();
  dp_size_ = config.engine == EngineKind::kTorchFsdp ? world_ / (c.tp * c.pp) : 1;
  state_.gpu_speed.resize(static_cast<size_t>(world_));
  for (double& s : state_.gpu_speed) s = std::clamp(rng->Normal(1.0, 0.025), 0.93, 1.07);
  host_ns_.assign(static_cast<size_t>(world_), 0);
  stream_ns_.assign(static_cast<size_t>(world_), 0);
  comm_stream_ns_.assign(static_cast<size_t>(world_), 0);
  state_.correlation.assign(static_cast<size_t>(world_), 1);
  const int32_t comms = config.engine == EngineKind::kTorchFsdp ? 1 : c.pp + c.pp * c.tp;
  state_.sequence.assign(static_cast<size_t>(comms), 0);
  for (int32_t i = 0; i < comms; ++i) {
    state_.communicators.push_back(fmt::format("0x{:016x}", MixSeed(config.seed, 1000 + i)));
  }
}

std::string_view StepEmitter::Name(std::string text) {
  for (const std::string& s : names_) {
    if (s == text) return s;
  }
  names_.push_back(std::move(text));
  return names_.back();
}

// ---------------------------------------------------------------------------
// Op lists: what one stage of the model runs in a step, with real names.
namespace {

constexpr std::string_view kGemmTiny =
    "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8>"
    "(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8::Params)";
constexpr std::string_view kGemmSmall =
    "ampere_bf16_s16816gemm_bf16_64x64_sliced1x2_ldg8_f2f_stages_64x5_tn";
constexpr std::string_view kGemmLarge =
    "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn";
constexpr std::string_view kFusedAddRmsNorm =
    "void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, c10::BFloat16*, "
    "c10::BFloat16 const*, float, int, int)";
constexpr std::string_view kRmsNorm =
    "void vllm::rms_norm_kernel<c10::BFloat16>(c10::BFloat16*, c10::BFloat16 const*, "
    "c10::BFloat16 const*, float, int, int)";
constexpr std::string_view kRotary =
    "void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long const*, c10::BFloat16*, "
    "c10::BFloat16*, c10::BFloat16 const*, int, long, long, int, int, int)";
constexpr std::string_view kReshapeAndCache =
    "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, "
    "(vllm::Fp8KVCacheDataType)0>(__nv_bfloat16 const*, __nv_bfloat16 const*, __nv_bfloat16*, "
    "__nv_bfloat16*, long const*, long, long, long, long, int, int, int, float const*, "
    "float const*)";
constexpr std::string_view kFlashFwd =
    "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, "
    "cutlass::bfloat16_t, Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, "
    "true, false, false, true, true, false, false>(Flash_fwd_params)";
constexpr std::string_view kFlashSplitKv =
    "void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, "
    "cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 4, cutlass::bfloat16_t> >, true, "
    "false, false, false, true, true, false, false>(Flash_fwd_params)";
constexpr std::string_view kFlashCombine =
    "void flash::flash_fwd_splitkv_combine_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, "
    "false, cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 4, cutlass::bfloat16_t> >, 4, "
    "3, true>(Flash_fwd_params)";
constexpr std::string_view kPagedAttention =
    "void vllm::paged_attention_v1_kernel<__nv_bfloat16, __nv_bfloat16, 128, 16, 128, "
    "(vllm::Fp8KVCacheDataType)0, false>(__nv_bfloat16*, __nv_bfloat16 const*, __nv_bfloat16 "
    "const*, __nv_bfloat16 const*, int, float, int const*, int const*, int, float const*, int, "
    "int, int, float const*, float const*, int, int, int)";
constexpr std::string_view kFlashinferPrefill =
    "void flashinfer::BatchPrefillWithPagedKVCacheKernel<KernelTraits<(MaskMode)1, 128u, 1u, 4u, "
    "8u, 2u, 4u, (PosEncodingMode)0, __nv_bfloat16, __nv_bfloat16, __nv_bfloat16, float, int, "
    "DefaultAttention<false, false, false, false> >, PagedParams>(PagedParams)";
constexpr std::string_view kFlashinferDecode =
    "void flashinfer::BatchDecodeWithPagedKVCacheKernel<(PosEncodingMode)0, 2u, 4u, 8u, 16u, 1u, "
    "8u, DefaultAttention<false, false, false, false>, PagedParams>(PagedParams)";
constexpr std::string_view kStoreKvCache = "store_kvcache";
constexpr std::string_view kSdpaFlash =
    "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<128, 128, 64, 4, "
    "false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<128, 128, 64, 4, "
    "cutlass::bfloat16_t> >, true, false, false, false, true, false>(pytorch_flash::"
    "Flash_fwd_params)";
constexpr std::string_view kSdpaSplitKv =
    "void pytorch_flash::flash_fwd_splitkv_kernel<pytorch_flash::Flash_fwd_kernel_traits<128, 64, "
    "128, 4, false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<128, 64, 128, "
    "4, cutlass::bfloat16_t> >, true, false, false, false, true, false, false>(pytorch_flash::"
    "Flash_fwd_params)";
constexpr std::string_view kSiluAndMul =
    "void vllm::act_and_mul_kernel<c10::BFloat16, &vllm::silu_kernel<c10::BFloat16>, true>"
    "(c10::BFloat16*, c10::BFloat16 const*, int)";
constexpr std::string_view kSglSiluAndMul =
    "void flashinfer::activation::act_and_mul_kernel<__nv_bfloat16, &silu>(__nv_bfloat16*, "
    "__nv_bfloat16 const*, int)";
constexpr std::string_view kMulKernel =
    "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<c10::BFloat16, "
    "c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, "
    "at::detail::Array<char*, 3> >(int, at::native::BinaryFunctor<c10::BFloat16, c10::BFloat16, "
    "c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 3>)";
constexpr std::string_view kSiluKernel =
    "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::"
    "silu_kernel(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#4}::"
    "operator()() const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2> >(int, "
    "at::native::(anonymous namespace)::silu_kernel(at::TensorIteratorBase&)::{lambda()#1}::"
    "operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, "
    "at::detail::Array<char*, 2>)";
constexpr std::string_view kPowKernel =
    "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::"
    "pow_tensor_scalar_kernel_impl<float, float>(at::TensorIteratorBase&, float)::{lambda(float)"
    "#1}, at::detail::Array<char*, 2> >(int, at::native::(anonymous namespace)::"
    "pow_tensor_scalar_kernel_impl<float, float>(at::TensorIteratorBase&, float)::{lambda(float)"
    "#1}, at::detail::Array<char*, 2>)";
constexpr std::string_view kMeanKernel =
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, "
    "float, float, float>, unsigned int, float, 4> >(at::native::ReduceOp<float, "
    "at::native::MeanOps<float, float, float, float>, unsigned int, float, 4>)";
constexpr std::string_view kRotaryHf =
    "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::"
    "BinaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::"
    "MulFunctor<float> > >(at::TensorIteratorBase&, at::native::BinaryFunctor<c10::BFloat16, "
    "c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> > const&)::"
    "{lambda(int)#1}>(int, at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor<"
    "c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> "
    "> >(at::TensorIteratorBase&, at::native::BinaryFunctor<c10::BFloat16, c10::BFloat16, "
    "c10::BFloat16, at::native::binary_internal::MulFunctor<float> > const&)::{lambda(int)#1})";
constexpr std::string_view kEmbedding =
    "void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long, unsigned "
    "int, 2, 2, -2, true>(at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, "
    "at::cuda::detail::TensorInfo<c10::BFloat16 const, unsigned int>, at::cuda::detail::"
    "TensorInfo<long const, unsigned int>, int, int, unsigned int, unsigned int, long)";
constexpr std::string_view kDivKernel =
    "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, "
    "float, at::native::binary_internal::DivFunctor<float> >, at::detail::Array<char*, 3> >(int, "
    "at::native::BinaryFunctor<float, float, float, at::native::binary_internal::DivFunctor<float> "
    ">, at::detail::Array<char*, 3>)";
constexpr std::string_view kSoftmax =
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
    "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)";
constexpr std::string_view kArgmax =
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::ArgMaxOps<"
    "float>, unsigned int, long, 4> >(at::native::ReduceOp<float, at::native::ArgMaxOps<float>, "
    "unsigned int, long, 4>)";
constexpr std::string_view kAllReduce =
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)";
constexpr std::string_view kAllGather =
    "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)";
constexpr std::string_view kSendRecv =
    "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)";
constexpr std::string_view kCausalConvFwd =
    "void causal_conv1d_fwd_kernel<Causal_conv1d_fwd_kernel_traits<128, 4, true, c10::BFloat16, "
    "c10::BFloat16> >(ConvParamsBase)";
constexpr std::string_view kCausalConvUpdate =
    "void causal_conv1d_update_kernel<Causal_conv1d_update_kernel_traits<64, 4, c10::BFloat16, "
    "c10::BFloat16> >(ConvParamsBase)";
constexpr std::string_view kSelectiveScanFwd =
    "void selective_scan_fwd_kernel<Selective_Scan_fwd_kernel_traits<128, 16, 1, true, true, true, "
    "true, c10::BFloat16, float, c10::BFloat16> >(SSMParamsBase)";
constexpr std::string_view kSelectiveStateUpdate = "_selective_scan_update_kernel";

}  // namespace

namespace {

struct OpListBuilder {
  std::vector<Op>* ops;
  ForwardMode mode;
  bool piece_ok = true;  // current region is captured by piecewise graphs
  bool full_ok = true;   // current region is captured by a full graph

  Op& Push(Op op) {
    op.graph_piece = op.graph_piece && piece_ok;
    op.graph_full = op.graph_full && full_ok;
    ops->push_back(op);
    return ops->back();
  }
  void Open(std::string_view name, wire::RangeLayer layer, bool graph_full = true,
            bool graph_piece = true) {
    Op op;
    op.kind = OpKind::kOpen;
    op.layer = layer;
    op.name = name;
    op.graph_full = graph_full;
    op.graph_piece = graph_piece;
    Push(op);
  }
  void Close(bool graph_full = true, bool graph_piece = true) {
    Op op;
    op.kind = OpKind::kClose;
    op.graph_full = graph_full;
    op.graph_piece = graph_piece;
    Push(op);
  }
  void Fe(std::string_view name) { Open(name, wire::RangeLayer::kFe); }
  void Be(std::string_view name) { Open(name, wire::RangeLayer::kBe); }
  Op& Kernel(std::string_view name, Family family, Work work, Api api, int64_t n = 0,
                          int64_t k = 0, int16_t layer = -1) {
    Op op;
    op.kind = OpKind::kKernel;
    op.name = name;
    op.family = family;
    op.work = work;
    op.api = api;
    op.n = n;
    op.k = k;
    op.layer_index = layer;
    return Push(op);
  }
  // Backend op wrapping one kernel.
  Op& BeKernel(std::string_view be, std::string_view kernel, Family family, Work work,
                            Api api, int64_t n = 0, int64_t k = 0, int16_t layer = -1) {
    Be(be);
    Kernel(kernel, family, work, api, n, k, layer);
    const size_t index = ops->size() - 1;
    Close();
    return (*ops)[index];
  }
  void Collective(std::string_view be_outer, std::string_view be_inner, std::string_view kernel,
                  Work work, Comm comm, std::string_view coll_op, int16_t layer) {
    if (!be_outer.empty()) Be(be_outer);
    Be(be_inner);
    Op op;
    op.kind = OpKind::kCollective;
    op.name = kernel;
    op.family = Family::kCommunication;
    op.work = work;
    op.comm = comm;
    op.coll_op = coll_op;
    op.layer_index = layer;
    Push(op);
    Close();
    if (!be_outer.empty()) Close();
  }
};

std::string_view GemmName(int64_t tokens) {
  if (tokens <= 16) return kGemmTiny;
  if (tokens <= 256) return kGemmSmall;
  return kGemmLarge;
}

}  // namespace

void StepEmitter::BuildStageOps(int32_t stage, const StepContext& ctx, ForwardMode mode,
                                double reorder_p, std::vector<Op>* ops) {
  ops->clear();
  const ModelSpec& m = config_.model;
  const ClusterSpec& cl = config_.cluster;
  const EngineKind engine = config_.engine;
  const bool fsdp = engine == EngineKind::kTorchFsdp;
  const bool sglang = engine == EngineKind::kSglang;
  const bool v1 = engine == EngineKind::kVllmV1Offline || engine == EngineKind::kVllmV1Online;
  const int64_t tp = cl.tp;
  const int32_t layers_per_stage = m.layers / cl.pp;
  const int32_t first_layer = stage * layers_per_stage;
  const int32_t last_layer = stage == cl.pp - 1 ? m.layers : first_layer + layers_per_stage;
  const std::string_view gemm = GemmName(ctx.tokens);
  const std::string_view decoder = Name(m.arch + "DecoderLayer");
  const std::string_view attn_module = Name(m.arch + "Attention");
  const std::string_view mlp_module = Name(m.arch + "MLP");
  const std::string_view model_module = Name(m.arch + "ForCausalLM");
  const std::string_view norm_module = fsdp ? Name(m.arch + "RMSNorm") : "RMSNorm";
  const int64_t q_width = m.heads * m.head_dim / tp;
  const int64_t kv_width = m.kv_heads * m.head_dim / tp;

  OpListBuilder b{ops, mode};
  auto linear = [&](int64_t n, int64_t k, int16_t layer) {
    b.Be("aten::linear");
    b.Be("aten::t");
    b.Close();
    b.Be("aten::mm");
    b.Kernel(gemm, Family::kGemm, Work::kGemm, Api::kDriverEx, n, k, layer);
    b.Close();
    b.Close();
  };
  auto all_reduce = [&](int16_t layer) {
    if (tp > 1) {
      b.Collective("vllm::all_reduce", "nccl:all_reduce", kAllReduce, Work::kAllReduce, Comm::kTp,
                   "all_reduce", layer);
    }
  };
  auto vllm_norm = [&](bool fused, int64_t width, int16_t layer) {
    b.Fe(norm_module);
    b.BeKernel(fused ? "_C::fused_add_rms_norm" : "_C::rms_norm",
               fused ? kFusedAddRmsNorm : kRmsNorm, Family::kNorm, Work::kElem, Api::kLaunch, width,
               0, layer);
    b.Close();
  };
  auto hf_norm = [&](int64_t width, int16_t layer) {
    b.Fe(norm_module);
    b.BeKernel("aten::pow", kPowKernel, Family::kNorm, Work::kElem, Api::kLaunch, width, 0, layer);
    b.BeKernel("aten::mean", kMeanKernel, Family::kNorm, Work::kElem, Api::kLaunch, width, 0,
               layer);
    b.BeKernel("aten::mul", kMulKernel, Family::kNorm, Work::kElem, Api::kLaunch, width, 0, layer);
    b.Close();
  };
  auto mlp = [&](int16_t layer) {
    b.Fe(mlp_module);
    if (fsdp) {
      linear(m.intermediate, m.hidden, layer);
      linear(m.intermediate, m.hidden, layer);
      b.BeKernel("aten::silu", kSiluKernel, Family::kActivation, Work::kElem, Api::kLaunch,
                 m.intermediate, 0, layer);
      b.BeKernel("aten::mul", kMulKernel, Family::kActivation, Work::kElem, Api::kLaunch,
                 m.intermediate, 0, layer);
      linear(m.hidden, m.intermediate, layer);
    } else {
      b.Fe("MergedColumnParallelLinear");
      linear(2 * m.intermediate / tp, m.hidden, layer);
      b.Close();
      b.Fe("SiluAndMul");
      b.BeKernel(sglang ? "sgl_kernel::silu_and_mul" : "_C::silu_and_mul",
                 sglang ? kSglSiluAndMul : kSiluAndMul, Family::kActivation, Work::kElem,
                 Api::kLaunch, m.intermediate / tp, 0, layer);
      b.Close();
      b.Fe("RowParallelLinear");
      linear(m.hidden, m.intermediate / tp, layer);
      all_reduce(layer);
      b.Close();
    }
    b.Close();
  };
  auto attention_kernels = [&](int16_t layer) {
    const int64_t parts = (ctx.has_prefill ? 1 : 0) | (ctx.has_decode ? 2 : 0);
    if (fsdp) {
      b.Be("aten::scaled_dot_product_attention");
      b.BeKernel("aten::_scaled_dot_product_flash_attention",
                 ctx.has_prefill ? kSdpaFlash : kSdpaSplitKv, Family::kAttention, Work::kAttention,
                 Api::kLaunchEx, parts, 0, layer);
      b.Close();
      return;
    }
    b.Fe(sglang ? "RadixAttention" : "Attention");  // not called inside compiled pieces
    b.piece_ok = false;
    if (sglang) {
      b.BeKernel("aten::index_put_", kStoreKvCache, Family::kKvCache, Work::kCache, Api::kLaunch, 0,
                 0, layer);
      if (ctx.has_prefill) {
        b.BeKernel("flashinfer::batch_prefill_with_paged_kv_cache", kFlashinferPrefill,
                   Family::kAttention, Work::kAttention, Api::kLaunchEx, 1, 0, layer);
      }
      if (ctx.has_decode) {
        b.BeKernel("flashinfer::batch_decode_with_paged_kv_cache", kFlashinferDecode,
                   Family::kAttention, Work::kAttention, Api::kLaunchEx, 2, 0, layer)
            .decode_path = true;
      }
    } else {
      b.Be("vllm::unified_attention_with_output");
      b.BeKernel("_C_cache_ops::reshape_and_cache_flash", kReshapeAndCache, Family::kKvCache,
                 Work::kCache, Api::kLaunch, 0, 0, layer);
      if (v1) {
        b.Be("vllm_flash_attn::_flash_attn_varlen_forward");
        b.Kernel(kFlashSplitKv, Family::kAttention, Work::kAttention, Api::kLaunchEx, parts, 0,
                 layer);
        if (ctx.has_decode && ctx.decode_seqs > 16) {  // split-KV only pays off for big batches
          b.Kernel(kFlashCombine, Family::kAttention, Work::kAttnCombine, Api::kLaunchEx, 0, 0,
                   layer);
        }
        b.Close();
      } else {
        if (ctx.has_prefill) {
          b.BeKernel("vllm_flash_attn::_flash_attn_varlen_forward", kFlashFwd, Family::kAttention,
                     Work::kAttention, Api::kLaunchEx, 1, 0, layer);
        }
        if (ctx.has_decode) {
          b.BeKernel("_C::paged_attention_v1", kPagedAttention, Family::kAttention,
                     Work::kAttention, Api::kLaunch, 2, 0, layer)
              .decode_path = true;
        }
      }
      b.Close();
    }
    b.piece_ok = true;
    b.Close();
  };
  auto qk_norm_rotary = [&](int16_t layer, bool reorder) {
    const size_t before = ops->size();
    auto norms = [&] {
      if (fsdp) {
        b.BeKernel("aten::mul", kMulKernel, Family::kNorm, Work::kElem, Api::kLaunch, q_width, 0,
                   layer);
        b.BeKernel("aten::mul", kMulKernel, Family::kNorm, Work::kElem, Api::kLaunch, kv_width, 0,
                   layer);
        return;
      }
      vllm_norm(false, q_width, layer);
      vllm_norm(false, kv_width, layer);
    };
    auto rotary = [&] {
      if (fsdp) {
        b.BeKernel("aten::mul", kRotaryHf, Family::kRotary, Work::kElem, Api::kLaunch,
                   q_width + kv_width, 0, layer);
        return;
      }
      b.Fe("RotaryEmbedding");
      b.BeKernel("_C::rotary_embedding", kRotary, Family::kRotary, Work::kElem, Api::kLaunch,
                 q_width + kv_width, 0, layer);
      b.Close();
    };
    if (reorder) {
      rotary();
      norms();
      for (size_t i = before; i < ops->size(); ++i) (*ops)[i].reordered = true;
    } else {
      norms();
      rotary();
    }
  };

  const std::string_view runner =
      v1 ? "GPUModelRunner.execute_model"
         : (sglang ? "ModelRunner.forward"
                   : (fsdp ? "GenerationMixin._sample" : "ModelRunner.execute_model"));
  b.Open(runner, wire::RangeLayer::kFe, false, false);
  // Inputs to the device.
  b.full_ok = false;
  b.piece_ok = false;
  b.Fe(v1 ? "GPUModelRunner._prepare_inputs"
          : (sglang ? "ForwardBatch.init_new"
                    : (fsdp ? "prepare_inputs_for_generation" : "ModelInputForGPUBuilder.build")));
  const int copies = fsdp ? 2 : (sglang ? 4 : 5);
  for (int i = 0; i < copies; ++i) {
    b.Be("aten::copy_");
    Op op;
    op.kind = OpKind::kCopyIn;
    op.n = i < 2 ? 8 : 4;
    b.Push(op);
    b.Close();
  }
  b.Close();
  if (stage > 0) {
    Op op;
    op.kind = OpKind::kRecv;
    op.name = kSendRecv;
    op.family = Family::kCommunication;
    op.work = Work::kSendRecv;
    op.comm = Comm::kPp;
    b.Push(op);
  }
  if (mode == ForwardMode::kFullGraph) {
    b.Fe(sglang ? "CudaGraphRunner.replay" : "CUDAGraphRunner.forward");
  }
  b.full_ok = true;
  b.piece_ok = true;
  b.Open(model_module, wire::RangeLayer::kFe, true, false);
  if (stage == 0) {
    b.Fe("VocabParallelEmbedding");
    b.BeKernel("aten::embedding", kEmbedding, Family::kEmbedding, Work::kEmbed, Api::kLaunch);
    if (!fsdp) all_reduce(-1);
    b.Close();
  }
  for (int32_t layer = first_layer; layer < last_layer; ++layer) {
    const int16_t L = static_cast<int16_t>(layer);
    if (fsdp) {
      b.Fe("FullyShardedDataParallel");
      b.Be("FSDP::pre_forward");
      b.Collective("", "nccl:_all_gather_base", kAllGather, Work::kParamGather, Comm::kDp,
                   "_allgather_base", L);
      b.Close();
    }
    const bool mamba = IsMamba(m, layer);
    b.Fe(mamba ? std::string_view("MambaDecoderLayer") : decoder);
    if (fsdp) {
      hf_norm(m.hidden, L);
    } else {
      vllm_norm(layer != 0, m.hidden, L);
    }
    if (mamba) {
      b.Fe("MambaMixer2");
      b.Fe("MergedColumnParallelLinear");
      linear(4 * m.hidden / tp, m.hidden, L);
      b.Close();
      b.piece_ok = false;
      b.Be("vllm::mamba_mixer2");
      if (ctx.has_prefill) {
        b.BeKernel("_C::causal_conv1d_fwd", kCausalConvFwd, Family::kSsm, Work::kConv, Api::kLaunch,
                   0, 0, L);
        b.BeKernel("_C::selective_scan_fwd", kSelectiveScanFwd, Family::kSsm, Work::kSsmScan,
                   Api::kLaunch, 0, 0, L);
      }
      if (ctx.has_decode) {
        b.BeKernel("_C::causal_conv1d_update", kCausalConvUpdate, Family::kSsm, Work::kConv,
                   Api::kLaunch, 0, 0, L)
            .decode_path = true;
        b.BeKernel("vllm::selective_state_update", kSelectiveStateUpdate, Family::kSsm,
                   Work::kSsmUpdate, Api::kLaunch, 0, 0, L)
            .decode_path = true;
      }
      b.Close();
      b.piece_ok = true;
      b.Fe("MixerRMSNormGated");
      b.BeKernel("_C::rms_norm", kRmsNorm, Family::kNorm, Work::kElem, Api::kLaunch,
                 2 * m.hidden / tp, 0, L);
      b.Close();
      b.Fe("RowParallelLinear");
      linear(m.hidden, 2 * m.hidden / tp, L);
      all_reduce(L);
      b.Close();
      b.Close();
    } else {
      b.Fe(attn_module);
      if (fsdp) {
        linear(q_width, m.hidden, L);
        linear(kv_width, m.hidden, L);
        linear(kv_width, m.hidden, L);
      } else {
        b.Fe("QKVParallelLinear");
        linear(q_width + 2 * kv_width, m.hidden, L);
        b.Close();
        b.Be("aten::split_with_sizes");
        b.Close();
      }
      qk_norm_rotary(L, reorder_p > 0 && rng_->Bernoulli(reorder_p));
      attention_kernels(L);
      if (fsdp) {
        linear(m.hidden, q_width, L);
      } else {
        b.Fe("RowParallelLinear");
        linear(m.hidden, q_width, L);
        all_reduce(L);
        b.Close();
      }
      b.Close();
    }
    if (fsdp) {
      hf_norm(m.hidden, L);
    } else {
      vllm_norm(true, m.hidden, L);
    }
    mlp(L);
    b.Close();  // decoder layer
    if (fsdp) b.Close();
  }
  if (stage == cl.pp - 1) {
    if (fsdp) {
      hf_norm(m.hidden, -1);
    } else {
      vllm_norm(true, m.hidden, -1);
    }
  }
  b.Close(true, false);  // model
  if (mode == ForwardMode::kFullGraph) b.Close(false, false);
  b.full_ok = false;
  b.piece_ok = false;
  if (stage == cl.pp - 1) {
    b.Fe("LogitsProcessor");
    b.Be("aten::linear");
    b.Be("aten::t");
    b.Close();
    b.Be("aten::mm");
    b.Kernel(GemmName(ctx.seqs), Family::kGemm, Work::kLmHead, Api::kDriverEx, m.vocab / tp,
             m.hidden);
    b.Close();
    b.Close();
    if (tp > 1) {
      b.Collective("", "nccl:all_gather", kAllGather, Work::kAllGather, Comm::kTp, "all_gather",
                   -1);
    }
    b.Close();
    b.Fe("Sampler");
    b.BeKernel("aten::div", kDivKernel, Family::kSampling, Work::kSample, Api::kLaunch);
    b.BeKernel("aten::softmax", kSoftmax, Family::kSampling, Work::kSample, Api::kLaunch);
    b.BeKernel("aten::argmax", kArgmax, Family::kSampling, Work::kSample, Api::kLaunch);
    b.Close();
    b.Be("aten::to");
    b.Be("aten::copy_");
    Op out;
    out.kind = OpKind::kCopyOut;
    b.Push(out);
    b.Close();
    b.Close();
    Op sync;
    sync.kind = OpKind::kSyncOut;
    b.Push(sync);
  } else {
    Op op;
    op.kind = OpKind::kSend;
    op.name = kSendRecv;
    op.family = Family::kCommunication;
    op.work = Work::kSendRecv;
    op.comm = Comm::kPp;
    op.send = true;
    b.Push(op);
  }
  b.Close(false, false);  // runner
}

StepResult StepEmitter::EmitStep(const StepPlan& plan, const std::vector<Request>& requests,
                                 int64_t start_ns, const std::vector<ActiveFault>& faults,
                                 bool cold_start, double benign_pause_ms,
                                 std::vector<RankBuffer>* buffers) {
  StepResult result;
  const ClusterSpec& cl = config_.cluster;
  const bool fsdp = config_.engine == EngineKind::kTorchFsdp;
  buffers->resize(static_cast<size_t>(world_));
  for (int32_t r = 0; r < world_; ++r) {
    (*buffers)[static_cast<size_t>(r)].Clear();
    (*buffers)[static_cast<size_t>(r)].rank = r;
  }

  // The work of the step per data-parallel rank.
  std::vector<StepContext> ctx(static_cast<size_t>(dp_size_));
  for (const StepEntry& e : plan.entries) {
    StepContext& c = ctx[static_cast<size_t>(fsdp ? e.dp_rank : 0)];
    c.tokens += e.tokens;
    if (e.samples) ++c.seqs;
    if (e.prefill && !e.misrouted) {
      c.has_prefill = true;
      c.prefill_tokens += e.tokens;
      c.prefill_attn += e.tokens * (e.context_before + e.tokens / 2.0);
    } else {
      c.has_decode = true;
      ++c.decode_seqs;
      c.decode_ctx += e.context_before + e.tokens;
      if (e.misrouted) c.has_misroute = true;
    }
  }
  StepContext shape;  // structure of the op list (union over data-parallel ranks)
  for (StepContext& c : ctx) {
    if (c.tokens == 0) {  // warm-up or an idle FSDP rank: a dummy decode batch
      c.tokens = plan.warmup ? 8 : 1;
      c.seqs = c.tokens;
      c.decode_seqs = c.tokens;
      c.decode_ctx = 16.0 * c.tokens;
      c.has_decode = true;
    }
    shape.tokens = std::max(shape.tokens, c.tokens);
    shape.seqs = std::max(shape.seqs, c.seqs);
    shape.has_prefill |= c.has_prefill;
    shape.has_decode |= c.has_decode;
    shape.has_misroute |= c.has_misroute;
  }

  std::vector<RankState> st(static_cast<size_t>(world_));
  for (int32_t r = 0; r < world_; ++r) {
    RankState& s = st[static_cast<size_t>(r)];
    s.rank = r;
    s.dp = fsdp ? r : 0;
    s.buf = &(*buffers)[static_cast<size_t>(r)];
    s.host = std::max(host_ns_[static_cast<size_t>(r)], start_ns);
    s.stream = stream_ns_[static_cast<size_t>(r)];
    s.comm_stream = comm_stream_ns_[static_cast<size_t>(r)];
    if (cold_start) {
      s.host_factor = 1.5;
      s.allocator_slow = true;
      s.alloc_fraction = 0.12;
    }
  }
  double link_factor = 1.0, loss_p = 0.0, reorder_p = 0.0;
  int64_t pause_ns = static_cast<int64_t>(benign_pause_ms * kMs);
  bool pause_hit = false;
  const int64_t typical_step = state_.last_step_ns > 0 ? state_.last_step_ns : 20 * kMs;
  for (const ActiveFault& f : faults) {
    for (RankState& s : st) {
      const bool target = f.rank < 0 || f.rank == s.rank;
      switch (f.mechanism) {
        case Mechanism::kGpuThrottle:
          if (target) {
            s.kernel_factor *= 1.0 + f.magnitude;
            s.kernel_hit = true;
          }
          break;
        case Mechanism::kKernelSlowdown:
          if (target) {
            s.slow_family = f.family;
            s.family_factor = 1.0 + f.magnitude;
          }
          break;
        case Mechanism::kKernelContention:
          if (target) s.contention = f.magnitude;
          break;
        case Mechanism::kIllegalMemoryAccess:
          if (f.rank == s.rank) s.crash_layer = f.crash_layer;
          break;
        case Mechanism::kLaunchLatency:
          if (target) s.launch_factor = 1.0 + f.magnitude;
          break;
        case Mechanism::kMemcpyLatency:
          if (target) {
            s.copy_factor = 1.0 + f.magnitude;
            s.copy_hit = true;
          }
          break;
        case Mechanism::kSyncLatency:
          if (target) {
            s.sync_extra = f.magnitude;
            s.sync_hit = true;
          }
          break;
        case Mechanism::kDriverRetry:
          if (target) s.retry_p = f.magnitude;
          break;
        case Mechanism::kHostMemoryPressure:
          if (NodeOfRank(cl, s.rank) == f.node) {
            s.host_factor *= 1.0 + f.magnitude;
            s.host_pressure = true;
            s.copy_hit = true;
          }
          break;
        case Mechanism::kAllocatorSlowPath:
        case Mechanism::kMemoryFragmentation:
          if (target) {
            s.allocator_slow = true;
            s.fragmentation = f.mechanism == Mechanism::kMemoryFragmentation;
            s.alloc_fraction = f.magnitude;
            s.alloc_hit = true;
          }
          break;
        case Mechanism::kStragglerRank:
          if (f.rank == s.rank) {
            s.host_factor *= 1.0 + f.magnitude;
            s.straggler = true;
          }
          break;
        case Mechanism::kNcclTimeout:
          if (f.rank == s.rank) s.hang_layer = f.crash_layer;
          break;
        default:
          break;
      }
    }
    switch (f.mechanism) {
      case Mechanism::kLinkDegradation:
        link_factor = 1.0 + f.magnitude;
        loss_p = 0.12;
        break;
      case Mechanism::kOperatorReorder:
        reorder_p = f.magnitude;
        break;
      case Mechanism::kEnginePause:
        pause_ns += static_cast<int64_t>(f.magnitude * typical_step * rng_->Uniform(0.7, 1.3));
        pause_hit = true;
        break;
      default:
        break;
    }
  }

  // Rank 0 drives the engine: schedule, then broadcast the step to the workers.
  RankState& driver = st[0];
  const int64_t step_begin = driver.host;
  const std::string_view schedule_name =
      config_.engine == EngineKind::kSglang
          ? "Scheduler.get_next_batch_to_run"
          : (fsdp ? "GenerationMixin.prepare_batch" : "Scheduler.schedule");
  {
    const int64_t sched_start = driver.host + static_cast<int64_t>(rng_->Uniform(5, 20) * kUs);
    int64_t dur = static_cast<int64_t>((120.0 + 6.0 * plan.entries.size()) * kUs *
                                       rng_->LogNormal(0, 0.2) * driver.host_factor);
    dur += pause_ns;
    wire::HostRangeRecord h;
    h.clock = wire::ClockDomain::kMonotonic;
    h.start_ns = sched_start;
    h.end_ns = sched_start + dur;
    h.layer = wire::RangeLayer::kFe;
    h.name = schedule_name;
    driver.buf->ranges.push_back(h);
    driver.buf->range_hit.push_back(pause_hit);
    if (pause_hit) driver.buf->any_hit = true;
    driver.host = sched_start + dur + 5 * kUs;
  }
  const int64_t dispatch = driver.host;
  std::vector<int64_t> step_start(static_cast<size_t>(world_));
  step_start[0] = step_begin;
  for (int32_t r = 1; r < world_; ++r) {
    RankState& s = st[static_cast<size_t>(r)];
    s.host = std::max(s.host, dispatch + static_cast<int64_t>(rng_->Uniform(25, 90) * kUs));
    step_start[static_cast<size_t>(r)] = s.host;
  }

  ForwardMode mode = plan.phase == StepPhase::kDecode ? config_.engine_spec.decode_mode
                                                      : config_.engine_spec.prefill_mode;
  if (cold_start) mode = ForwardMode::kEager;

  std::vector<Op> ops;
  std::vector<PendingSend> pp_in(static_cast<size_t>(cl.tp)), pp_out(static_cast<size_t>(cl.tp));
  const int32_t stages = fsdp ? 1 : cl.pp;
  for (int32_t stage = 0; stage < stages; ++stage) {
    std::vector<RankState*> group;
    std::vector<const StepContext*> group_ctx;
    if (fsdp) {
      for (RankState& s : st) {
        group.push_back(&s);
        group_ctx.push_back(&ctx[static_cast<size_t>(s.dp)]);
      }
    } else {
      for (int32_t t = 0; t < cl.tp; ++t) {
        group.push_back(&st[static_cast<size_t>(stage * cl.tp + t)]);
        group_ctx.push_back(&ctx[0]);
      }
    }
    // Illegal access / hang: the fault's layer index is within the stage's layers.
    BuildStageOps(stage, fsdp ? shape : ctx[0], mode, reorder_p, &ops);
    std::swap(pp_in, pp_out);
    for (auto& p : pp_out) p = PendingSend();
    StageRun run;
    run.ops = &ops;
    run.group = group;
    run.ctx = group_ctx;
    run.mode = mode;
    run.link_factor = link_factor;
    run.link_loss_p = loss_p;
    run.pp_in = &pp_in;
    run.pp_out = &pp_out;
    InterpretStage(config_, rng_, &state_, run, &result);
  }

  // Close what a crash left open, at the time the engine kills its workers.
  int64_t kill_ns = 0;
  if (result.crashed) {
    for (const RankState& s : st) kill_ns = std::max({kill_ns, s.host, s.stream, s.comm_stream});
    for (RankState& s : st) {
      s.host = std::max(s.host, kill_ns);
      while (!s.open.empty()) {
        auto [op, start] = s.open.back();
        s.open.pop_back();
        s.open_hit.pop_back();
        wire::HostRangeRecord h;
        h.clock = wire::ClockDomain::kMonotonic;
        h.start_ns = start;
        h.end_ns = kill_ns;
        h.layer = op->layer;
        h.name = op->name;
        s.buf->ranges.push_back(h);
        s.buf->range_hit.push_back(false);
      }
    }
  }

  // The engine has the output once the last stage synchronized.
  int64_t output_ns = 0;
  const int32_t last_first = fsdp ? 0 : (cl.pp - 1) * cl.tp;
  for (int32_t r = last_first; r < world_; ++r) {
    output_ns = std::max(output_ns, st[static_cast<size_t>(r)].host);
  }
  if (!result.crashed) {
    driver.host =
        std::max(driver.host, output_ns + static_cast<int64_t>(rng_->Uniform(20, 60) * kUs));
    const int64_t dur = static_cast<int64_t>((60.0 + 9.0 * plan.entries.size()) * kUs *
                                             rng_->LogNormal(0, 0.2) * driver.host_factor);
    wire::HostRangeRecord h;
    h.clock = wire::ClockDomain::kMonotonic;
    h.start_ns = driver.host;
    h.end_ns = driver.host + dur;
    h.layer = wire::RangeLayer::kFe;
    h.name =
        config_.engine == EngineKind::kSglang
            ? "Scheduler.process_batch_result"
            : (config_.engine == EngineKind::kVllmV0
                   ? "LLMEngine._process_model_outputs"
                   : (fsdp ? "GenerationMixin.update_outputs" : "Scheduler.update_from_output"));
    driver.buf->ranges.push_back(h);
    driver.buf->range_hit.push_back(false);
    driver.host += dur + 3 * kUs;
  }

  // STEP ranges with the request ids and phase of each rank's batch.
  const std::string_view step_name =
      config_.engine == EngineKind::kSglang
          ? "Scheduler.run_batch"
          : (config_.engine == EngineKind::kVllmV0
                 ? "LLMEngine.step"
                 : (fsdp ? "GenerationMixin.generate_step" : "EngineCore.step"));
  for (RankState& s : st) {
    RankBuffer& buf = *s.buf;
    for (const StepEntry& e : plan.entries) {
      if (fsdp && e.dp_rank != s.dp) continue;
      buf.step_requests.push_back(requests[static_cast<size_t>(e.request)].id);
    }
    const StepPhase phase = fsdp ? plan.PhaseOfRank(s.dp) : plan.phase;
    buf.step_args = {wire::Arg::Int(wire::kStepArgStep, plan.step),
                     wire::Arg::String(wire::kStepArgPhase, PhaseName(phase)),
                     wire::Arg::StringList(wire::kStepArgRequests, buf.step_requests),
                     wire::Arg::Int(wire::kStepArgTokens, plan.prefill_tokens + plan.decode_tokens)};
    s.host = std::max(s.host, result.crashed ? kill_ns : s.host) + 4 * kUs;
    wire::HostRangeRecord h;
    h.clock = wire::ClockDomain::kMonotonic;
    h.start_ns = step_start[static_cast<size_t>(s.rank)];
    h.end_ns = s.host;
    h.layer = wire::RangeLayer::kStep;
    h.name = step_name;
    h.range_id = static_cast<uint64_t>(plan.step) + 1;
    h.args = buf.step_args;
    buf.ranges.push_back(h);
    buf.range_hit.push_back(false);
    host_ns_[static_cast<size_t>(s.rank)] = s.host;
    stream_ns_[static_cast<size_t>(s.rank)] = s.stream;
    comm_stream_ns_[static_cast<size_t>(s.rank)] = s.comm_stream;
  }
  result.end_ns = driver.host;
  for (size_t i = 0; i < st[0].buf->kernels.size(); ++i) {
    result.gpu_busy_ns += st[0].buf->kernels[i].end_ns - st[0].buf->kernels[i].start_ns;
  }
  if (!plan.warmup && !cold_start && !result.crashed && faults.empty()) {
    state_.last_step_ns = result.end_ns - start_ns;
  }
  return result;
}

}  // namespace teller::sim
