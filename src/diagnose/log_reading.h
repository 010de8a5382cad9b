// Reading service logs for a cause: each line (a traceback folded into one event) is
// matched against the signature catalog (src/signatures), repeats are folded, and the
// first cause is told from its consequences: the earliest line that names a cause on its
// own outranks the engine deaths, NCCL errors and aborts it set off.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "model/fault_category.h"
#include "model/trace.h"
#include "signatures/signature_catalog.h"

namespace teller::diagnose {

// One log event that says something about a fault.
struct LogEvidence {
  size_t row = 0;        // the line that matched (trace.logs)
  size_t first_row = 0;  // a folded traceback spans [first_row, last_row]
  size_t last_row = 0;
  model::FaultCategory category = model::FaultCategory::kNone;
  // The catalog entry; null when only a keyword of an error line placed it.
  const signatures::Signature* signature = nullptr;
  std::string_view keyword;  // that keyword
  double weight = 0.0;       // 10: fails the run, 6: degrades it (see LogWeight)
  int64_t repeats = 1;       // lines of the same signature folded into this event
  bool first_cause = false;  // the event the logs' verdict rests on
  int32_t rank = -1;         // of the line's process, -1 unknown
  int64_t step = -1;         // the step number the line aligned to, -1 none
  // The catalog id, or "keyword:<word>".
  std::string Label() const;
};

struct LogReadingOptions {
  // Lines before this time are start-up configuration, not incidents (INT64_MIN: all).
  model::TimeNs from_ns = INT64_MIN;
  size_t max_events = 8;  // events listed (each of another signature)
};

// The events, the first cause first (first_cause set) and the rest in log order.
std::vector<LogEvidence> ReadLogEvidence(const model::Trace& trace,
                                         const signatures::SignatureCatalog& catalog,
                                         const LogReadingOptions& options);

// Events at or above these weights make a run degraded or failed on their own.
inline constexpr double kDegradingLogWeight = 6.0;
inline constexpr double kFailingLogWeight = 10.0;

}  // namespace teller::diagnose
