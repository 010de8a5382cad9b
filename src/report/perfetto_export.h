// Chrome-trace JSON of a reconstructed trace, which ui.perfetto.dev opens: one
// process per traced process, one track per thread and per device stream, flows
// from each launch to the device work it started, request ids in step args.
//
// A diagnosis can be marked in the export (MarkDiagnosis): suspect nodes and
// abnormal STEP ranges get a Chrome-trace colour (cname) and teller_* args, and a
// "teller diagnosis" track holds one slice per abnormal step over the same window
// the HTML report shows for it (docs/report.md).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

#include "base/status.h"
#include "diagnose/diagnosis.h"
#include "model/trace.h"

namespace teller::report {

// Chrome-trace reserved colour names used for the marks.
inline constexpr std::string_view kSuspectColor = "terrible";
inline constexpr std::string_view kAbnormalStepColor = "bad";

// A suspect node: the finding that names it.
struct PerfettoSuspectMark {
  size_t finding_rank = 0;  // 1 = the diagnosis's top finding
  std::string family;
  std::string feature;
  double z = 0.0;         // the finding's z in its worst step
  double value = 0.0;     // the feature's value in that step
  double baseline = 0.0;  // the baseline median of the feature
};

struct PerfettoStepMark {
  size_t step_rank = 0;  // 1 = the most abnormal step
  std::string family;    // its top family
  double z = 0.0;
};

// The verdict's cause over its window: from its first step's start to its last step's
// end (steps numbered as the cause numbers them: global steps, else the rank's).
struct PerfettoCauseMark {
  bool present = false;
  std::string title;     // "DEGRADED cuda_kernel: rank 1's GPU"
  std::string sentence;  // cause::CauseSentence
  std::string decided_by;
  double probability = -1.0;  // the learned decider's, -1 without it
  int64_t first_step = -1, last_step = -1;
};

struct PerfettoOptions {
  // Export only events overlapping [window_start_ns, window_end_ns) when set.
  int64_t window_start_ns = INT64_MIN;
  int64_t window_end_ns = INT64_MAX;
  // Marks by NodeIndex value and StepIndex value.
  std::unordered_map<uint32_t, PerfettoSuspectMark> suspects;
  std::unordered_map<uint32_t, PerfettoStepMark> abnormal_steps;
  PerfettoCauseMark cause;
};

// Fills options->suspects, options->abnormal_steps and options->cause from a diagnosis of
// the same trace. A node named by several findings keeps the best-ranked one.
void MarkDiagnosis(const diagnose::Diagnosis& diagnosis, PerfettoOptions* options);

// The export's time origin: the earliest event start (UTC epoch ns), 0 without events.
int64_t PerfettoOriginNs(const model::Trace& trace);

// ns as the export writes a timestamp: microseconds with three decimals ("-1.500").
std::string FormatPerfettoMicros(int64_t ns);

// The window of a step in the export: [start_ns, end_ns) of trace.steps (device work
// included) minus the origin, in ns.
struct PerfettoWindow {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};
PerfettoWindow PerfettoStepWindow(const model::Trace& trace, model::StepIndex step,
                                  int64_t origin_ns);

// Timestamps are microseconds with three decimals (exact ns) relative to the
// trace's first event; the origin in UTC epoch ns is in otherData.teller_origin_ns.
base::Status ExportPerfetto(const model::Trace& trace, const std::string& path,
                            const PerfettoOptions& options);

}  // namespace teller::report
