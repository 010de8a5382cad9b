#include "reconstruct/cross_rank_wire.h"

#include <cstring>
#include <vector>

#include "base/byte_io.h"

namespace teller::reconstruct {
namespace {

constexpr std::string_view kRecordsMagic = "TLCR";
constexpr std::string_view kPartMagic = "TLCP";
constexpr std::string_view kRunMagic = "TLCN";

// Writes the header, then columns (a u64 row count, then the values) and string lists.
class WireWriter : public base::ByteWriter {
 public:
  explicit WireWriter(std::string_view magic) {
    Bytes(magic);
    Value<uint32_t>(kCrossRankWireVersion);
  }
};

// Reads what WireWriter writes; `what` names the buffer in errors.
class WireReader : public base::ByteReader {
 public:
  WireReader(std::string_view bytes, const std::string& what)
      : ByteReader(bytes, what), what_(what) {}

  base::Status Header(std::string_view magic) {
    std::string_view found;
    TELLER_RETURN_IF_ERROR(Bytes(magic.size(), "the magic", &found));
    if (found != magic) {
      return base::DataLoss("{}: offset 0: expected the magic \"{}\"", what_, magic);
    }
    uint32_t version = 0;
    TELLER_RETURN_IF_ERROR(Value(&version, "the version"));
    if (version != kCrossRankWireVersion) {
      return base::DataLoss("{}: offset {}: expected version {}, found {}", what_, magic.size(),
                            kCrossRankWireVersion, version);
    }
    return base::OkStatus();
  }
  base::Status End() {
    if (left() != 0) return Bad(fmt::format("expected the end, {} bytes follow", left()));
    return base::OkStatus();
  }

 private:
  const std::string& what_;
};

template <typename A, typename B>
base::Status SameRows(const WireReader& in, const std::vector<A>& a, std::string_view a_name,
                      const std::vector<B>& b, std::string_view b_name) {
  if (a.size() == b.size()) return base::OkStatus();
  return in.Bad(fmt::format("{} rows of {} but {} of {}", a.size(), a_name, b.size(), b_name));
}

}  // namespace

std::string EncodeCollectiveRecords(const CollectiveRecords& records) {
  WireWriter out(kRecordsMagic);
  out.Strings(records.names);
  out.Column(records.process_rank);
  out.Column(records.process_host);
  out.Column(records.process_node);
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
  WireReader in(bytes, kWhat);
  CollectiveRecords records;
  TELLER_RETURN_IF_ERROR(in.Header(kRecordsMagic));
  TELLER_RETURN_IF_ERROR(in.Strings("names", &records.names));
  TELLER_RETURN_IF_ERROR(in.Column("process_rank", &records.process_rank));
  TELLER_RETURN_IF_ERROR(in.Column("process_host", &records.process_host));
  TELLER_RETURN_IF_ERROR(in.Column("process_node", &records.process_node));
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
  WireWriter out(kPartMagic);
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
  WireReader in(bytes, kWhat);
  CrossRankPlan::Part part;
  TELLER_RETURN_IF_ERROR(in.Header(kPartMagic));
  TELLER_RETURN_IF_ERROR(in.Column("clock_offset_ns", &part.clock_offset_ns));
  TELLER_RETURN_IF_ERROR(in.Column("clock_uncertainty_ns", &part.clock_uncertainty_ns));
  TELLER_RETURN_IF_ERROR(in.Column("clock_aligned", &part.clock_aligned));
  TELLER_RETURN_IF_ERROR(in.Column("rank", &part.rank));
  TELLER_RETURN_IF_ERROR(in.Column("rank_clock_offset_ns", &part.rank_clock_offset_ns));
  TELLER_RETURN_IF_ERROR(in.Column("match", &part.match));
  TELLER_RETURN_IF_ERROR(in.Column("match_collective", &part.match_collective));
  TELLER_RETURN_IF_ERROR(in.End());
  TELLER_RETURN_IF_ERROR(SameRows(in, part.clock_offset_ns, "clock_offset_ns",
                                  part.clock_uncertainty_ns, "clock_uncertainty_ns"));
  TELLER_RETURN_IF_ERROR(
      SameRows(in, part.clock_offset_ns, "clock_offset_ns", part.clock_aligned, "clock_aligned"));
  TELLER_RETURN_IF_ERROR(
      SameRows(in, part.rank, "rank", part.rank_clock_offset_ns, "rank_clock_offset_ns"));
  TELLER_RETURN_IF_ERROR(
      SameRows(in, part.match, "match", part.match_collective, "match_collective"));
  return part;
}

std::string EncodeCrossRankRun(const CrossRankPlan& plan) {
  WireWriter out(kRunMagic);
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
  WireReader in(bytes, kWhat);
  CrossRankPlan plan;
  CrossRankCounters& counters = plan.counters;
  TELLER_RETURN_IF_ERROR(in.Header(kRunMagic));
  TELLER_RETURN_IF_ERROR(in.Value(&counters.matches, "matches"));
  TELLER_RETURN_IF_ERROR(in.Value(&counters.unmatched, "unmatched"));
  TELLER_RETURN_IF_ERROR(in.Value(&counters.matched_by_order, "matched_by_order"));
  TELLER_RETURN_IF_ERROR(in.Value(&counters.order_op_mismatch, "order_op_mismatch"));
  TELLER_RETURN_IF_ERROR(in.Value(&counters.unaligned_hosts, "unaligned_hosts"));
  TELLER_RETURN_IF_ERROR(in.Strings("notes", &plan.notes));
  TELLER_RETURN_IF_ERROR(in.End());
  return plan;
}

}  // namespace teller::reconstruct
