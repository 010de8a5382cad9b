#include "model/classify.h"

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
