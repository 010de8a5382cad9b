// The terminal summary of a diagnosis: at most 100 columns, the top findings
// first, ANSI colour only when asked (the CLI asks when stdout is a terminal).
#pragma once

#include <string>
#include <vector>

#include "diagnose/diagnosis.h"
#include "model/trace.h"

namespace teller::report {

struct DiagnosisTextOptions {
  bool color = false;
  size_t width = 100;
  size_t max_findings = 5;
  size_t max_requests = 5;
  size_t max_log_lines = 4;
  // Paths of files written alongside (JSON, HTML, Perfetto), listed at the end.
  std::vector<std::string> outputs;
  // The LLM narrative (src/explain/) and its status, after the explanation; empty
  // status: none asked.
  std::string narrative;
  std::string narrative_status;
};

std::string RenderDiagnosis(const model::Trace& trace, const diagnose::Diagnosis& diagnosis,
                            const DiagnosisTextOptions& options);

// One line about the learned model's verdict ("" when no model was asked for):
// abnormal steps with probabilities, category, suspect operators; or why it was
// not used.
std::string ModelOpinionText(const diagnose::ModelOpinion& verdict);
// How its flagged steps stand to the verdict ("; 3 of them in the cause's window", or
// outvoted when no cause stands); "" when it flags none.
std::string ModelAgreementText(const diagnose::Diagnosis& diagnosis);
// The model decoder's sentence where it passed the grounding check and its words point
// to the category of the run's cause, else "": one verdict, so a sentence naming another
// cause is left to the JSON (model.explanation).
std::string ModelExplanationText(const diagnose::Diagnosis& diagnosis);

}  // namespace teller::report
