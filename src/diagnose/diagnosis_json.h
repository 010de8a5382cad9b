// The diagnosis as JSON (schema "teller-diagnosis/3", docs/diagnose.md): every
// string taken from the trace or the logs is escaped by the JSON writer.
#pragma once

#include <string>

#include "diagnose/diagnosis.h"
#include "model/trace.h"

namespace teller::diagnose {

inline constexpr const char* kDiagnosisSchema = "teller-diagnosis/3";

std::string DiagnosisToJson(const model::Trace& trace, const Diagnosis& diagnosis);

}  // namespace teller::diagnose
