// The bytes of the memory trend in parts (oom_report.h): the site the first process sends
// every process (OomSite) and a part's samples for it (MemoryTrendPart). Little-endian
// (base/byte_io.h): a 4-byte magic and a u32 version, then each field in turn. Decoding
// checks every count against the bytes left; a short, oversized or foreign buffer is an
// error naming what was expected and the offset.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "cause/oom_report.h"

namespace teller::cause {

inline constexpr uint32_t kOomTrendWireVersion = 1;

std::string EncodeOomSite(const OomSite& site);
base::StatusOr<OomSite> DecodeOomSite(std::string_view bytes);

// Per GPU: its id, count and recent samples (24 bytes each).
std::string EncodeMemoryTrendPart(const MemoryTrendPart& part);
base::StatusOr<MemoryTrendPart> DecodeMemoryTrendPart(std::string_view bytes);

}  // namespace teller::cause
