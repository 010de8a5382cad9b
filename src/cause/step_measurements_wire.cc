#include "cause/step_measurements_wire.h"

#include <algorithm>
#include <functional>
#include <utility>
#include <vector>

#include "base/byte_io.h"
#include "localize/operator_family.h"

namespace teller::cause {
namespace {

constexpr std::string_view kSummaryMagic = "TLMS";
constexpr std::string_view kMergedMagic = "TLMM";
constexpr std::string_view kRowsMagic = "TLMR";

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


// Every per-step column has a row per step.
base::Status CheckStepColumns(const base::WireReader& in, const StepMeasurements& r) {
  TELLER_RETURN_IF_ERROR(in.SameRows(r.rank, "rank", r.process, "process"));
  TELLER_RETURN_IF_ERROR(in.SameRows(r.rank, "rank", r.number, "number"));
  TELLER_RETURN_IF_ERROR(in.SameRows(r.rank, "rank", r.group, "group"));
  TELLER_RETURN_IF_ERROR(in.SameRows(r.rank, "rank", r.start_ns, "start_ns"));
  TELLER_RETURN_IF_ERROR(in.SameRows(r.rank, "rank", r.size, "size"));
  TELLER_RETURN_IF_ERROR(in.SameRows(r.rank, "rank", r.context, "context"));
  TELLER_RETURN_IF_ERROR(in.SameRows(r.rank, "rank", r.requests, "requests"));
  TELLER_RETURN_IF_ERROR(in.SameRows(r.rank, "rank", r.padded_size, "padded_size"));
  TELLER_RETURN_IF_ERROR(in.SameRows(r.rank, "rank", r.context_spread, "context_spread"));
  TELLER_RETURN_IF_ERROR(in.SameRows(r.rank, "rank", r.serving, "serving"));
  TELLER_RETURN_IF_ERROR(in.SameRows(r.rank, "rank", r.name, "name"));
  TELLER_RETURN_IF_ERROR(in.SameRows(r.rank, "rank", r.phase, "phase"));
  TELLER_RETURN_IF_ERROR(in.SameRows(r.rank, "rank", r.structure_bucket, "structure_bucket"));
  TELLER_RETURN_IF_ERROR(in.SameRows(r.rank, "rank", r.families, "families"));
  TELLER_RETURN_IF_ERROR(in.SameRows(r.rank, "rank", r.device_work, "device_work"));
  return in.SameRows(r.process_node, "process_node", r.process_host, "process_host");
}

// Each step's names, process and phase, and each process's node and host, in range.
base::Status CheckStepValues(const base::WireReader& in, const StepMeasurements& r) {
  for (size_t s = 0; s < r.steps(); ++s) {
    if (r.name[s] >= r.names.size() || r.process[s] >= r.process_node.size() ||
        r.phase[s] > model::StepPhase::kMixed) {
      return in.Bad(fmt::format("step {}: name, process or phase out of range", s));
    }
  }
  for (size_t p = 0; p < r.process_node.size(); ++p) {
    const uint32_t host = r.process_host[p];
    if (r.process_node[p] < -1 || (host != StepMeasurements::kNoHost && host >= r.names.size())) {
      return in.Bad(fmt::format("process {}: node or host out of range", p));
    }
  }
  return base::OkStatus();
}

// Offsets from 0 to the cells, ascending; each step's cells in range and strictly
// ascending by (channel, family), as StepMeasurements::Find searches them.
base::Status CheckCells(const base::WireReader& in, const StepMeasurements& r) {
  TELLER_RETURN_IF_ERROR(in.SameRows(r.channel, "channel", r.family, "family"));
  TELLER_RETURN_IF_ERROR(in.SameRows(r.channel, "channel", r.value, "value"));
  TELLER_RETURN_IF_ERROR(in.SameRows(r.channel, "channel", r.count, "count"));
  if (r.cells_begin.size() != r.steps() + 1 || r.cells_begin.front() != 0 ||
      r.cells_begin.back() != r.cells() ||
      !std::is_sorted(r.cells_begin.begin(), r.cells_begin.end())) {
    return in.Bad("cells_begin not a row per step and one, ascending from 0 to the cells");
  }
  for (size_t c = 0; c < r.cells(); ++c) {
    if (static_cast<int>(r.channel[c]) >= kChannelCount ||
        static_cast<int>(r.family[c]) >= localize::kOperatorFamilyCount) {
      return in.Bad(fmt::format("cell {}: channel or family out of range", c));
    }
  }
  for (size_t s = 0; s < r.steps(); ++s) {
    for (uint32_t c = r.cells_begin[s] + 1; c < r.cells_begin[s + 1]; ++c) {
      if (std::pair(r.channel[c - 1], r.family[c - 1]) >= std::pair(r.channel[c], r.family[c])) {
        return in.Bad(fmt::format("step {}: cells not ascending by channel and family", s));
      }
    }
  }
  return base::OkStatus();
}

base::Status ReadStepColumns(base::WireReader* in, StepMeasurements* r) {
  TELLER_RETURN_IF_ERROR(in->Column("rank", &r->rank));
  TELLER_RETURN_IF_ERROR(in->Column("process", &r->process));
  TELLER_RETURN_IF_ERROR(in->Column("number", &r->number));
  TELLER_RETURN_IF_ERROR(in->Column("group", &r->group));
  TELLER_RETURN_IF_ERROR(in->Column("start_ns", &r->start_ns));
  TELLER_RETURN_IF_ERROR(in->Column("size", &r->size));
  TELLER_RETURN_IF_ERROR(in->Column("context", &r->context));
  TELLER_RETURN_IF_ERROR(in->Column("requests", &r->requests));
  TELLER_RETURN_IF_ERROR(in->Column("padded_size", &r->padded_size));
  TELLER_RETURN_IF_ERROR(in->Column("context_spread", &r->context_spread));
  TELLER_RETURN_IF_ERROR(in->Column("cells_begin", &r->cells_begin));
  TELLER_RETURN_IF_ERROR(in->Column("channel", &r->channel));
  TELLER_RETURN_IF_ERROR(in->Column("family", &r->family));
  TELLER_RETURN_IF_ERROR(in->Column("value", &r->value));
  return in->Column("count", &r->count);
}

base::Status ReadGrouping(base::WireReader* in, StepMeasurements* r) {
  TELLER_RETURN_IF_ERROR(in->Column("serving", &r->serving));
  TELLER_RETURN_IF_ERROR(in->Column("name", &r->name));
  TELLER_RETURN_IF_ERROR(in->Column("phase", &r->phase));
  TELLER_RETURN_IF_ERROR(in->Column("structure_bucket", &r->structure_bucket));
  TELLER_RETURN_IF_ERROR(in->Column("families", &r->families));
  TELLER_RETURN_IF_ERROR(in->Column("device_work", &r->device_work));
  TELLER_RETURN_IF_ERROR(in->Column("process_node", &r->process_node));
  TELLER_RETURN_IF_ERROR(in->Column("process_host", &r->process_host));
  TELLER_RETURN_IF_ERROR(in->Strings("names", &r->names));
  TELLER_RETURN_IF_ERROR(in->Flag(&r->has_step_requests, "has_step_requests"));
  return in->Flag(&r->has_tokens_arg, "has_tokens_arg");
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
  out.Value<uint8_t>(summary.has_step_requests ? 1 : 0);
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
  TELLER_RETURN_IF_ERROR(in.Flag(&s.has_step_requests, "has_step_requests"));
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
  out.Value<uint8_t>(merged.any_step_requests ? 1 : 0);
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
  TELLER_RETURN_IF_ERROR(in.Flag(&m.any_step_requests, "any_step_requests"));
  TELLER_RETURN_IF_ERROR(in.End());
  TELLER_RETURN_IF_ERROR(CheckMerged(in, m));
  return m;
}

std::string EncodeStepMeasurements(const StepMeasurements& rows) {
  base::WireWriter out(kRowsMagic, kStepMeasurementsWireVersion);
  out.Column(rows.rank);
  out.Column(rows.process);
  out.Column(rows.number);
  out.Column(rows.group);
  out.Column(rows.start_ns);
  out.Column(rows.size);
  out.Column(rows.context);
  out.Column(rows.requests);
  out.Column(rows.padded_size);
  out.Column(rows.context_spread);
  out.Column(rows.cells_begin);
  out.Column(rows.channel);
  out.Column(rows.family);
  out.Column(rows.value);
  out.Column(rows.count);
  out.Column(rows.serving);
  out.Column(rows.name);
  out.Column(rows.phase);
  out.Column(rows.structure_bucket);
  out.Column(rows.families);
  out.Column(rows.device_work);
  out.Column(rows.process_node);
  out.Column(rows.process_host);
  out.Strings(rows.names);
  out.Value<uint8_t>(rows.has_step_requests ? 1 : 0);
  out.Value<uint8_t>(rows.has_tokens_arg ? 1 : 0);
  return out.Take();
}

base::StatusOr<StepMeasurements> DecodeStepMeasurements(std::string_view bytes) {
  static const std::string kWhat = "step measurements";
  base::WireReader in(bytes, kWhat);
  StepMeasurements rows;
  TELLER_RETURN_IF_ERROR(in.Header(kRowsMagic, kStepMeasurementsWireVersion));
  TELLER_RETURN_IF_ERROR(ReadStepColumns(&in, &rows));
  TELLER_RETURN_IF_ERROR(ReadGrouping(&in, &rows));
  TELLER_RETURN_IF_ERROR(in.End());
  TELLER_RETURN_IF_ERROR(CheckStepColumns(in, rows));
  TELLER_RETURN_IF_ERROR(CheckCells(in, rows));
  TELLER_RETURN_IF_ERROR(CheckStepValues(in, rows));
  return rows;
}

}  // namespace teller::cause
