#include "cause/oom_trend_wire.h"

#include "base/byte_io.h"

namespace teller::cause {
namespace {

constexpr std::string_view kSiteMagic = "TLOS";
constexpr std::string_view kTrendMagic = "TLOT";
constexpr size_t kSampleBytes = 3 * sizeof(int64_t);

base::Status DecodeDevice(base::WireReader* in, DeviceSamples* samples) {
  TELLER_RETURN_IF_ERROR(in->Value(&samples->device, "a GPU's id"));
  TELLER_RETURN_IF_ERROR(in->Value(&samples->count, "a GPU's sample count"));
  uint64_t recent = 0;
  TELLER_RETURN_IF_ERROR(in->Value(&recent, "a GPU's recent sample count"));
  if (recent > in->left() / kSampleBytes) {
    return in->Bad(fmt::format("{} recent samples, more than the {} bytes left hold", recent,
                               in->left()));
  }
  samples->recent.resize(recent);
  for (MemorySample& sample : samples->recent) {
    TELLER_RETURN_IF_ERROR(in->Value(&sample.ts, "a sample's time"));
    TELLER_RETURN_IF_ERROR(in->Value(&sample.allocated, "a sample's allocated bytes"));
    TELLER_RETURN_IF_ERROR(in->Value(&sample.reserved, "a sample's reserved bytes"));
  }
  return base::OkStatus();
}

}  // namespace

std::string EncodeOomSite(const OomSite& site) {
  base::WireWriter out(kSiteMagic, kOomTrendWireVersion);
  out.Value<uint8_t>(site.found ? 1 : 0);
  out.Value<int32_t>(site.device);
  out.Value<int64_t>(site.before_ns);
  return out.Take();
}

base::StatusOr<OomSite> DecodeOomSite(std::string_view bytes) {
  static const std::string kWhat = "out-of-memory site";
  base::WireReader in(bytes, kWhat);
  OomSite site;
  TELLER_RETURN_IF_ERROR(in.Header(kSiteMagic, kOomTrendWireVersion));
  TELLER_RETURN_IF_ERROR(in.Flag(&site.found, "the found flag"));
  TELLER_RETURN_IF_ERROR(in.Value(&site.device, "the GPU"));
  TELLER_RETURN_IF_ERROR(in.Value(&site.before_ns, "the time"));
  TELLER_RETURN_IF_ERROR(in.End());
  return site;
}

std::string EncodeMemoryTrendPart(const MemoryTrendPart& part) {
  base::WireWriter out(kTrendMagic, kOomTrendWireVersion);
  out.Value<uint64_t>(part.size());
  for (const DeviceSamples& samples : part) {
    out.Value<int32_t>(samples.device);
    out.Value<uint64_t>(samples.count);
    out.Value<uint64_t>(samples.recent.size());
    for (const MemorySample& sample : samples.recent) {
      out.Value<int64_t>(sample.ts);
      out.Value<int64_t>(sample.allocated);
      out.Value<int64_t>(sample.reserved);
    }
  }
  return out.Take();
}

base::StatusOr<MemoryTrendPart> DecodeMemoryTrendPart(std::string_view bytes) {
  static const std::string kWhat = "memory trend part";
  base::WireReader in(bytes, kWhat);
  TELLER_RETURN_IF_ERROR(in.Header(kTrendMagic, kOomTrendWireVersion));
  uint64_t devices = 0;
  TELLER_RETURN_IF_ERROR(in.Value(&devices, "the GPU count"));
  constexpr size_t kDeviceBytes = sizeof(int32_t) + 2 * sizeof(uint64_t);
  if (devices > in.left() / kDeviceBytes) {
    return in.Bad(
        fmt::format("{} GPUs, more than the {} bytes left hold", devices, in.left()));
  }
  MemoryTrendPart part(devices);
  for (DeviceSamples& samples : part) TELLER_RETURN_IF_ERROR(DecodeDevice(&in, &samples));
  TELLER_RETURN_IF_ERROR(in.End());
  return part;
}

}  // namespace teller::cause
