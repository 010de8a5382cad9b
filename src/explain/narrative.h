// The optional LLM narrative of a diagnosis. Off by default (grounded: nothing
// leaves the machine). With openai-compatible, the compact prompt
// (narrative_prompt.h) goes to the engineer's own chat-completions server; the reply
// is checked against the prompt (grounding.h). Any failure -- no libcurl, timeout,
// connection refused, HTTP error, malformed JSON, empty content -- falls back to the
// grounded explanation and the status says why. docs/explain.md.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "diagnose/diagnosis.h"
#include "explain/chat_client.h"
#include "explain/narrative_prompt.h"
#include "model/trace.h"

namespace teller::explain {

enum class ExplainerKind { kGrounded, kOpenAiCompatible };
std::string_view ExplainerKindName(ExplainerKind kind);
// "grounded" or "openai-compatible"; an error naming both otherwise.
base::StatusOr<ExplainerKind> ExplainerKindFromName(std::string_view name);

struct ExplainerOptions {
  ExplainerKind kind = ExplainerKind::kGrounded;
  ChatOptions chat;
  PromptLimits limits;
};

struct Narrative {
  ExplainerKind kind = ExplainerKind::kGrounded;
  bool used = false;  // the LLM's text is shown; false: the grounded explanation only
  std::string text;   // the LLM's reply when used
  // "llm: used MODEL at ENDPOINT", plus "; unverified mention: ..." when the reply
  // cites what the prompt does not hold, or "llm unavailable: REASON; grounded
  // explanation shown". Empty for the grounded explainer.
  std::string status;
  std::vector<std::string> unverified;  // mentions not in the prompt (grounding.h)
  size_t prompt_bytes = 0;              // system + user message
};

Narrative ExplainDiagnosis(const model::Trace& trace, const diagnose::Diagnosis& diagnosis,
                           const ExplainerOptions& options);

// The reply as one line for a terminal: control characters (ESC included) and runs of
// white space become one space, so a reply cannot move the cursor or change colours.
std::string TerminalSafe(std::string_view text);

// DiagnosisToJson with "narrative_status" and "narrative" after "next_action"
// (unchanged for the grounded explainer).
std::string DiagnosisJsonWithNarrative(const model::Trace& trace,
                                       const diagnose::Diagnosis& diagnosis,
                                       const Narrative& narrative);

}  // namespace teller::explain
