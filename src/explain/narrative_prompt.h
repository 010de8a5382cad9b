// The compact prompt an LLM explainer gets for a diagnosis: only the slice nodes of
// the top findings (layer, name, duration against the run's median of the same
// operator), the evidence, the aligned log lines (escaped, truncated), the category
// votes and the grounded explanation. Never the whole trace; bounded in nodes, log
// lines and bytes. What is sent: docs/explain.md.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "diagnose/diagnosis.h"
#include "model/trace.h"

namespace teller::explain {

struct PromptLimits {
  size_t max_findings = 3;            // findings described, highest score first
  size_t max_nodes_per_finding = 12;  // slice nodes listed per finding (suspects first)
  size_t max_nodes = 30;              // slice nodes listed in all
  size_t max_log_lines = 8;           // aligned log lines
  size_t max_log_line_bytes = 240;    // each log line, after escaping
  size_t max_name_bytes = 160;        // each operator / kernel name
  size_t max_text_bytes = 1200;       // the grounded explanation and next action, each
  size_t max_bytes = 12000;           // the whole user message
};

// A chat prompt plus what it names, for the grounding check (grounding.h).
struct NarrativeRequest {
  std::string system;
  std::string user;
  std::set<int64_t> step_numbers;  // every step number the user message names
  std::set<int32_t> ranks;         // every rank it names
  size_t nodes_listed = 0;
  size_t log_lines_listed = 0;
  bool truncated = false;  // something was left out to stay within the limits
};

NarrativeRequest BuildNarrativePrompt(const model::Trace& trace,
                                      const diagnose::Diagnosis& diagnosis,
                                      const PromptLimits& limits = {});

// Printable, bounded text for a prompt: backslash, quote and control characters
// escaped (\n, \t, \xNN), bytes that are not UTF-8 as \xNN, cut at `max_bytes`
// (on a character boundary) with "..." appended.
std::string EscapeForPrompt(std::string_view text, size_t max_bytes);

}  // namespace teller::explain
