// The learned model's verdict on one trace, for `teller diagnose`: its request
// steps become step records, the model scores them, and the abnormal steps, the
// fault category and the suspect operators come back as a diagnose::ModelOpinion.
// A trace the model cannot read (no request ids, mostly unknown operator names)
// gives used = false with the reason, and the rules' diagnosis stands alone.
#pragma once

#include "diagnose/diagnosis.h"
#include "learn/root_cause.h"
#include "model/trace.h"

namespace teller::learn {

// Share of a trace's operator names the model has never seen above which it is
// not used.
inline constexpr double kMaxUnknownNameShare = 0.5;

diagnose::ModelOpinion DiagnoseWithModel(const TrainedModel& trained, const std::string& folder,
                                         const model::Trace& trace);

// Lines per window when the logs-only variant reads a service log without a trace:
// a step record holds the few lines aligned to one engine step, so windows of a
// few consecutive lines stand in for steps.
inline constexpr size_t kLogWindowLines = 8;

// The logs-only variant (`teller train --variant logs-only`) on log lines alone:
// one record per window of kLogWindowLines lines (in time order, per source file),
// reported as ModelStep entries whose request names the lines. A model that reads
// traces gives used = false with the reason.
diagnose::ModelOpinion DiagnoseLogsWithModel(const TrainedModel& trained, const std::string& folder,
                                             const model::Trace& trace);

}  // namespace teller::learn
