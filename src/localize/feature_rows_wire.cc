#include "localize/feature_rows_wire.h"

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
  TELLER_RETURN_IF_ERROR(in->Column("mean_ns", &f->mean_ns));
  TELLER_RETURN_IF_ERROR(in->Column("max_ns", &f->max_ns));
  TELLER_RETURN_IF_ERROR(in->Column("queue_max_ns", &f->queue_max_ns));
  TELLER_RETURN_IF_ERROR(in->Column("gap_ns", &f->gap_ns));
  TELLER_RETURN_IF_ERROR(in->Column("share", &f->share));
  TELLER_RETURN_IF_ERROR(in->Column("skew_ns", &f->skew_ns));
  return in->Column("order_breaks", &f->order_breaks);
}

base::Status ReadExamples(base::WireReader* in, FeatureRows* rows) {
  TELLER_RETURN_IF_ERROR(in->Column("longest_begin", &rows->longest_begin));
  TELLER_RETURN_IF_ERROR(in->Column("longest", &rows->longest));
  TELLER_RETURN_IF_ERROR(in->Column("delayed_begin", &rows->delayed_begin));
  TELLER_RETURN_IF_ERROR(in->Column("delayed", &rows->delayed));
  TELLER_RETURN_IF_ERROR(in->Strings("names", &rows->names));
  TELLER_RETURN_IF_ERROR(in->Value(&rows->examples, "examples"));
  TELLER_RETURN_IF_ERROR(in->Value(&rows->nodes, "nodes"));
  uint8_t has_step_requests = 0;
  TELLER_RETURN_IF_ERROR(in->Value(&has_step_requests, "has_step_requests"));
  if (has_step_requests > 1) return in->Bad("has_step_requests neither 0 nor 1");
  rows->has_step_requests = has_step_requests == 1;
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
  out.Column(f.mean_ns);
  out.Column(f.max_ns);
  out.Column(f.queue_max_ns);
  out.Column(f.gap_ns);
  out.Column(f.share);
  out.Column(f.skew_ns);
  out.Column(f.order_breaks);
  out.Column(rows.longest_begin);
  out.Column(rows.longest);
  out.Column(rows.delayed_begin);
  out.Column(rows.delayed);
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
  TELLER_RETURN_IF_ERROR(ReadExamples(&in, &rows));
  TELLER_RETURN_IF_ERROR(in.End());
  if (base::Status checked = CheckFeatureRows(rows); !checked.ok()) {
    return in.Bad(checked.message());
  }
  return rows;
}

}  // namespace teller::localize
