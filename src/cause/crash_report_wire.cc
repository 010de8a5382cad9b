#include "cause/crash_report_wire.h"

#include "base/byte_io.h"

namespace teller::cause {
namespace {

constexpr std::string_view kMagic = "TLCK";

void EncodeKernel(const CrashKernel& kernel, base::WireWriter* out) {
  out->String(kernel.name);
  out->Value<int64_t>(kernel.start_ns);
  out->Value<int64_t>(kernel.dur_ns);
  out->Value<int64_t>(kernel.normal_ns);
  out->String(kernel.launched_from);
  out->Value<uint8_t>(kernel.in_graph ? 1 : 0);
  out->String(kernel.launch_call);
}

base::Status ReadText(base::WireReader* in, std::string_view what, std::string* text) {
  std::string_view view;
  TELLER_RETURN_IF_ERROR(in->String(what, &view));
  *text = std::string(view);
  return base::OkStatus();
}


base::Status DecodeKernel(base::WireReader* in, CrashKernel* kernel) {
  TELLER_RETURN_IF_ERROR(ReadText(in, "a kernel's name", &kernel->name));
  TELLER_RETURN_IF_ERROR(in->Value(&kernel->start_ns, "a kernel's start"));
  TELLER_RETURN_IF_ERROR(in->Value(&kernel->dur_ns, "a kernel's duration"));
  TELLER_RETURN_IF_ERROR(in->Value(&kernel->normal_ns, "a kernel's normal duration"));
  TELLER_RETURN_IF_ERROR(ReadText(in, "a kernel's launch site", &kernel->launched_from));
  TELLER_RETURN_IF_ERROR(in->Flag(&kernel->in_graph, "a kernel's graph flag"));
  return ReadText(in, "a kernel's launch call", &kernel->launch_call);
}

}  // namespace

std::string EncodeCrashReport(const CrashReport& report) {
  base::WireWriter out(kMagic, kCrashReportWireVersion);
  out.Value<uint8_t>(report.found ? 1 : 0);
  out.Value<int32_t>(report.rank);
  out.String(report.call);
  out.Value<int64_t>(report.error);
  out.String(report.error_name);
  out.Value<int64_t>(report.at_ns);
  out.Value<uint8_t>(static_cast<uint8_t>(report.category));
  out.Value<uint8_t>(report.has_suspect ? 1 : 0);
  EncodeKernel(report.suspect, &out);
  out.Value<uint8_t>(report.has_running ? 1 : 0);
  EncodeKernel(report.running, &out);
  out.Value<int64_t>(report.step);
  out.Strings(report.requests);
  return out.Take();
}

base::StatusOr<CrashReport> DecodeCrashReport(std::string_view bytes) {
  static const std::string kWhat = "crash report";
  base::WireReader in(bytes, kWhat);
  CrashReport report;
  TELLER_RETURN_IF_ERROR(in.Header(kMagic, kCrashReportWireVersion));
  TELLER_RETURN_IF_ERROR(in.Flag(&report.found, "the found flag"));
  TELLER_RETURN_IF_ERROR(in.Value(&report.rank, "the rank"));
  TELLER_RETURN_IF_ERROR(ReadText(&in, "the call", &report.call));
  TELLER_RETURN_IF_ERROR(in.Value(&report.error, "the error"));
  TELLER_RETURN_IF_ERROR(ReadText(&in, "the error's name", &report.error_name));
  TELLER_RETURN_IF_ERROR(in.Value(&report.at_ns, "the time"));
  uint8_t category = 0;
  TELLER_RETURN_IF_ERROR(in.Value(&category, "the category"));
  if (category >= model::kFaultCategoryCount) {
    return in.Bad(
        fmt::format("category {}, below {} expected", category, model::kFaultCategoryCount));
  }
  report.category = static_cast<model::FaultCategory>(category);
  TELLER_RETURN_IF_ERROR(in.Flag(&report.has_suspect, "the suspect flag"));
  TELLER_RETURN_IF_ERROR(DecodeKernel(&in, &report.suspect));
  TELLER_RETURN_IF_ERROR(in.Flag(&report.has_running, "the running flag"));
  TELLER_RETURN_IF_ERROR(DecodeKernel(&in, &report.running));
  TELLER_RETURN_IF_ERROR(in.Value(&report.step, "the step"));
  TELLER_RETURN_IF_ERROR(in.Strings("the requests", &report.requests));
  TELLER_RETURN_IF_ERROR(in.End());
  return report;
}

}  // namespace teller::cause
