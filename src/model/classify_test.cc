#include "model/classify.h"

#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "model/layer.h"

namespace teller::model {
namespace {

TEST(ClassifyTest, KernelsFromRealTraces) {
  EXPECT_EQ(
      ClassifyKernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"),
      Layer::kComm);
  EXPECT_EQ(ClassifyKernel("void multimem_all_reduce<__nv_bfloat16>(...)"), Layer::kComm);
  EXPECT_EQ(ClassifyKernel("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"), Layer::kComm);
  EXPECT_EQ(ClassifyKernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"),
            Layer::kK);
  EXPECT_EQ(ClassifyKernel("Cijk_Alik_Bljk_BBS_BH_MT128x128x64"), Layer::kK);
}

TEST(ClassifyTest, ApiCalls) {
  EXPECT_EQ(ClassifyApiCall("cudaLaunchKernel", false), Layer::kRt);
  EXPECT_EQ(ClassifyApiCall("cuLaunchKernelEx", false), Layer::kDrv);
  EXPECT_EQ(ClassifyApiCall("cudaLaunchKernelExC", true), Layer::kDrv);
  EXPECT_EQ(ClassifyApiCall("cudaStreamSynchronize", false), Layer::kSync);
  EXPECT_EQ(ClassifyApiCall("hipExtModuleLaunchKernel", false), Layer::kDrv);
  EXPECT_EQ(ClassifyApiCall("hipMemcpyAsync", false), Layer::kRt);
  EXPECT_TRUE(IsGraphLaunchName("hipGraphLaunch"));
  EXPECT_TRUE(IsLaunchName("cudaMemcpyAsync"));
  EXPECT_FALSE(IsLaunchName("cudaGetDevice"));
}

}  // namespace
}  // namespace teller::model

namespace teller::model {
namespace {

TEST(ClassifyTest, HostOpsAndAnnotations) {
  EXPECT_EQ(ClassifyHostOp("aten::mm"), Layer::kBe);
  EXPECT_EQ(ClassifyHostOp("record_param_comms"), Layer::kComm);
  EXPECT_EQ(ClassifyHostOp("c10d::allreduce_"), Layer::kComm);
  EXPECT_EQ(ClassifyHostOp("nccl:all_reduce"), Layer::kComm);
  EXPECT_EQ(ClassifyUserAnnotation("ProfilerStep#3"), Layer::kFe);
  EXPECT_EQ(ClassifyUserAnnotation("nccl:all_gather"), Layer::kComm);
}

// Names the legacy autograd profiler of Debian's torch 1.13 wrote
// (tests/fixtures/legacy_profiler/cpu_decode.json), which carry no category.
TEST(ClassifyTest, HostRangesWithoutCategory) {
  for (std::string_view op : {"aten::addmm", "autograd::engine::evaluate_function: AddmmBackward0",
                              "torch::autograd::AccumulateGrad", "AddmmBackward0",
                              "NllLossBackward0", "LogSoftmaxBackward0", "AddmmBackward"}) {
    EXPECT_EQ(ClassifyHostRange(op), Layer::kBe) << op;
  }
  for (std::string_view range : {"ProfilerStep#0", "train", "Optimizer.step#SGD.step",
                                 "Optimizer.zero_grad#SGD.zero_grad", "Backward", "my Backward0"}) {
    EXPECT_EQ(ClassifyHostRange(range), Layer::kFe) << range;
  }
  EXPECT_EQ(ClassifyHostRange("c10d::allreduce_"), Layer::kComm);
  EXPECT_EQ(ClassifyHostRange("nccl:all_reduce"), Layer::kComm);
  EXPECT_EQ(ClassifyHostRange("record_param_comms"), Layer::kComm);
}

// One definition of device work for every stage: what the GPU runs, not the host's calls
// and not the waits a profiler may record on the device's timeline.
TEST(LayerTest, DeviceWorkIsKernelsCopiesAndCollectives) {
  std::vector<Layer> device;
  for (int l = 0; l < kLayerCount; ++l) {
    if (IsDeviceWork(static_cast<Layer>(l))) device.push_back(static_cast<Layer>(l));
  }
  EXPECT_EQ(device, (std::vector<Layer>{Layer::kK, Layer::kMem, Layer::kComm}));
  EXPECT_FALSE(IsDeviceWork(Layer::kSync));
  EXPECT_FALSE(IsDeviceWork(Layer::kRt));
}

}  // namespace
}  // namespace teller::model
