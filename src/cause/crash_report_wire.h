// The bytes of a part's crash report (crash_report.h) on their way to the place that
// merges the parts' (MergeCrashReports). Little-endian (base/byte_io.h): a 4-byte magic
// and a u32 version, then each field in turn, strings as a u64 length and their bytes.
// Decoding checks every length against the bytes left; a short, oversized or foreign
// buffer is an error naming what was expected and the offset.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "cause/crash_report.h"

namespace teller::cause {

inline constexpr uint32_t kCrashReportWireVersion = 1;

std::string EncodeCrashReport(const CrashReport& report);
base::StatusOr<CrashReport> DecodeCrashReport(std::string_view bytes);

}  // namespace teller::cause
