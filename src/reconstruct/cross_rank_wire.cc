#include "reconstruct/cross_rank_wire.h"

#include <cstring>
#include <vector>

#include "base/byte_io.h"

namespace teller::reconstruct {
namespace {

constexpr std::string_view kRecordsMagic = "TLCR";
constexpr std::string_view kPartMagic = "TLCP";
constexpr std::string_view kRunMagic = "TLCN";
constexpr std::string_view kStepOrderRecordsMagic = "TLSR";
constexpr std::string_view kStepOrderPartMagic = "TLSP";

}  // namespace

std::string EncodeCollectiveRecords(const CollectiveRecords& records) {
  base::WireWriter out(kRecordsMagic, kCrossRankWireVersion);
  out.Strings(records.names);
  out.Column(records.process_rank);
  out.Column(records.process_host);
  out.Column(records.process_node);
  out.Column(records.process_pid);
  out.Column(records.process_has_events);
  out.Column(records.collective);
  out.Column(records.communicator);
  out.Column(records.op);
  out.Column(records.sequence);
  out.Column(records.process);
  out.Column(records.start_ns);
  out.Column(records.end_ns);
  out.Column(records.host_side);
  return out.Take();
}

base::StatusOr<CollectiveRecords> DecodeCollectiveRecords(std::string_view bytes) {
  static const std::string kWhat = "collective records";
  base::WireReader in(bytes, kWhat);
  CollectiveRecords records;
  TELLER_RETURN_IF_ERROR(in.Header(kRecordsMagic, kCrossRankWireVersion));
  TELLER_RETURN_IF_ERROR(in.Strings("names", &records.names));
  TELLER_RETURN_IF_ERROR(in.Column("process_rank", &records.process_rank));
  TELLER_RETURN_IF_ERROR(in.Column("process_host", &records.process_host));
  TELLER_RETURN_IF_ERROR(in.Column("process_node", &records.process_node));
  TELLER_RETURN_IF_ERROR(in.Column("process_pid", &records.process_pid));
  TELLER_RETURN_IF_ERROR(in.Column("process_has_events", &records.process_has_events));
  TELLER_RETURN_IF_ERROR(in.Column("collective", &records.collective));
  TELLER_RETURN_IF_ERROR(in.Column("communicator", &records.communicator));
  TELLER_RETURN_IF_ERROR(in.Column("op", &records.op));
  TELLER_RETURN_IF_ERROR(in.Column("sequence", &records.sequence));
  TELLER_RETURN_IF_ERROR(in.Column("process", &records.process));
  TELLER_RETURN_IF_ERROR(in.Column("start_ns", &records.start_ns));
  TELLER_RETURN_IF_ERROR(in.Column("end_ns", &records.end_ns));
  TELLER_RETURN_IF_ERROR(in.Column("host_side", &records.host_side));
  TELLER_RETURN_IF_ERROR(in.End());
  TELLER_RETURN_IF_ERROR(CheckCollectiveRecords(records));
  return records;
}

std::string EncodeCrossRankPart(const CrossRankPlan::Part& part) {
  base::WireWriter out(kPartMagic, kCrossRankWireVersion);
  out.Column(part.process_rank);
  out.Column(part.clock_offset_ns);
  out.Column(part.clock_uncertainty_ns);
  out.Column(part.clock_aligned);
  out.Column(part.rank);
  out.Column(part.rank_clock_offset_ns);
  out.Column(part.match);
  out.Column(part.match_collective);
  return out.Take();
}

base::StatusOr<CrossRankPlan::Part> DecodeCrossRankPart(std::string_view bytes) {
  static const std::string kWhat = "cross-rank plan part";
  base::WireReader in(bytes, kWhat);
  CrossRankPlan::Part part;
  TELLER_RETURN_IF_ERROR(in.Header(kPartMagic, kCrossRankWireVersion));
  TELLER_RETURN_IF_ERROR(in.Column("process_rank", &part.process_rank));
  TELLER_RETURN_IF_ERROR(in.Column("clock_offset_ns", &part.clock_offset_ns));
  TELLER_RETURN_IF_ERROR(in.Column("clock_uncertainty_ns", &part.clock_uncertainty_ns));
  TELLER_RETURN_IF_ERROR(in.Column("clock_aligned", &part.clock_aligned));
  TELLER_RETURN_IF_ERROR(in.Column("rank", &part.rank));
  TELLER_RETURN_IF_ERROR(in.Column("rank_clock_offset_ns", &part.rank_clock_offset_ns));
  TELLER_RETURN_IF_ERROR(in.Column("match", &part.match));
  TELLER_RETURN_IF_ERROR(in.Column("match_collective", &part.match_collective));
  TELLER_RETURN_IF_ERROR(in.End());
  TELLER_RETURN_IF_ERROR(in.SameRows(part.clock_offset_ns, "clock_offset_ns",
                                     part.clock_uncertainty_ns, "clock_uncertainty_ns"));
  TELLER_RETURN_IF_ERROR(
      in.SameRows(part.clock_offset_ns, "clock_offset_ns", part.clock_aligned, "clock_aligned"));
  TELLER_RETURN_IF_ERROR(
      in.SameRows(part.rank, "rank", part.rank_clock_offset_ns, "rank_clock_offset_ns"));
  TELLER_RETURN_IF_ERROR(
      in.SameRows(part.match, "match", part.match_collective, "match_collective"));
  return part;
}

std::string EncodeCrossRankRun(const CrossRankPlan& plan) {
  base::WireWriter out(kRunMagic, kCrossRankWireVersion);
  const CrossRankCounters& counters = plan.counters;
  for (int64_t value : {counters.matches, counters.unmatched, counters.matched_by_order,
                        counters.order_op_mismatch, counters.unaligned_hosts}) {
    out.Value<int64_t>(value);
  }
  out.Strings(plan.notes);
  return out.Take();
}

base::StatusOr<CrossRankPlan> DecodeCrossRankRun(std::string_view bytes) {
  static const std::string kWhat = "cross-rank run counters";
  base::WireReader in(bytes, kWhat);
  CrossRankPlan plan;
  CrossRankCounters& counters = plan.counters;
  TELLER_RETURN_IF_ERROR(in.Header(kRunMagic, kCrossRankWireVersion));
  TELLER_RETURN_IF_ERROR(in.Value(&counters.matches, "matches"));
  TELLER_RETURN_IF_ERROR(in.Value(&counters.unmatched, "unmatched"));
  TELLER_RETURN_IF_ERROR(in.Value(&counters.matched_by_order, "matched_by_order"));
  TELLER_RETURN_IF_ERROR(in.Value(&counters.order_op_mismatch, "order_op_mismatch"));
  TELLER_RETURN_IF_ERROR(in.Value(&counters.unaligned_hosts, "unaligned_hosts"));
  TELLER_RETURN_IF_ERROR(in.Strings("notes", &plan.notes));
  TELLER_RETURN_IF_ERROR(in.End());
  return plan;
}

std::string EncodeStepOrderRecords(const StepOrderRecords& records) {
  base::WireWriter out(kStepOrderRecordsMagic, kCrossRankWireVersion);
  out.Strings(records.names);
  out.Value<uint32_t>(records.processes);
  out.Column(records.global_step);
  out.Column(records.rank);
  out.Column(records.process);
  out.Column(records.start_ns);
  out.Column(records.event);
  out.Column(records.name);
  return out.Take();
}

base::StatusOr<StepOrderRecords> DecodeStepOrderRecords(std::string_view bytes) {
  static const std::string kWhat = "step-order records";
  base::WireReader in(bytes, kWhat);
  StepOrderRecords records;
  TELLER_RETURN_IF_ERROR(in.Header(kStepOrderRecordsMagic, kCrossRankWireVersion));
  TELLER_RETURN_IF_ERROR(in.Strings("names", &records.names));
  TELLER_RETURN_IF_ERROR(in.Value(&records.processes, "processes"));
  TELLER_RETURN_IF_ERROR(in.Column("global_step", &records.global_step));
  TELLER_RETURN_IF_ERROR(in.Column("rank", &records.rank));
  TELLER_RETURN_IF_ERROR(in.Column("process", &records.process));
  TELLER_RETURN_IF_ERROR(in.Column("start_ns", &records.start_ns));
  TELLER_RETURN_IF_ERROR(in.Column("event", &records.event));
  TELLER_RETURN_IF_ERROR(in.Column("name", &records.name));
  TELLER_RETURN_IF_ERROR(in.End());
  TELLER_RETURN_IF_ERROR(CheckStepOrderRecords(records));
  return records;
}

std::string EncodeStepOrderPart(const StepOrderPlan::Part& part) {
  base::WireWriter out(kStepOrderPartMagic, kCrossRankWireVersion);
  out.Column(part.match);
  out.Column(part.event);
  return out.Take();
}

base::StatusOr<StepOrderPlan::Part> DecodeStepOrderPart(std::string_view bytes) {
  static const std::string kWhat = "step-order plan part";
  base::WireReader in(bytes, kWhat);
  StepOrderPlan::Part part;
  TELLER_RETURN_IF_ERROR(in.Header(kStepOrderPartMagic, kCrossRankWireVersion));
  TELLER_RETURN_IF_ERROR(in.Column("match", &part.match));
  TELLER_RETURN_IF_ERROR(in.Column("event", &part.event));
  TELLER_RETURN_IF_ERROR(in.End());
  TELLER_RETURN_IF_ERROR(in.SameRows(part.match, "match", part.event, "event"));
  return part;
}

}  // namespace teller::reconstruct
