#include "reconstruct/request_rows_wire.h"

#include "base/byte_io.h"

namespace teller::reconstruct {
namespace {

constexpr std::string_view kRequestRowsMagic = "TLRQ";

}  // namespace

std::string EncodeRequestRows(const RequestRows& rows) {
  base::WireWriter out(kRequestRowsMagic, kRequestRowsWireVersion);
  out.Column(rows.process);
  out.Column(rows.rank);
  out.Column(rows.start_ns);
  out.Column(rows.end_ns);
  out.Column(rows.requests_begin);
  out.Column(rows.step_requests);
  out.Strings(rows.id);
  out.Column(rows.first_ns);
  out.Column(rows.last_ns);
  out.Column(rows.step_count);
  out.Value<uint32_t>(rows.processes);
  return out.Take();
}

base::StatusOr<RequestRows> DecodeRequestRows(std::string_view bytes) {
  static const std::string kWhat = "request rows";
  base::WireReader in(bytes, kWhat);
  RequestRows rows;
  TELLER_RETURN_IF_ERROR(in.Header(kRequestRowsMagic, kRequestRowsWireVersion));
  TELLER_RETURN_IF_ERROR(in.Column("process", &rows.process));
  TELLER_RETURN_IF_ERROR(in.Column("rank", &rows.rank));
  TELLER_RETURN_IF_ERROR(in.Column("start_ns", &rows.start_ns));
  TELLER_RETURN_IF_ERROR(in.Column("end_ns", &rows.end_ns));
  TELLER_RETURN_IF_ERROR(in.Column("requests_begin", &rows.requests_begin));
  TELLER_RETURN_IF_ERROR(in.Column("step_requests", &rows.step_requests));
  TELLER_RETURN_IF_ERROR(in.Strings("id", &rows.id));
  TELLER_RETURN_IF_ERROR(in.Column("first_ns", &rows.first_ns));
  TELLER_RETURN_IF_ERROR(in.Column("last_ns", &rows.last_ns));
  TELLER_RETURN_IF_ERROR(in.Column("step_count", &rows.step_count));
  TELLER_RETURN_IF_ERROR(in.Value(&rows.processes, "processes"));
  TELLER_RETURN_IF_ERROR(in.End());
  if (base::Status checked = CheckRequestRows(rows); !checked.ok()) {
    return in.Bad(checked.message());
  }
  return rows;
}

}  // namespace teller::reconstruct
