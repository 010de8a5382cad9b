#include "tpe/operator_token.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

namespace teller::tpe {
namespace {

using model::Layer;

struct Case {
  Layer layer;
  std::string name;
  std::string token;
};

// Names as the real traces of ../shared/real-traces and the simulator spell them.
TEST(OperatorTokenTest, NamesOfOneOperatorOnEveryLibraryAndGpuShareTheirToken) {
  const std::vector<Case> cases = {
      // GEMMs: cuBLAS on Ampere and Volta, CUTLASS, Blackwell's nvjet, hipBLASLt on MI300X.
      {Layer::kK, "ampere_bf16_s16816gemm_bf16_64x64_sliced1x2_ldg8_f2f_stages_64x5_tn", "gemm"},
      {Layer::kK, "volta_sgemm_128x64_nt", "gemm"},
      {Layer::kK,
       "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x6_nn_align1>"
       "(cutlass_80_tensorop_s1688gemm_64x64_32x6_nn_align1::Params)",
       "gemm"},
      {Layer::kK, "nvjet_tst_192x192_64x3_1x2_h_bz_coopB_NTN", "gemm"},
      {Layer::kK, "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT16x16x256_MI16x16x1_SN", "gemm"},
      // Collectives: NCCL's kernel and the host ranges around it.
      {Layer::kK, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "allreduce"},
      {Layer::kComm, "nccl:all_reduce", "allreduce"},
      {Layer::kComm, "ncclDevKernel_AllGather_RING_LL", "allgather"},
      // Copies keep their direction: a device-to-host copy waits for the stream.
      {Layer::kMem, "Memcpy HtoD (Pageable -> Device)", "memcpy_htod"},
      {Layer::kMem, "Memcpy DtoH", "memcpy_dtoh"},
      {Layer::kMem, "Memset (Device)", "memset"},
      // Runtime calls of CUDA and HIP.
      {Layer::kRt, "cudaLaunchKernel", "launch"},
      {Layer::kRt, "hipLaunchKernel", "launch"},
      {Layer::kDrv, "cuLaunchKernelEx", "launch"},
      {Layer::kRt, "cudaGraphLaunch", "graph_launch"},
      {Layer::kSync, "cudaStreamSynchronize", "sync"},
      // PyTorch ops by their stem, autograd nodes as one.
      {Layer::kBe, "aten::addmm", "matmul"},
      {Layer::kBe, "aten::mm", "matmul"},
      {Layer::kBe, "aten::t", "view"},
      {Layer::kBe, "aten::transpose_", "view"},
      {Layer::kBe, "aten::to", "copy"},
      {Layer::kBe, "aten::_to_copy", "copy"},
      {Layer::kBe, "aten::topk", "sampling"},
      {Layer::kBe, "aten::max_pool2d", "pooling"},
      {Layer::kBe, "aten::cudnn_convolution", "conv"},
      {Layer::kBe, "aten::native_layer_norm", "norm"},
      {Layer::kBe, "aten::add_", "elementwise"},
      {Layer::kBe, "autograd::engine::evaluate_function: MmBackward0", "backward"},
      {Layer::kBe, "ReluBackward0", "backward"},
      // A library's host op reads as its kernel family.
      {Layer::kBe, "_C::rms_norm", "norm"},
      {Layer::kBe, "flashinfer::batch_prefill_with_paged_kv_cache", "attention"},
      // Frontend ranges: modules by what they do, engine methods by their part of a step.
      {Layer::kFe, "nn.Module: LlamaDecoderLayer_3", "module.layer"},
      {Layer::kFe, "nn.Module: QKVParallelLinear_5", "module.linear"},
      {Layer::kFe, "Qwen3DecoderLayer", "module.layer"},
      {Layer::kFe, "Qwen3Attention", "module.attention"},
      {Layer::kFe, "RMSNorm", "module.norm"},
      {Layer::kFe, "Scheduler.run_batch", "engine.forward"},
      {Layer::kFe, "Scheduler.get_next_batch_to_run", "engine.schedule"},
      {Layer::kFe, "EngineCore.step_with_batch_queue", "engine.step"},
      {Layer::kFe, "vllm/attention/layer.py(290): forward", "python"},
      {Layer::kFe, "<built-in method reshape_and_cache_flash of pybind11_builtins", "python"},
      {Layer::kFe, "ProfilerStep#553", "profiler_step"},
      {Layer::kFe, "## forward:over_arch ##", "frontend"},
      {Layer::kStep, "engine_step", "step"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(OperatorToken(c.layer, c.name), c.token)
        << model::LayerName(c.layer) << " " << c.name;
  }
}

// Tile shapes, dtypes and template arguments are not the operator: two GEMMs that differ
// only in them, or two instances of one module, get one token.
TEST(OperatorTokenTest, ShapesDtypesAndInstanceNumbersDoNotMakeNewTokens) {
  EXPECT_EQ(OperatorToken(Layer::kK, "sm80_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x32"),
            OperatorToken(Layer::kK, "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nt_n_tilesize64x64x64"));
  EXPECT_EQ(OperatorToken(Layer::kFe, "nn.Module: MLPBlock_11"),
            OperatorToken(Layer::kFe, "nn.Module: MLPBlock_25"));
  EXPECT_EQ(OperatorToken(Layer::kK,
                          "void at::native::vectorized_elementwise_kernel<4, "
                          "at::native::sqrt_kernel_cuda(at::TensorIteratorBase&)>"),
            OperatorToken(Layer::kK,
                          "void at::native::vectorized_elementwise_kernel<4, "
                          "at::native::neg_kernel_cuda(at::TensorIteratorBase&)>"));
}

// A name no rule knows still gets a token of its layer's closed set, never itself.
TEST(OperatorTokenTest, UnknownNamesFallBackToTheirLayersToken) {
  EXPECT_EQ(OperatorToken(Layer::kK, "my_custom_kernel_v7"), "kernel");
  EXPECT_EQ(OperatorToken(Layer::kBe, "mylib::do_things"), "host_op");
  EXPECT_EQ(OperatorToken(Layer::kFe, "a free-form annotation"), "frontend");
  EXPECT_EQ(OperatorToken(Layer::kOther, "anything"), "other");
}

}  // namespace
}  // namespace teller::tpe
