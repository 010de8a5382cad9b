// Chrome-trace JSON of a reconstructed trace, which ui.perfetto.dev opens: one
// process per traced process, one track per thread and per device stream, flows
// from each launch to the device work it started, request ids in step args.
#pragma once

#include <string>

#include "base/status.h"
#include "model/trace.h"

namespace teller::report {

struct PerfettoOptions {
  // Export only events overlapping [window_start_ns, window_end_ns) when set.
  int64_t window_start_ns = INT64_MIN;
  int64_t window_end_ns = INT64_MAX;
};

// Timestamps are microseconds with three decimals (exact ns) relative to the
// trace's first event; the origin in UTC epoch ns is in otherData.teller_origin_ns.
base::Status ExportPerfetto(const model::Trace& trace, const std::string& path,
                            const PerfettoOptions& options);

}  // namespace teller::report
