// Test helpers: a text form of every record (all fields), a visitor that collects
// it, and a writer of the same text on the way in.
#pragma once

#include <string>
#include <vector>

#include <fmt/format.h>

#include "wire/record_codec.h"

namespace teller::wire::testing {

inline std::string Describe(const ProcessInfoRecord& r) {
  return fmt::format("process pid={} rank={} local={} world={} dev={} host={} name={} cmd={}{}",
                     r.pid, r.rank, r.local_rank, r.world_size, r.device, r.host, r.name, r.command,
                     r.rank_source.empty() ? "" : " rank_source=" + std::string(r.rank_source));
}
inline std::string Describe(const ThreadInfoRecord& r) {
  return fmt::format("thread tid={} name={}", r.tid, r.name);
}
inline std::string Describe(const RangePushRecord& r) {
  return fmt::format("push clock={} tid={} ts={} layer={} domain={} name={}",
                     ClockDomainName(r.clock), r.tid, r.ts_ns, static_cast<int>(r.layer), r.domain,
                     r.name);
}
inline std::string Describe(const RangePopRecord& r) {
  return fmt::format("pop clock={} tid={} ts={} domain={}", ClockDomainName(r.clock), r.tid,
                     r.ts_ns, r.domain);
}
inline std::string Describe(const RangeStartRecord& r) {
  return fmt::format("start clock={} id={} tid={} ts={} layer={} domain={} name={}",
                     ClockDomainName(r.clock), r.range_id, r.tid, r.ts_ns,
                     static_cast<int>(r.layer), r.domain, r.name);
}
inline std::string Describe(const RangeEndRecord& r) {
  return fmt::format("end clock={} id={} tid={} ts={} domain={}", ClockDomainName(r.clock),
                     r.range_id, r.tid, r.ts_ns, r.domain);
}
inline std::string Describe(const MarkRecord& r) {
  return fmt::format("mark clock={} tid={} ts={} domain={} name={}", ClockDomainName(r.clock),
                     r.tid, r.ts_ns, r.domain, r.name);
}
inline std::string Describe(const HostRangeRecord& r) {
  std::string out = fmt::format("range clock={} tid={} start={} end={} id={} layer={} name={}",
                                ClockDomainName(r.clock), r.tid, r.start_ns, r.end_ns, r.range_id,
                                static_cast<int>(r.layer), r.name);
  for (const Arg& a : r.args) {
    out += fmt::format(" [{}:{}", a.key, static_cast<int>(a.type));
    switch (a.type) {
      case ArgType::kInt:
        out += fmt::format("={}", a.int_value);
        break;
      case ArgType::kDouble:
        out += fmt::format("={}", a.double_value);
        break;
      case ArgType::kString:
        out += fmt::format("={}", a.string_value);
        break;
      case ArgType::kStringList:
        for (std::string_view item : a.list_value) out += fmt::format(",{}", item);
        break;
    }
    out += "]";
  }
  return out;
}
inline std::string Describe(const ApiCallRecord& r) {
  return fmt::format("api clock={} tid={} start={} end={} corr={} api={} cbid={} result={} name={}",
                     ClockDomainName(r.clock), r.tid, r.start_ns, r.end_ns, r.correlation,
                     static_cast<int>(r.api), r.cbid, r.result, r.name);
}
inline std::string Describe(const KernelRecord& r) {
  return fmt::format(
      "kernel clock={} start={} end={} dev={} ctx={} stream={} corr={} grid={},{},{} "
      "block={},{},{} smem={},{} regs={} graph={} node={} name={}",
      ClockDomainName(r.clock), r.start_ns, r.end_ns, r.device, r.context, r.stream, r.correlation,
      r.grid.x, r.grid.y, r.grid.z, r.block.x, r.block.y, r.block.z, r.static_smem_bytes,
      r.dynamic_smem_bytes, r.registers_per_thread, r.graph_id, r.graph_node_id, r.name);
}
inline std::string Describe(const MemcpyRecord& r) {
  return fmt::format(
      "memcpy clock={} start={} end={} dev={} ctx={} stream={} corr={} bytes={} kind={} src={} "
      "dst={} graph={} node={}",
      ClockDomainName(r.clock), r.start_ns, r.end_ns, r.device, r.context, r.stream, r.correlation,
      r.size_bytes, CopyKindName(r.copy_kind), r.src_kind, r.dst_kind, r.graph_id, r.graph_node_id);
}
inline std::string Describe(const MemsetRecord& r) {
  return fmt::format(
      "memset clock={} start={} end={} dev={} ctx={} stream={} corr={} bytes={} value={} "
      "graph={} node={}",
      ClockDomainName(r.clock), r.start_ns, r.end_ns, r.device, r.context, r.stream, r.correlation,
      r.size_bytes, r.value, r.graph_id, r.graph_node_id);
}
inline std::string Describe(const SyncRecord& r) {
  return fmt::format(
      "sync clock={} tid={} start={} end={} type={} dev={} ctx={} stream={} "
      "event={} corr={}",
      ClockDomainName(r.clock), r.tid, r.start_ns, r.end_ns, SyncTypeName(r.type), r.device,
      r.context, r.stream, r.event, r.correlation);
}
inline std::string Describe(const ExternalCorrelationRecord& r) {
  return fmt::format("external kind={} id={} corr={}", static_cast<int>(r.external_kind),
                     r.external_id, r.correlation);
}
inline std::string Describe(const CollectiveRecord& r) {
  return fmt::format(
      "collective clock={} tid={} start={} end={} comm={} seq={} op={} bytes={} dtype={} "
      "size={} rank={} corr={} range={} dev={} stream={}",
      ClockDomainName(r.clock), r.tid, r.start_ns, r.end_ns, r.communicator, r.sequence, r.op,
      r.size_bytes, r.dtype, r.group_size, r.group_rank, r.correlation, r.range_id, r.device,
      r.stream);
}

// Collects Describe() of every record it is given.
class DescribingVisitor : public RecordVisitor {
 public:
  std::vector<std::string> lines;
  void OnProcessInfo(const ProcessInfoRecord& r) override { lines.push_back(Describe(r)); }
  void OnThreadInfo(const ThreadInfoRecord& r) override { lines.push_back(Describe(r)); }
  void OnRangePush(const RangePushRecord& r) override { lines.push_back(Describe(r)); }
  void OnRangePop(const RangePopRecord& r) override { lines.push_back(Describe(r)); }
  void OnRangeStart(const RangeStartRecord& r) override { lines.push_back(Describe(r)); }
  void OnRangeEnd(const RangeEndRecord& r) override { lines.push_back(Describe(r)); }
  void OnMark(const MarkRecord& r) override { lines.push_back(Describe(r)); }
  void OnHostRange(const HostRangeRecord& r) override { lines.push_back(Describe(r)); }
  void OnApiCall(const ApiCallRecord& r) override { lines.push_back(Describe(r)); }
  void OnKernel(const KernelRecord& r) override { lines.push_back(Describe(r)); }
  void OnMemcpy(const MemcpyRecord& r) override { lines.push_back(Describe(r)); }
  void OnMemset(const MemsetRecord& r) override { lines.push_back(Describe(r)); }
  void OnSync(const SyncRecord& r) override { lines.push_back(Describe(r)); }
  void OnExternalCorrelation(const ExternalCorrelationRecord& r) override {
    lines.push_back(Describe(r));
  }
  void OnCollective(const CollectiveRecord& r) override { lines.push_back(Describe(r)); }
};

}  // namespace teller::wire::testing
