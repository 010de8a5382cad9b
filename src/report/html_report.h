// The diagnosis as one self-contained HTML file (inline CSS, JS and SVG; no network
// fetches; opens from file://): incident summary, a timeline and call-chain tree of
// each top finding's causal-context slice with the suspects highlighted, the aligned
// log lines, the evidence table, the explanation and next action, and the collection
// facts. Every string from the trace or the logs is escaped. Deterministic.
// What it shows and the browser test: docs/report.md.
#pragma once

#include <string>
#include <string_view>

#include "diagnose/diagnosis.h"
#include "model/trace.h"

namespace teller::report {

struct HtmlReportOptions {
  std::string title = "teller diagnosis";
  std::string source;            // what was diagnosed (bundle path), shown in the header
  size_t max_findings = 5;       // findings drawn with a timeline and a tree
  size_t max_slice_nodes = 400;  // nodes drawn per timeline (suspects always); the rest cut
  size_t max_tree_nodes = 250;   // nodes listed per tree
  size_t max_log_lines = 40;
  size_t max_requests = 20;
  size_t max_table_findings = 30;
  // The Perfetto export of the same trace (`diagnose --perfetto`), as the report's
  // reader should find it. When set, each listed abnormal step shows its window in
  // the export (trace-relative microseconds) and a button that opens ui.perfetto.dev
  // in a new tab, posts the export there (picked by the reader) and zooms to it.
  // Nothing is fetched unless the reader clicks. Empty: no hand-off.
  std::string perfetto_path;
  // The LLM narrative (`diagnose --explainer openai-compatible`, src/explain/): its
  // text (empty when it fell back) and its status line, shown beside the grounded
  // explanation. Empty status: no narrative section.
  std::string narrative;
  std::string narrative_status;
};

// Suspect nodes carry class "suspect" and data-suspect="1" (timeline and tree).
inline constexpr std::string_view kSuspectClass = "suspect";

std::string RenderDiagnosisHtml(const model::Trace& trace, const diagnose::Diagnosis& diagnosis,
                                const HtmlReportOptions& options = {});

// & < > " ' become entities; control characters other than tab and newline become
// spaces. Safe in text and in quoted attribute values.
std::string EscapeHtml(std::string_view text);

}  // namespace teller::report
