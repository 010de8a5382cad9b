// Splitting a big Kineto chrome-trace JSON into time windows that can be imported and
// reconstructed one at a time (the windowed build, docs/reliability.md). Two streaming
// passes, each in memory that does not grow with the number of events:
//   PlanKinetoWindows  reads the events' times and picks cut times where no event is
//                      running (a quiet point), about every window_events events;
//   SplitKinetoWindows writes each event's JSON text, unchanged, into the Kineto file of
//                      its window, with the top-level values and the metadata events
//                      copied into every window.
// Events are assigned by their own `ts`, so a cut never separates a range from the
// events it contains, nor (at a quiet point) a kernel from a launch that ran before it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/progress.h"
#include "base/status.h"

namespace teller::import {

struct KinetoWindowPlan {
  // Window i holds the events with cuts_ts[i - 1] <= ts < cuts_ts[i] (the first and
  // last are open-ended), ts in the file's own unit and origin, in nanoseconds.
  std::vector<int64_t> cuts_ts;
  int64_t events = 0;           // elements of traceEvents
  int64_t metadata_events = 0;  // ph "M", copied into every window
  // Windows that grew past window_events because no quiet point came in time.
  int64_t windows_over_budget = 0;
  int64_t largest_window_events = 0;
  // Timeline resolution the cuts were chosen at (it coarsens on long traces so that
  // the plan's memory stays fixed).
  int64_t resolution_ns = 0;
  // Empty when the file was read to its end; else where it was cut and what was
  // expected there (the windows hold the complete events before the cut).
  std::string truncation;
  size_t windows() const { return cuts_ts.size() + 1; }
};

struct KinetoWindowOptions {
  int64_t window_events = 1'000'000;
  base::ProgressSink* progress = nullptr;
  // The finest timeline resolution, and the most timeline cells kept (the plan's memory
  // is about 8 bytes per cell).
  int64_t finest_resolution_ns = 100'000;
  size_t max_cells = size_t{1} << 20;
};

// Pass 1. Errors are those of the input (not a chrome trace, unreadable); a file cut
// short is planned from the events before the cut (import counts the truncation).
base::StatusOr<KinetoWindowPlan> PlanKinetoWindows(const std::string& path,
                                                   const KinetoWindowOptions& options);

// Pass 2: writes plan.windows() files DIR/window-NNNNN.json and returns their paths.
base::StatusOr<std::vector<std::string>> SplitKinetoWindows(const std::string& path,
                                                            const KinetoWindowPlan& plan,
                                                            const std::string& directory,
                                                            const KinetoWindowOptions& options);

}  // namespace teller::import
