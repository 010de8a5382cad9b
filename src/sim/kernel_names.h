// Real kernel names of the simulated engines (CUTLASS/cuBLAS GEMMs, vLLM custom ops,
// FlashAttention, FlashInfer, PyTorch native kernels, NCCL, Mamba), as CUPTI reports them.
#pragma once

#include <cstdint>
#include <string_view>

namespace teller::sim::kernels {

inline constexpr std::string_view kGemmTiny =
    "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8>"
    "(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8::Params)";
inline constexpr std::string_view kGemmSmall =
    "ampere_bf16_s16816gemm_bf16_64x64_sliced1x2_ldg8_f2f_stages_64x5_tn";
inline constexpr std::string_view kGemmLarge =
    "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn";
inline constexpr std::string_view kFusedAddRmsNorm =
    "void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, c10::BFloat16*, "
    "c10::BFloat16 const*, float, int, int)";
inline constexpr std::string_view kRmsNorm =
    "void vllm::rms_norm_kernel<c10::BFloat16>(c10::BFloat16*, c10::BFloat16 const*, "
    "c10::BFloat16 const*, float, int, int)";
inline constexpr std::string_view kRotary =
    "void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long const*, c10::BFloat16*, "
    "c10::BFloat16*, c10::BFloat16 const*, int, long, long, int, int, int)";
inline constexpr std::string_view kReshapeAndCache =
    "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, "
    "(vllm::Fp8KVCacheDataType)0>(__nv_bfloat16 const*, __nv_bfloat16 const*, __nv_bfloat16*, "
    "__nv_bfloat16*, long const*, long, long, long, long, int, int, int, float const*, "
    "float const*)";
inline constexpr std::string_view kFlashFwd =
    "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, "
    "cutlass::bfloat16_t, Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, "
    "true, false, false, true, true, false, false>(Flash_fwd_params)";
inline constexpr std::string_view kFlashSplitKv =
    "void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, "
    "cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 4, cutlass::bfloat16_t> >, true, "
    "false, false, false, true, true, false, false>(Flash_fwd_params)";
inline constexpr std::string_view kFlashCombine =
    "void flash::flash_fwd_splitkv_combine_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, "
    "false, cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 4, cutlass::bfloat16_t> >, 4, "
    "3, true>(Flash_fwd_params)";
inline constexpr std::string_view kPagedAttention =
    "void vllm::paged_attention_v1_kernel<__nv_bfloat16, __nv_bfloat16, 128, 16, 128, "
    "(vllm::Fp8KVCacheDataType)0, false>(__nv_bfloat16*, __nv_bfloat16 const*, __nv_bfloat16 "
    "const*, __nv_bfloat16 const*, int, float, int const*, int const*, int, float const*, int, "
    "int, int, float const*, float const*, int, int, int)";
inline constexpr std::string_view kFlashinferPrefill =
    "void flashinfer::BatchPrefillWithPagedKVCacheKernel<KernelTraits<(MaskMode)1, 128u, 1u, 4u, "
    "8u, 2u, 4u, (PosEncodingMode)0, __nv_bfloat16, __nv_bfloat16, __nv_bfloat16, float, int, "
    "DefaultAttention<false, false, false, false> >, PagedParams>(PagedParams)";
inline constexpr std::string_view kFlashinferDecode =
    "void flashinfer::BatchDecodeWithPagedKVCacheKernel<(PosEncodingMode)0, 2u, 4u, 8u, 16u, 1u, "
    "8u, DefaultAttention<false, false, false, false>, PagedParams>(PagedParams)";
inline constexpr std::string_view kStoreKvCache = "store_kvcache";
inline constexpr std::string_view kSdpaFlash =
    "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<128, 128, 64, 4, "
    "false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<128, 128, 64, 4, "
    "cutlass::bfloat16_t> >, true, false, false, false, true, false>(pytorch_flash::"
    "Flash_fwd_params)";
inline constexpr std::string_view kSdpaSplitKv =
    "void pytorch_flash::flash_fwd_splitkv_kernel<pytorch_flash::Flash_fwd_kernel_traits<128, 64, "
    "128, 4, false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<128, 64, 128, "
    "4, cutlass::bfloat16_t> >, true, false, false, false, true, false, false>(pytorch_flash::"
    "Flash_fwd_params)";
inline constexpr std::string_view kSiluAndMul =
    "void vllm::act_and_mul_kernel<c10::BFloat16, &vllm::silu_kernel<c10::BFloat16>, true>"
    "(c10::BFloat16*, c10::BFloat16 const*, int)";
inline constexpr std::string_view kSglSiluAndMul =
    "void flashinfer::activation::act_and_mul_kernel<__nv_bfloat16, &silu>(__nv_bfloat16*, "
    "__nv_bfloat16 const*, int)";
inline constexpr std::string_view kMulKernel =
    "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<c10::BFloat16, "
    "c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, "
    "at::detail::Array<char*, 3> >(int, at::native::BinaryFunctor<c10::BFloat16, c10::BFloat16, "
    "c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 3>)";
inline constexpr std::string_view kSiluKernel =
    "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::"
    "silu_kernel(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#4}::"
    "operator()() const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2> >(int, "
    "at::native::(anonymous namespace)::silu_kernel(at::TensorIteratorBase&)::{lambda()#1}::"
    "operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, "
    "at::detail::Array<char*, 2>)";
inline constexpr std::string_view kPowKernel =
    "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::"
    "pow_tensor_scalar_kernel_impl<float, float>(at::TensorIteratorBase&, float)::{lambda(float)"
    "#1}, at::detail::Array<char*, 2> >(int, at::native::(anonymous namespace)::"
    "pow_tensor_scalar_kernel_impl<float, float>(at::TensorIteratorBase&, float)::{lambda(float)"
    "#1}, at::detail::Array<char*, 2>)";
inline constexpr std::string_view kMeanKernel =
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, "
    "float, float, float>, unsigned int, float, 4> >(at::native::ReduceOp<float, "
    "at::native::MeanOps<float, float, float, float>, unsigned int, float, 4>)";
inline constexpr std::string_view kRotaryHf =
    "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::"
    "BinaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::"
    "MulFunctor<float> > >(at::TensorIteratorBase&, at::native::BinaryFunctor<c10::BFloat16, "
    "c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> > const&)::"
    "{lambda(int)#1}>(int, at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor<"
    "c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> "
    "> >(at::TensorIteratorBase&, at::native::BinaryFunctor<c10::BFloat16, c10::BFloat16, "
    "c10::BFloat16, at::native::binary_internal::MulFunctor<float> > const&)::{lambda(int)#1})";
inline constexpr std::string_view kEmbedding =
    "void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long, unsigned "
    "int, 2, 2, -2, true>(at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, "
    "at::cuda::detail::TensorInfo<c10::BFloat16 const, unsigned int>, at::cuda::detail::"
    "TensorInfo<long const, unsigned int>, int, int, unsigned int, unsigned int, long)";
inline constexpr std::string_view kDivKernel =
    "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, "
    "float, at::native::binary_internal::DivFunctor<float> >, at::detail::Array<char*, 3> >(int, "
    "at::native::BinaryFunctor<float, float, float, at::native::binary_internal::DivFunctor<float> "
    ">, at::detail::Array<char*, 3>)";
inline constexpr std::string_view kSoftmax =
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
    "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)";
inline constexpr std::string_view kArgmax =
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::ArgMaxOps<"
    "float>, unsigned int, long, 4> >(at::native::ReduceOp<float, at::native::ArgMaxOps<float>, "
    "unsigned int, long, 4>)";
inline constexpr std::string_view kAllReduce =
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)";
inline constexpr std::string_view kAllGather =
    "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)";
inline constexpr std::string_view kSendRecv =
    "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)";
inline constexpr std::string_view kCausalConvFwd =
    "void causal_conv1d_fwd_kernel<Causal_conv1d_fwd_kernel_traits<128, 4, true, c10::BFloat16, "
    "c10::BFloat16> >(ConvParamsBase)";
inline constexpr std::string_view kCausalConvUpdate =
    "void causal_conv1d_update_kernel<Causal_conv1d_update_kernel_traits<64, 4, c10::BFloat16, "
    "c10::BFloat16> >(ConvParamsBase)";
inline constexpr std::string_view kSelectiveScanFwd =
    "void selective_scan_fwd_kernel<Selective_Scan_fwd_kernel_traits<128, 16, 1, true, true, true, "
    "true, c10::BFloat16, float, c10::BFloat16> >(SSMParamsBase)";
inline constexpr std::string_view kSelectiveStateUpdate = "_selective_scan_update_kernel";

// The modern preset (Hopper / Blackwell, FP8, MoE, NVLS). vLLM's CUTLASS 3.x FP8 GEMM
// (scaled_mm_c3x, sm90_fp8_config_default and the small-M config), cuBLAS nvjet GEMMs
// and the trtllm-gen MoE, routing and attention kernels as the B200 vLLM trace in
// ../shared/real-traces prints them, vLLM's Triton fused MoE and routing ops, torch
// symmetric memory's NVLS all-reduce.
inline constexpr std::string_view kGemmFp8Sm90Large =
    "void cutlass::device_kernel<vllm::cutlass_3x_gemm_sm90_fp8<cutlass::float_e4m3_t, "
    "cutlass::bfloat16_t, vllm::c3x::ScaledEpilogue, cute::tuple<cute::C<128>, cute::C<128>, "
    "cute::C<128> >, cute::tuple<cute::C<2>, cute::C<1>, cute::C<1> >, "
    "cutlass::gemm::KernelTmaWarpSpecializedPingpongFP8FastAccum, "
    "cutlass::epilogue::TmaWarpSpecialized, false>::GemmKernel>(vllm::cutlass_3x_gemm_sm90_fp8<"
    "cutlass::float_e4m3_t, cutlass::bfloat16_t, vllm::c3x::ScaledEpilogue, cute::tuple<"
    "cute::C<128>, cute::C<128>, cute::C<128> >, cute::tuple<cute::C<2>, cute::C<1>, cute::C<1> "
    ">, cutlass::gemm::KernelTmaWarpSpecializedPingpongFP8FastAccum, "
    "cutlass::epilogue::TmaWarpSpecialized, false>::GemmKernel::Params)";
inline constexpr std::string_view kGemmFp8Sm90Small =
    "void cutlass::device_kernel<vllm::cutlass_3x_gemm_sm90_fp8<cutlass::float_e4m3_t, "
    "cutlass::bfloat16_t, vllm::c3x::ScaledEpilogue, cute::tuple<cute::C<64>, cute::C<64>, "
    "cute::C<256> >, cute::tuple<cute::C<1>, cute::C<8>, cute::C<1> >, "
    "cutlass::gemm::KernelTmaWarpSpecializedFP8FastAccum, "
    "cutlass::epilogue::TmaWarpSpecializedCooperative, true>::GemmKernel>(vllm::"
    "cutlass_3x_gemm_sm90_fp8<cutlass::float_e4m3_t, cutlass::bfloat16_t, "
    "vllm::c3x::ScaledEpilogue, cute::tuple<cute::C<64>, cute::C<64>, cute::C<256> >, "
    "cute::tuple<cute::C<1>, cute::C<8>, cute::C<1> >, "
    "cutlass::gemm::KernelTmaWarpSpecializedFP8FastAccum, "
    "cutlass::epilogue::TmaWarpSpecializedCooperative, true>::GemmKernel::Params)";
inline constexpr std::string_view kNvjetSmall = "nvjet_tst_64x16_64x16_2x4_2cta_h_bz_bias_TNT";
inline constexpr std::string_view kNvjetMedium = "nvjet_tst_64x64_64x16_2x1_2cta_v_bz_bias_TNT";
inline constexpr std::string_view kNvjetLarge = "nvjet_tst_144x128_64x6_2x1_v_bz_bias_TNN";
inline constexpr std::string_view kFp8Quant =
    "void vllm::scaled_fp8_quant_kernel_strided<c10::BFloat16, c10::Float8_e4m3fn>("
    "c10::Float8_e4m3fn*, c10::BFloat16 const*, float const*, int, long, long)";
inline constexpr std::string_view kMultimemAllReduce =
    "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*, "
    "unsigned long, unsigned int**, unsigned long, unsigned long)";
inline constexpr std::string_view kAllReduceInt32 =
    "ncclDevKernel_AllReduce_Sum_i32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)";
inline constexpr std::string_view kTopkSoftmax =
    "void vllm::moe::topkGatingSoftmax<8, 128, 4, 16, 32, int, float, "
    "(vllm::moe::ScoringFunc)0>(float const*, bool const*, float*, int, int*, int*, int, int, "
    "int, bool, float const*)";
inline constexpr std::string_view kMoeAlignBlockSize =
    "void vllm::moe::moe_align_block_size_kernel<int>(int const*, int*, int*, int*, int, int, "
    "int, int, unsigned long, int*)";
inline constexpr std::string_view kFusedMoe = "fused_moe_kernel";
inline constexpr std::string_view kMoeSum =
    "void vllm::moe::moe_sum_kernel<c10::BFloat16, 8>(c10::BFloat16*, c10::BFloat16 const*, int)";
inline constexpr std::string_view kRoutingHistogram =
    "void moe::dev::routing::routingIndicesHistogramKernel<moe::dev::routing::routingRenormalize::"
    "KernelParams<__nv_bfloat16, __nv_bfloat16, 128, false, true, true> >(moe::dev::routing::"
    "routingRenormalize::KernelParams<__nv_bfloat16, __nv_bfloat16, 128, false, true, true>)";
inline constexpr std::string_view kRoutingOffsets =
    "void moe::dev::routing::routingIndicesOffsetsKernel<moe::dev::routing::routingRenormalize::"
    "KernelParams<__nv_bfloat16, __nv_bfloat16, 128, false, true, true> >(moe::dev::routing::"
    "routingRenormalize::KernelParams<__nv_bfloat16, __nv_bfloat16, 128, false, true, true>)";
inline constexpr std::string_view kBmmGateUp =
    "bmm_MxE4m3_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3_et128x16_m128x16x32_cga1x1x1_16dp256b_rM_TN_"
    "transOut_schedP2x1x2x3_biasM_bN_tma_tmaOpt_clmp_swiGlu_dynBatch_sm100f";
inline constexpr std::string_view kBmmDown =
    "bmm_Bfloat16_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3_et128x16_m128x16x32_cga1x1x1_16dp256b_rM_TN_"
    "transOut_schedP2x1x2x3_biasM_bN_tmaOpt_clmp_dynBatch_sm100f";
inline constexpr std::string_view kMoeFinalize =
    "void moe::dev::finalize::finalizeKernelVecLoad<moe::dev::finalize::KernelParams<"
    "cutlass::bfloat16_t, cutlass::bfloat16_t, 4, true> >(moe::dev::finalize::KernelParams<"
    "cutlass::bfloat16_t, cutlass::bfloat16_t, 4, true>)";
inline constexpr std::string_view kFmhaSm100 =
    "fmhaSm100aKernel_QkvE4m3OBfloat16H64PagedKvCausalP16VarSeqQ128Kv128PersistentContext";
inline constexpr std::string_view kReshapeAndCacheFp8 =
    "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, unsigned char, "
    "(vllm::Fp8KVCacheDataType)1>(__nv_bfloat16 const*, __nv_bfloat16 const*, unsigned char*, "
    "unsigned char*, long const*, long, long, long, long, long, int, int, int, float const*, "
    "float const*)";

// The GEMM kernel cuBLAS picks for an M of tokens.
inline std::string_view GemmName(int64_t tokens) {
  if (tokens <= 16) return kGemmTiny;
  if (tokens <= 256) return kGemmSmall;
  return kGemmLarge;
}

// The linear layers' GEMM on a GPU of compute capability sm (x10): FP8 CUTLASS on Hopper,
// cuBLAS nvjet for BF16 on Hopper and everything on Blackwell, GemmName before Hopper.
inline std::string_view LinearGemmName(int32_t sm, bool fp8, int64_t tokens) {
  if (sm >= 90 && sm < 100 && fp8) return tokens <= 64 ? kGemmFp8Sm90Small : kGemmFp8Sm90Large;
  if (sm >= 90) return tokens <= 16 ? kNvjetSmall : tokens <= 128 ? kNvjetMedium : kNvjetLarge;
  return GemmName(tokens);
}

}  // namespace teller::sim::kernels
