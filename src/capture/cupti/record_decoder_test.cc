// CUPTI records built in memory -> wire records (label cupti; no GPU needed).
#include "capture/cupti/record_decoder.h"

#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace teller::capture {
namespace {

const char* ApiName(bool driver, uint32_t cbid) {
  if (!driver && cbid == 211) return "cudaLaunchKernel";
  if (driver && cbid == 307) return "cuLaunchKernel";
  return nullptr;
}

struct Collect : wire::RecordVisitor {
  std::vector<wire::ApiCallRecord> api;
  std::vector<std::string> api_names, kernel_names;
  std::vector<wire::KernelRecord> kernels;
  std::vector<wire::MemcpyRecord> memcpys;
  std::vector<wire::MemsetRecord> memsets;
  std::vector<wire::SyncRecord> syncs;
  std::vector<wire::ExternalCorrelationRecord> externals;
  void OnApiCall(const wire::ApiCallRecord& r) override {
    api.push_back(r);
    api_names.emplace_back(r.name);
  }
  void OnKernel(const wire::KernelRecord& r) override {
    kernels.push_back(r);
    kernel_names.emplace_back(r.name);
  }
  void OnMemcpy(const wire::MemcpyRecord& r) override { memcpys.push_back(r); }
  void OnMemset(const wire::MemsetRecord& r) override { memsets.push_back(r); }
  void OnSync(const wire::SyncRecord& r) override { syncs.push_back(r); }
  void OnExternalCorrelation(const wire::ExternalCorrelationRecord& r) override {
    externals.push_back(r);
  }
};

template <typename T>
const CUpti_Activity& AsActivity(const T& record) {
  return reinterpret_cast<const CUpti_Activity&>(record);
}

TEST(RecordDecoderTest, RuntimeAndDriverCalls) {
  CUpti_ActivityAPI runtime;
  std::memset(&runtime, 0, sizeof(runtime));
  runtime.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  runtime.cbid = 211;
  runtime.start = 1'700'000'000'000'000'123ull;
  runtime.end = 1'700'000'000'000'004'567ull;
  runtime.processId = 77;
  runtime.threadId = 4242;
  runtime.correlationId = 99;
  runtime.returnValue = 0;
  CUpti_ActivityAPI driver = runtime;
  driver.kind = CUPTI_ACTIVITY_KIND_DRIVER;
  driver.cbid = 999;  // unknown name
  driver.returnValue = 700;
  RecordDecoder decoder(ApiName);
  Collect out;
  EXPECT_TRUE(decoder.Decode(AsActivity(runtime), &out));
  EXPECT_TRUE(decoder.Decode(AsActivity(driver), &out));
  ASSERT_EQ(out.api.size(), 2u);
  EXPECT_EQ(out.api[0].clock, wire::ClockDomain::kGpu);
  EXPECT_EQ(out.api[0].tid, 4242);
  EXPECT_EQ(out.api[0].start_ns, 1'700'000'000'000'000'123);
  EXPECT_EQ(out.api[0].end_ns, 1'700'000'000'000'004'567);
  EXPECT_EQ(out.api[0].correlation, 99u);
  EXPECT_EQ(out.api[0].api, wire::ApiKind::kRuntime);
  EXPECT_EQ(out.api[0].cbid, 211u);
  EXPECT_EQ(out.api_names[0], "cudaLaunchKernel");
  EXPECT_EQ(out.api[1].api, wire::ApiKind::kDriver);
  EXPECT_EQ(out.api[1].result, 700);
  EXPECT_EQ(out.api_names[1], "");
  EXPECT_EQ(decoder.counters().decoded, 2u);
}

TEST(RecordDecoderTest, ConcurrentKernelWithGraphIds) {
  CUpti_ActivityKernel10 kernel;
  std::memset(&kernel, 0, sizeof(kernel));
  kernel.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  kernel.start = 5000;
  kernel.end = 9000;
  kernel.deviceId = 3;
  kernel.contextId = 1;
  kernel.streamId = 7;
  kernel.correlationId = 99;
  kernel.gridX = 128;
  kernel.gridY = 2;
  kernel.gridZ = 1;
  kernel.blockX = 256;
  kernel.blockY = 1;
  kernel.blockZ = 1;
  kernel.staticSharedMemory = 1024;
  kernel.dynamicSharedMemory = 49152;
  kernel.registersPerThread = 96;
  kernel.graphId = 12;
  kernel.graphNodeId = 0x100000002ull;
  kernel.name = "ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_nn";
  RecordDecoder decoder(ApiName);
  Collect out;
  ASSERT_TRUE(decoder.Decode(AsActivity(kernel), &out));
  ASSERT_EQ(out.kernels.size(), 1u);
  const wire::KernelRecord& k = out.kernels[0];
  EXPECT_EQ(k.start_ns, 5000);
  EXPECT_EQ(k.end_ns, 9000);
  EXPECT_EQ(k.device, 3);
  EXPECT_EQ(k.context, 1u);
  EXPECT_EQ(k.stream, 7);
  EXPECT_EQ(k.correlation, 99u);
  EXPECT_EQ(k.grid, (wire::Dim3{128, 2, 1}));
  EXPECT_EQ(k.block, (wire::Dim3{256, 1, 1}));
  EXPECT_EQ(k.static_smem_bytes, 1024u);
  EXPECT_EQ(k.dynamic_smem_bytes, 49152u);
  EXPECT_EQ(k.registers_per_thread, 96);
  EXPECT_EQ(k.graph_id, 12u);
  EXPECT_EQ(k.graph_node_id, 0x100000002ull);
  EXPECT_EQ(out.kernel_names[0], kernel.name);
  kernel.name = nullptr;  // a kernel without a name decodes to ""
  ASSERT_TRUE(decoder.Decode(AsActivity(kernel), &out));
  EXPECT_EQ(out.kernel_names[1], "");
}

TEST(RecordDecoderTest, MemcpyMemsetSyncAndExternalCorrelation) {
  CUpti_ActivityMemcpy6 memcpy_record;
  std::memset(&memcpy_record, 0, sizeof(memcpy_record));
  memcpy_record.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  memcpy_record.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  memcpy_record.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
  memcpy_record.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  memcpy_record.bytes = 1 << 20;
  memcpy_record.start = 10;
  memcpy_record.end = 20;
  memcpy_record.deviceId = 1;
  memcpy_record.streamId = 13;
  memcpy_record.correlationId = 5;
  memcpy_record.graphId = 0;
  CUpti_ActivityMemset4 memset_record;
  std::memset(&memset_record, 0, sizeof(memset_record));
  memset_record.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  memset_record.value = 0xAB;
  memset_record.bytes = 4096;
  memset_record.start = 30;
  memset_record.end = 31;
  memset_record.correlationId = 6;
  memset_record.graphId = 4;
  memset_record.graphNodeId = 8;
  CUpti_ActivitySynchronization2 sync;
  std::memset(&sync, 0, sizeof(sync));
  sync.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  sync.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE;
  sync.start = 40;
  sync.end = 50;
  sync.correlationId = 7;
  sync.contextId = 1;
  sync.streamId = UINT32_MAX;  // context sync: no stream
  sync.cudaEventId = UINT32_MAX;
  CUpti_ActivityExternalCorrelation external;
  std::memset(&external, 0, sizeof(external));
  external.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  external.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
  external.externalId = 123456789;
  external.correlationId = 5;

  RecordDecoder decoder(ApiName);
  Collect out;
  ASSERT_TRUE(decoder.Decode(AsActivity(memcpy_record), &out));
  ASSERT_TRUE(decoder.Decode(AsActivity(memset_record), &out));
  ASSERT_TRUE(decoder.Decode(AsActivity(sync), &out));
  ASSERT_TRUE(decoder.Decode(AsActivity(external), &out));
  ASSERT_EQ(out.memcpys.size(), 1u);
  EXPECT_EQ(out.memcpys[0].copy_kind, wire::CopyKind::kHtoD);
  EXPECT_EQ(out.memcpys[0].size_bytes, 1u << 20);
  EXPECT_EQ(out.memcpys[0].stream, 13);
  EXPECT_EQ(out.memcpys[0].src_kind, CUPTI_ACTIVITY_MEMORY_KIND_PINNED);
  EXPECT_EQ(out.memcpys[0].dst_kind, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
  ASSERT_EQ(out.memsets.size(), 1u);
  EXPECT_EQ(out.memsets[0].value, 0xABu);
  EXPECT_EQ(out.memsets[0].size_bytes, 4096u);
  EXPECT_EQ(out.memsets[0].graph_id, 4u);
  EXPECT_EQ(out.memsets[0].graph_node_id, 8u);
  ASSERT_EQ(out.syncs.size(), 1u);
  EXPECT_EQ(out.syncs[0].type, wire::SyncType::kContextSynchronize);
  EXPECT_EQ(out.syncs[0].stream, -1);
  EXPECT_EQ(out.syncs[0].event, 0u);
  EXPECT_EQ(out.syncs[0].tid, -1);
  EXPECT_EQ(out.syncs[0].correlation, 7u);
  ASSERT_EQ(out.externals.size(), 1u);
  EXPECT_EQ(out.externals[0].external_kind, wire::ExternalKind::kCustom0);
  EXPECT_EQ(out.externals[0].external_id, 123456789u);
  EXPECT_EQ(out.externals[0].correlation, 5u);
}

TEST(RecordDecoderTest, OtherKindsAreCountedAndSkipped) {
  CUpti_Activity other;
  std::memset(&other, 0, sizeof(other));
  other.kind = CUPTI_ACTIVITY_KIND_DEVICE;
  RecordDecoder decoder(ApiName);
  Collect out;
  EXPECT_FALSE(decoder.Decode(other, &out));
  EXPECT_EQ(decoder.counters().skipped, 1u);
  EXPECT_EQ(decoder.counters().decoded, 0u);
}

}  // namespace
}  // namespace teller::capture
