// The learned model's verdict on one trace, for `teller diagnose`: its request
// steps become step records, the model scores them, and the abnormal steps, the
// fault category and the suspect operators come back as a diagnose::ModelVerdict.
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

diagnose::ModelVerdict DiagnoseWithModel(const TrainedModel& trained, const std::string& folder,
                                         const model::Trace& trace);

}  // namespace teller::learn
