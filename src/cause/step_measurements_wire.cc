#include "cause/step_measurements_wire.h"

#include <algorithm>
#include <functional>
#include <vector>

#include "base/byte_io.h"

namespace teller::cause {
namespace {

constexpr std::string_view kSummaryMagic = "TLMS";
constexpr std::string_view kMergedMagic = "TLMM";

template <typename T>
bool StrictlyAscending(const std::vector<T>& values) {
  return std::adjacent_find(values.begin(), values.end(), std::greater_equal<T>()) == values.end();
}

base::Status CheckMerged(const base::WireReader& in, const MergedMeasurementSummary& m) {
  TELLER_RETURN_IF_ERROR(in.SameRows(m.match, "match", m.members, "members"));
  TELLER_RETURN_IF_ERROR(in.SameRows(m.match, "match", m.has_device, "has_device"));
  TELLER_RETURN_IF_ERROR(in.SameRows(m.match, "match", m.last_arrival_ns, "last_arrival_ns"));
  TELLER_RETURN_IF_ERROR(in.SameRows(m.global_step, "global_step", m.largest_size, "largest_size"));
  if (!StrictlyAscending(m.match)) return in.Bad("match ids not distinct and ascending");
  if (!StrictlyAscending(m.global_step)) return in.Bad("global steps not distinct and ascending");
  return base::OkStatus();
}

}  // namespace

std::string EncodeMeasurementSummary(const MeasurementSummary& summary) {
  base::WireWriter out(kSummaryMagic, kStepMeasurementsWireVersion);
  out.Column(summary.match);
  out.Column(summary.device_members);
  out.Column(summary.host_members);
  out.Column(summary.device_last_start_ns);
  out.Column(summary.host_last_start_ns);
  out.Column(summary.global_step);
  out.Column(summary.largest_size);
  return out.Take();
}

base::StatusOr<MeasurementSummary> DecodeMeasurementSummary(std::string_view bytes) {
  static const std::string kWhat = "measurement summary";
  base::WireReader in(bytes, kWhat);
  MeasurementSummary s;
  TELLER_RETURN_IF_ERROR(in.Header(kSummaryMagic, kStepMeasurementsWireVersion));
  TELLER_RETURN_IF_ERROR(in.Column("match", &s.match));
  TELLER_RETURN_IF_ERROR(in.Column("device_members", &s.device_members));
  TELLER_RETURN_IF_ERROR(in.Column("host_members", &s.host_members));
  TELLER_RETURN_IF_ERROR(in.Column("device_last_start_ns", &s.device_last_start_ns));
  TELLER_RETURN_IF_ERROR(in.Column("host_last_start_ns", &s.host_last_start_ns));
  TELLER_RETURN_IF_ERROR(in.Column("global_step", &s.global_step));
  TELLER_RETURN_IF_ERROR(in.Column("largest_size", &s.largest_size));
  TELLER_RETURN_IF_ERROR(in.End());
  TELLER_RETURN_IF_ERROR(CheckMeasurementSummary(s));
  return s;
}

std::string EncodeMergedMeasurementSummary(const MergedMeasurementSummary& merged) {
  base::WireWriter out(kMergedMagic, kStepMeasurementsWireVersion);
  out.Column(merged.match);
  out.Column(merged.members);
  out.Column(merged.has_device);
  out.Column(merged.last_arrival_ns);
  out.Column(merged.global_step);
  out.Column(merged.largest_size);
  return out.Take();
}

base::StatusOr<MergedMeasurementSummary> DecodeMergedMeasurementSummary(std::string_view bytes) {
  static const std::string kWhat = "merged measurement summary";
  base::WireReader in(bytes, kWhat);
  MergedMeasurementSummary m;
  TELLER_RETURN_IF_ERROR(in.Header(kMergedMagic, kStepMeasurementsWireVersion));
  TELLER_RETURN_IF_ERROR(in.Column("match", &m.match));
  TELLER_RETURN_IF_ERROR(in.Column("members", &m.members));
  TELLER_RETURN_IF_ERROR(in.Column("has_device", &m.has_device));
  TELLER_RETURN_IF_ERROR(in.Column("last_arrival_ns", &m.last_arrival_ns));
  TELLER_RETURN_IF_ERROR(in.Column("global_step", &m.global_step));
  TELLER_RETURN_IF_ERROR(in.Column("largest_size", &m.largest_size));
  TELLER_RETURN_IF_ERROR(in.End());
  TELLER_RETURN_IF_ERROR(CheckMerged(in, m));
  return m;
}

}  // namespace teller::cause
