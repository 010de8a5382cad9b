#include "explain/narrative_prompt.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/text_format.h"
#include "diagnose/fault_rules.h"
#include "diagnose/wording.h"
#include "localize/operator_family.h"
#include "localize/step_features.h"

namespace teller::explain {
namespace {

using model::NodeIndex;

constexpr const char* kSystemMessage =
    "You explain a diagnosis made by teller, a root-cause analysis tool for LLM inference "
    "traces, to the on-call engineer. The user message holds everything known: the top "
    "findings with their evidence, the nodes of the causal-context slice of each finding's "
    "step (layer, operator or kernel name, duration against the run's median for the same "
    "operator; * marks a suspect), aligned log lines, the category votes and teller's grounded "
    "explanation. Write a short narrative (at most 150 words, plain text): what went wrong, "
    "where, the likely cause and what to check next. Cite only the steps, ranks, nodes and log "
    "lines given, by the names and numbers given; never invent a kernel or operator name, a "
    "step number, a rank or a measurement. When the evidence is weak, say so.";

// Length in bytes of the UTF-8 sequence starting at text[i], 0 when invalid.
size_t Utf8SequenceLength(std::string_view text, size_t i) {
  const auto byte = static_cast<unsigned char>(text[i]);
  size_t length = byte < 0x80           ? 1
                  : (byte >> 5) == 0x6  ? 2
                  : (byte >> 4) == 0xE  ? 3
                  : (byte >> 3) == 0x1E ? 4
                                        : 0;
  if (length == 0 || i + length > text.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    if ((static_cast<unsigned char>(text[i + k]) >> 6) != 0x2) return 0;
  }
  return length;
}

uint64_t NameKey(const model::Trace& trace, NodeIndex node) {
  const model::EventRow event = trace.nodes.event[node.value()];
  return (uint64_t{trace.events.name[event.value()].value()} << 8) |
         static_cast<uint64_t>(trace.events.layer[event.value()]);
}

// The run's median duration of each wanted (layer, name): one pass over the nodes.
std::unordered_map<uint64_t, int64_t> NameMedians(const model::Trace& trace,
                                                  const std::unordered_set<uint64_t>& wanted) {
  std::unordered_map<uint64_t, std::vector<int64_t>> durations;
  for (size_t i = 0; i < trace.nodes.size(); ++i) {
    const NodeIndex node(static_cast<uint32_t>(i));
    const uint64_t key = NameKey(trace, node);
    if (!wanted.count(key)) continue;
    durations[key].push_back(trace.events.dur_ns[trace.nodes.event[i].value()]);
  }
  std::unordered_map<uint64_t, int64_t> medians;
  for (auto& [key, values] : durations) {
    std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
    medians[key] = values[values.size() / 2];
  }
  return medians;
}

// The nodes of a finding listed in the prompt: suspects, then peers on other ranks,
// then the rest of the slice by relevance; at most `limit`.
std::vector<NodeIndex> ListedNodes(const diagnose::Finding& finding, size_t limit) {
  std::vector<NodeIndex> listed;
  std::unordered_set<uint32_t> seen;
  auto add = [&](NodeIndex node) {
    if (listed.size() < limit && seen.insert(node.value()).second) listed.push_back(node);
  };
  for (NodeIndex node : finding.suspects) add(node);
  for (NodeIndex node : finding.slice.peer_nodes) add(node);
  std::vector<size_t> order(finding.slice.nodes.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return finding.slice.relevance[a] > finding.slice.relevance[b];
  });
  for (size_t i : order) add(finding.slice.nodes[i]);
  return listed;
}

// Appends lines while they fit in the byte budget.
class BoundedText {
 public:
  explicit BoundedText(size_t max_bytes) : max_bytes_(max_bytes) {}
  bool Add(const std::string& line) {
    if (text_.size() + line.size() + 1 > max_bytes_) {
      truncated_ = true;
      return false;
    }
    text_ += line;
    text_ += '\n';
    return true;
  }
  const std::string& text() const { return text_; }
  bool truncated() const { return truncated_; }

 private:
  size_t max_bytes_;
  std::string text_;
  bool truncated_ = false;
};

// The file name of a log source: the folders it sits in stay on the machine.
std::string_view BaseName(std::string_view path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace

std::string EscapeForPrompt(std::string_view text, size_t max_bytes) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    std::string piece;
    const char c = text[i];
    const size_t length = Utf8SequenceLength(text, i);
    if (c == '\\') {
      piece = "\\\\";
    } else if (c == '"') {
      piece = "\\\"";
    } else if (c == '\n') {
      piece = "\\n";
    } else if (c == '\t') {
      piece = "\\t";
    } else if (c == '\r') {
      piece = "\\r";
    } else if (length == 0 || static_cast<unsigned char>(c) < 0x20 || c == 0x7F) {
      piece = fmt::format("\\x{:02X}", static_cast<unsigned char>(c));
    } else {
      piece.assign(text.substr(i, length));
    }
    if (out.size() + piece.size() > max_bytes) return out + "...";
    out += piece;
    i += length == 0 ? 1 : length;
  }
  return out;
}

namespace {

// The listed nodes of a finding's slice, instances of one operator in one step on one
// line, in listing order.
void AddSliceNodes(const model::Trace& trace, const diagnose::Finding& f,
                   const std::vector<NodeIndex>& listed,
                   const std::unordered_map<uint64_t, int64_t>& medians, const PromptLimits& limits,
                   BoundedText* out, NarrativeRequest* request) {
  std::unordered_set<uint32_t> suspects;
  for (NodeIndex node : f.suspects) suspects.insert(node.value());
  struct Group {
    NodeIndex first;
    bool suspect = false;
    std::vector<int64_t> durations_ns;
  };
  std::vector<Group> groups;
  std::unordered_map<uint64_t, size_t> group_of;
  for (NodeIndex node : listed) {
    const model::StepIndex step = trace.nodes.step[node.value()];
    const uint64_t key = NameKey(trace, node) * 1000003u + (step.valid() ? step.value() + 1 : 0);
    auto [it, inserted] = group_of.emplace(key, groups.size());
    if (inserted) groups.push_back(Group{node, false, {}});
    Group& group = groups[it->second];
    group.suspect |= suspects.count(node.value()) > 0;
    group.durations_ns.push_back(trace.events.dur_ns[trace.nodes.event[node.value()].value()]);
  }
  out->Add(
      fmt::format("   slice nodes ({} listed of {} kept in the slice, {} in the step; "
                  "* suspect):",
                  listed.size(), f.slice.nodes.size(), f.slice.step_nodes));
  for (const Group& group : groups) {
    const NodeIndex node = group.first;
    const model::EventRow event = trace.nodes.event[node.value()];
    const model::StepIndex step = trace.nodes.step[node.value()];
    std::string where;
    if (step.valid() && step != f.step) {
      where = fmt::format(" [rank {}, step {}]", trace.steps.rank[step.value()],
                          trace.steps.number[step.value()]);
    }
    std::string durations;
    for (int64_t dur_ns : group.durations_ns) {
      durations += (durations.empty() ? "" : ", ") + base::FormatDuration(dur_ns);
    }
    auto median = medians.find(NameKey(trace, node));
    const std::string name =
        EscapeForPrompt(trace.str(trace.events.name[event.value()]), limits.max_name_bytes);
    const std::string line = fmt::format(
        "   {} {} {}: {}{} (normal {}){}", group.suspect ? "*" : "-",
        model::LayerName(trace.events.layer[event.value()]), name,
        group.durations_ns.size() > 1 ? fmt::format("{} instances ", group.durations_ns.size())
                                      : "",
        durations, median == medians.end() ? "unknown" : base::FormatDuration(median->second), where);
    if (!out->Add(line)) break;
    request->nodes_listed += group.durations_ns.size();
    if (step.valid()) {
      request->step_numbers.insert(trace.steps.number[step.value()]);
      request->ranks.insert(trace.steps.rank[step.value()]);
    }
  }
}

// Finding number i + 1 with its evidence and slice nodes; false when the byte budget
// ran out before its first line.
bool AddFinding(const model::Trace& trace, const diagnose::Finding& f, size_t i,
                const std::vector<NodeIndex>& listed,
                const std::unordered_map<uint64_t, int64_t>& medians, const PromptLimits& limits,
                BoundedText* out, NarrativeRequest* request) {
  std::string also;
  for (size_t k = 0; k < f.also_steps.size() && k < 8; ++k) {
    also += (k ? ", " : "") + std::to_string(f.also_steps[k]);
  }
  const bool added = out->Add(fmt::format(
      "{}. rank {}, step {} ({}): operator family {} (category {}); evidence: {} {} against "
      "normal {} ({} of {} {}), robust z {:.1f}, finding score {:.1f}{}{}",
      i + 1, f.rank, f.step_number,
      f.step.valid() ? model::StepPhaseName(trace.steps.phase[f.step.value()]) : "unknown",
      localize::OperatorFamilyName(f.family),
      diagnose::FaultCategoryName(diagnose::CategoryOfFamily(f.family)),
      localize::FeatureName(f.feature), diagnose::FeatureValueText(f.feature, f.value),
      diagnose::FeatureValueText(f.feature, f.median), f.against_peers ? "median of the peer ranks" : "median",
      f.baseline_samples, f.against_peers ? "peers" : "comparable steps", f.peak_z, f.score,
      f.persistent ? "; abnormal in nearly every step of the rank" : "",
      also.empty() ? "" : "; also abnormal in steps " + also));
  if (!added) return false;
  request->step_numbers.insert(f.step_number);
  request->ranks.insert(f.rank);
  for (size_t k = 0; k < f.also_steps.size() && k < 8; ++k) {
    request->step_numbers.insert(f.also_steps[k]);
  }
  AddSliceNodes(trace, f, listed, medians, limits, out, request);
  return true;
}

// The abnormal steps on one line, as many as fit.
void AddAbnormalSteps(const diagnose::Diagnosis& diagnosis, const PromptLimits& limits,
                      BoundedText* out, NarrativeRequest* request) {
  std::string steps;
  for (size_t i = 0; i < diagnosis.steps.size() && i < 8; ++i) {
    const diagnose::AbnormalStep& s = diagnosis.steps[i];
    const std::string item = fmt::format("rank {} step {} ({}, z {:.1f})", s.rank, s.number,
                                         localize::OperatorFamilyName(s.family), s.score);
    if (out->text().size() + steps.size() + item.size() + 32 > limits.max_bytes) break;
    steps += (i ? "; " : "") + item;
    request->step_numbers.insert(s.number);
    request->ranks.insert(s.rank);
  }
  if (!steps.empty()) {
    out->Add(fmt::format("Abnormal steps ({} in all): {}", diagnosis.steps.size(), steps));
  }
}

// The aligned log evidence, escaped and cut.
void AddLogLines(const model::Trace& trace, const diagnose::Diagnosis& diagnosis,
                 const PromptLimits& limits, BoundedText* out, NarrativeRequest* request) {
  if (!diagnosis.logs.empty()) {
    out->Add(fmt::format("Aligned log lines ({} of {}, escaped, cut at {} bytes):",
                         std::min(limits.max_log_lines, diagnosis.logs.size()),
                         diagnosis.logs.size(), limits.max_log_line_bytes));
  }
  for (size_t i = 0; i < diagnosis.logs.size() && i < limits.max_log_lines; ++i) {
    const diagnose::LogEvidence& log = diagnosis.logs[i];
    const model::StepIndex step = trace.logs.step[log.row];
    const int32_t rank = trace.logs.rank[log.row];
    std::string where = rank >= 0 ? fmt::format("rank {}", rank) : "rank unknown";
    if (step.valid()) where += fmt::format(", step {}", trace.steps.number[step.value()]);
    const std::string line = fmt::format(
        "- [{}, {}, {}:{}, rule {}] \"{}\"", where, model::LogLevelName(trace.logs.level[log.row]),
        EscapeForPrompt(BaseName(trace.str(trace.logs.source[log.row])), 80),
        trace.logs.line_number[log.row], diagnose::FaultCategoryName(log.category),
        EscapeForPrompt(trace.str(trace.logs.text[log.row]), limits.max_log_line_bytes));
    if (!out->Add(line)) break;
    ++request->log_lines_listed;
    if (rank >= 0) request->ranks.insert(rank);
    if (step.valid()) request->step_numbers.insert(trace.steps.number[step.value()]);
  }
}

}  // namespace

NarrativeRequest BuildNarrativePrompt(const model::Trace& trace,
                                      const diagnose::Diagnosis& diagnosis,
                                      const PromptLimits& limits) {
  NarrativeRequest request;
  request.system = kSystemMessage;
  BoundedText out(limits.max_bytes);

  // Verdict first, then the grounded explanation: the most important lines survive the
  // byte budget.
  out.Add(fmt::format("Verdict: {}; category {} (share of the rule votes {:.2f}).",
                      diagnosis.degraded ? "abnormal" : "no abnormal step found",
                      diagnose::FaultCategoryName(diagnosis.category),
                      diagnosis.category_probability));
  out.Add("Grounded explanation: " + EscapeForPrompt(diagnose::Explanation(trace, diagnosis), limits.max_text_bytes));
  out.Add("Next action: " + EscapeForPrompt(diagnose::NextActionOf(diagnosis), limits.max_text_bytes));
  if (!diagnosis.votes.empty()) {
    out.Add("Category votes:");
    for (const diagnose::CategoryVote& vote : diagnosis.votes) {
      out.Add(fmt::format("- {} {:.2f}: {}", diagnose::FaultCategoryName(vote.category),
                          vote.weight, EscapeForPrompt(vote.reason, limits.max_log_line_bytes)));
    }
  }

  // Findings, each with its evidence and the listed nodes of its slice.
  const size_t findings = std::min(limits.max_findings, diagnosis.findings.size());
  std::vector<std::vector<NodeIndex>> listed(findings);
  std::unordered_set<uint64_t> wanted;
  size_t nodes_left = limits.max_nodes;
  for (size_t i = 0; i < findings; ++i) {
    listed[i] =
        ListedNodes(diagnosis.findings[i], std::min(limits.max_nodes_per_finding, nodes_left));
    nodes_left -= listed[i].size();
    for (NodeIndex node : listed[i]) wanted.insert(NameKey(trace, node));
  }
  const std::unordered_map<uint64_t, int64_t> medians = NameMedians(trace, wanted);
  if (findings > 0) {
    out.Add(fmt::format("Findings (top {} of {}):", findings, diagnosis.findings.size()));
  }
  for (size_t i = 0; i < findings; ++i) {
    if (!AddFinding(trace, diagnosis.findings[i], i, listed[i], medians, limits, &out, &request)) {
      break;
    }
  }
  if (!diagnosis.steps.empty()) AddAbnormalSteps(diagnosis, limits, &out, &request);
  AddLogLines(trace, diagnosis, limits, &out, &request);
  request.truncated = out.truncated() || diagnosis.findings.size() > findings ||
                      diagnosis.logs.size() > request.log_lines_listed;
  request.user = out.text();
  return request;
}

}  // namespace teller::explain
