#include "localize/feature_rows_wire.h"

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "base/byte_io.h"

namespace teller::localize {
namespace {

constexpr std::string_view kRowsMagic = "TLFR";

base::Status ReadSteps(base::WireReader* in, FeatureRows* rows) {
  TELLER_RETURN_IF_ERROR(in->Column("rank", &rows->rank));
  TELLER_RETURN_IF_ERROR(in->Column("number", &rows->number));
  TELLER_RETURN_IF_ERROR(in->Column("global_step", &rows->global_step));
  TELLER_RETURN_IF_ERROR(in->Column("phase", &rows->phase));
  TELLER_RETURN_IF_ERROR(in->Column("name", &rows->name));
  TELLER_RETURN_IF_ERROR(in->Column("batch_bucket", &rows->batch_bucket));
  TELLER_RETURN_IF_ERROR(in->Column("requests", &rows->requests));
  TELLER_RETURN_IF_ERROR(in->Column("start_ns", &rows->start_ns));
  TELLER_RETURN_IF_ERROR(in->Column("dur_ns", &rows->dur_ns));
  return in->Column("first_node", &rows->first_node);
}

base::Status ReadFeatures(base::WireReader* in, StepFeatures* f) {
  TELLER_RETURN_IF_ERROR(in->Column("step", &f->step));
  TELLER_RETURN_IF_ERROR(in->Column("family", &f->family));
  TELLER_RETURN_IF_ERROR(in->Column("count", &f->count));
  TELLER_RETURN_IF_ERROR(in->Column("total_ns", &f->total_ns));
  TELLER_RETURN_IF_ERROR(in->Column("max_ns", &f->max_ns));
  TELLER_RETURN_IF_ERROR(in->Column("queue_max_ns", &f->queue_max_ns));
  TELLER_RETURN_IF_ERROR(in->Column("gap_ns", &f->gap_ns));
  TELLER_RETURN_IF_ERROR(in->Column("skew_ns", &f->skew_ns));
  return in->Column("order_breaks", &f->order_breaks);
}

// Examples' offsets as u16 when every one fits (most steps have fewer than 65,536 nodes),
// else u32.
bool OffsetsFitU16(const FeatureRows& rows) {
  auto fits = [](uint32_t offset) { return offset <= UINT16_MAX; };
  return std::all_of(rows.longest.begin(), rows.longest.end(), fits) &&
         std::all_of(rows.delayed.begin(), rows.delayed.end(), fits);
}

void WriteOffsets(const std::vector<uint32_t>& offsets, bool narrow, base::WireWriter* out) {
  if (!narrow) return out->Column(offsets);
  out->Column(std::vector<uint16_t>(offsets.begin(), offsets.end()));
}

base::Status ReadOffsets(base::WireReader* in, uint8_t bytes, std::string_view what,
                         std::vector<uint32_t>* offsets) {
  if (bytes == 4) return in->Column(what, offsets);
  std::vector<uint16_t> narrow;
  TELLER_RETURN_IF_ERROR(in->Column(what, &narrow));
  offsets->assign(narrow.begin(), narrow.end());
  return base::OkStatus();
}

base::Status ReadExamples(base::WireReader* in, FeatureRows* rows,
                          std::vector<uint8_t>* own_delays) {
  uint8_t offset_bytes = 0;
  TELLER_RETURN_IF_ERROR(in->Value(&offset_bytes, "the examples' offset width"));
  if (offset_bytes != 2 && offset_bytes != 4) return in->Bad("an offset width neither 2 nor 4");
  TELLER_RETURN_IF_ERROR(ReadOffsets(in, offset_bytes, "longest", &rows->longest));
  TELLER_RETURN_IF_ERROR(in->Column("own_delays", own_delays));
  TELLER_RETURN_IF_ERROR(ReadOffsets(in, offset_bytes, "delayed", &rows->delayed));
  TELLER_RETURN_IF_ERROR(in->Strings("names", &rows->names));
  TELLER_RETURN_IF_ERROR(in->Value(&rows->examples, "examples"));
  TELLER_RETURN_IF_ERROR(in->Value(&rows->nodes, "nodes"));
  uint8_t has_step_requests = 0;
  TELLER_RETURN_IF_ERROR(in->Value(&has_step_requests, "has_step_requests"));
  if (has_step_requests > 1) return in->Bad("has_step_requests neither 0 nor 1");
  rows->has_step_requests = has_step_requests == 1;
  return base::OkStatus();
}

// What the bytes leave out, as FeatureRowsOfPart makes it: mean_ns and share from the
// count, total and step duration (as ComputeStepFeatures computes them), and the examples'
// offsets from the counts (min(count, examples) longest, as many delayed or none).
base::Status DeriveColumns(const base::WireReader& in, const std::vector<uint8_t>& own_delays,
                           FeatureRows* rows) {
  StepFeatures& f = rows->features;
  const size_t count = f.step.size();
  TELLER_RETURN_IF_ERROR(in.SameRows(f.step, "step", f.count, "count"));
  TELLER_RETURN_IF_ERROR(in.SameRows(f.step, "step", f.total_ns, "total_ns"));
  TELLER_RETURN_IF_ERROR(in.SameRows(f.step, "step", own_delays, "own_delays"));
  TELLER_RETURN_IF_ERROR(in.SameRows(rows->rank, "rank", rows->dur_ns, "dur_ns"));
  uint64_t longest = 0, delayed = 0;
  rows->longest_begin.assign(1, 0);
  rows->delayed_begin.assign(1, 0);
  for (size_t row = 0; row < count; ++row) {
    if (f.step[row].value() >= rows->steps() || f.count[row] < 1 || own_delays[row] > 1) {
      return in.Bad(
          fmt::format("row {}: a step out of range, no instance or a flag not 0 or 1", row));
    }
    const uint64_t listed = std::min<uint64_t>(static_cast<uint64_t>(f.count[row]), rows->examples);
    longest += listed;
    delayed += own_delays[row] * listed;
    if (longest > rows->longest.size() || delayed > rows->delayed.size()) {
      return in.Bad(fmt::format("row {}: more examples than the {} longest and {} delayed listed",
                                row, rows->longest.size(), rows->delayed.size()));
    }
    rows->longest_begin.push_back(static_cast<uint32_t>(longest));
    rows->delayed_begin.push_back(static_cast<uint32_t>(delayed));
    f.mean_ns.push_back(f.total_ns[row] / f.count[row]);
    const int64_t step_ns = std::max<int64_t>(1, rows->dur_ns[f.step[row].value()]);
    f.share.push_back(static_cast<double>(f.total_ns[row]) / static_cast<double>(step_ns));
  }
  return base::OkStatus();
}

}  // namespace

std::string EncodeFeatureRows(const FeatureRows& rows) {
  base::WireWriter out(kRowsMagic, kFeatureRowsWireVersion);
  out.Column(rows.rank);
  out.Column(rows.number);
  out.Column(rows.global_step);
  out.Column(rows.phase);
  out.Column(rows.name);
  out.Column(rows.batch_bucket);
  out.Column(rows.requests);
  out.Column(rows.start_ns);
  out.Column(rows.dur_ns);
  out.Column(rows.first_node);
  const StepFeatures& f = rows.features;
  out.Column(f.step);
  out.Column(f.family);
  out.Column(f.count);
  out.Column(f.total_ns);
  out.Column(f.max_ns);
  out.Column(f.queue_max_ns);
  out.Column(f.gap_ns);
  out.Column(f.skew_ns);
  out.Column(f.order_breaks);
  const bool narrow = OffsetsFitU16(rows);
  out.Value<uint8_t>(narrow ? 2 : 4);
  WriteOffsets(rows.longest, narrow, &out);
  std::vector<uint8_t> own_delays;
  for (size_t row = 0; row < f.size(); ++row) {
    own_delays.push_back(rows.delayed_begin[row + 1] > rows.delayed_begin[row] ? 1 : 0);
  }
  out.Column(own_delays);
  WriteOffsets(rows.delayed, narrow, &out);
  out.Strings(rows.names);
  out.Value<uint32_t>(rows.examples);
  out.Value<uint32_t>(rows.nodes);
  out.Value<uint8_t>(rows.has_step_requests ? 1 : 0);
  return out.Take();
}

base::StatusOr<FeatureRows> DecodeFeatureRows(std::string_view bytes) {
  static const std::string kWhat = "feature rows";
  base::WireReader in(bytes, kWhat);
  FeatureRows rows;
  TELLER_RETURN_IF_ERROR(in.Header(kRowsMagic, kFeatureRowsWireVersion));
  TELLER_RETURN_IF_ERROR(ReadSteps(&in, &rows));
  TELLER_RETURN_IF_ERROR(ReadFeatures(&in, &rows.features));
  std::vector<uint8_t> own_delays;
  TELLER_RETURN_IF_ERROR(ReadExamples(&in, &rows, &own_delays));
  TELLER_RETURN_IF_ERROR(in.End());
  TELLER_RETURN_IF_ERROR(DeriveColumns(in, own_delays, &rows));
  if (base::Status checked = CheckFeatureRows(rows); !checked.ok()) {
    return in.Bad(checked.message());
  }
  return rows;
}

}  // namespace teller::localize
