#include "capture/cupti/record_decoder.h"

#include <string_view>

namespace teller::capture {
namespace {

int64_t Ns(uint64_t cupti_ns) { return static_cast<int64_t>(cupti_ns); }

wire::CopyKind ToCopyKind(uint8_t kind) {
  return kind <= static_cast<uint8_t>(wire::CopyKind::kPtoP) ? static_cast<wire::CopyKind>(kind)
                                                             : wire::CopyKind::kUnknown;
}

wire::SyncType ToSyncType(CUpti_ActivitySynchronizationType type) {
  switch (type) {
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE:
      return wire::SyncType::kEventSynchronize;
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT:
      return wire::SyncType::kStreamWaitEvent;
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE:
      return wire::SyncType::kStreamSynchronize;
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE:
      return wire::SyncType::kContextSynchronize;
    default:
      return wire::SyncType::kUnknown;
  }
}

wire::ExternalKind ToExternalKind(CUpti_ExternalCorrelationKind kind) {
  uint32_t value = static_cast<uint32_t>(kind);
  return value <= static_cast<uint32_t>(wire::ExternalKind::kCustom2)
             ? static_cast<wire::ExternalKind>(value)
             : wire::ExternalKind::kUnknown;
}

}  // namespace

bool RecordDecoder::Decode(const CUpti_Activity& record, wire::RecordVisitor* out) {
  switch (record.kind) {
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      const auto& api = reinterpret_cast<const CUpti_ActivityAPI&>(record);
      const bool driver = record.kind == CUPTI_ACTIVITY_KIND_DRIVER;
      wire::ApiCallRecord r;
      r.tid = api.threadId;
      r.start_ns = Ns(api.start);
      r.end_ns = Ns(api.end);
      r.correlation = api.correlationId;
      r.api = driver ? wire::ApiKind::kDriver : wire::ApiKind::kRuntime;
      r.cbid = api.cbid;
      r.result = static_cast<int32_t>(api.returnValue);
      const char* name = api_name_ ? api_name_(driver, api.cbid) : nullptr;
      r.name = name ? std::string_view(name) : std::string_view();
      out->OnApiCall(r);
      break;
    }
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto& k = reinterpret_cast<const CUpti_ActivityKernel10&>(record);
      wire::KernelRecord r;
      r.start_ns = Ns(k.start);
      r.end_ns = Ns(k.end);
      r.device = static_cast<int32_t>(k.deviceId);
      r.context = k.contextId;
      r.stream = k.streamId;
      r.correlation = k.correlationId;
      r.grid = {k.gridX, k.gridY, k.gridZ};
      r.block = {k.blockX, k.blockY, k.blockZ};
      r.static_smem_bytes = static_cast<uint32_t>(k.staticSharedMemory);
      r.dynamic_smem_bytes = static_cast<uint32_t>(k.dynamicSharedMemory);
      r.registers_per_thread = k.registersPerThread;
      r.graph_id = k.graphId;
      r.graph_node_id = k.graphNodeId;
      r.name = k.name ? std::string_view(k.name) : std::string_view();
      out->OnKernel(r);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto& m = reinterpret_cast<const CUpti_ActivityMemcpy6&>(record);
      wire::MemcpyRecord r;
      r.start_ns = Ns(m.start);
      r.end_ns = Ns(m.end);
      r.device = static_cast<int32_t>(m.deviceId);
      r.context = m.contextId;
      r.stream = m.streamId;
      r.correlation = m.correlationId;
      r.size_bytes = m.bytes;
      r.copy_kind = ToCopyKind(m.copyKind);
      r.src_kind = m.srcKind;
      r.dst_kind = m.dstKind;
      r.graph_id = m.graphId;
      r.graph_node_id = m.graphNodeId;
      out->OnMemcpy(r);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto& m = reinterpret_cast<const CUpti_ActivityMemset4&>(record);
      wire::MemsetRecord r;
      r.start_ns = Ns(m.start);
      r.end_ns = Ns(m.end);
      r.device = static_cast<int32_t>(m.deviceId);
      r.context = m.contextId;
      r.stream = m.streamId;
      r.correlation = m.correlationId;
      r.size_bytes = m.bytes;
      r.value = m.value;
      r.graph_id = m.graphId;
      r.graph_node_id = m.graphNodeId;
      out->OnMemset(r);
      break;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
      const auto& s = reinterpret_cast<const CUpti_ActivitySynchronization2&>(record);
      wire::SyncRecord r;
      r.start_ns = Ns(s.start);
      r.end_ns = Ns(s.end);
      r.type = ToSyncType(s.type);
      r.context = s.contextId;
      // CUPTI_SYNCHRONIZATION_INVALID_VALUE (all ones) marks "no stream/event".
      r.stream = s.streamId == UINT32_MAX ? -1 : static_cast<int64_t>(s.streamId);
      r.event = s.cudaEventId == UINT32_MAX ? 0 : s.cudaEventId;
      r.correlation = s.correlationId;
      out->OnSync(r);
      break;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      const auto& e = reinterpret_cast<const CUpti_ActivityExternalCorrelation&>(record);
      wire::ExternalCorrelationRecord r;
      r.external_kind = ToExternalKind(e.externalKind);
      r.external_id = e.externalId;
      r.correlation = e.correlationId;
      out->OnExternalCorrelation(r);
      break;
    }
    default:
      ++counters_.skipped;
      return false;
  }
  ++counters_.decoded;
  return true;
}

}  // namespace teller::capture
