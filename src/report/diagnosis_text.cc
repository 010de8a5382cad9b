#include "report/diagnosis_text.h"

#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/text_format.h"
#include "cause/cause_text.h"
#include "diagnose/wording.h"
#include "eval/explanation_criteria.h"
#include "report/text_report.h"

namespace teller::report {
namespace {

using diagnose::Diagnosis;
using diagnose::Finding;

struct Style {
  bool on;
  std::string Wrap(std::string_view code, std::string_view text) const {
    if (!on) return std::string(text);
    return fmt::format("\x1b[{}m{}\x1b[0m", code, text);
  }
  std::string Bold(std::string_view text) const { return Wrap("1", text); }
  std::string Red(std::string_view text) const { return Wrap("1;31", text); }
  std::string Green(std::string_view text) const { return Wrap("32", text); }
  std::string Dim(std::string_view text) const { return Wrap("2", text); }
};

// Greedy word wrap to `width` columns with an indent on every line.
std::string Wrap(std::string_view text, size_t width, std::string_view indent) {
  std::string out, line(indent);
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view word = text.substr(start, end - start);
    if (line.size() > indent.size() && line.size() + 1 + word.size() > width) {
      out += line + "\n";
      line = std::string(indent);
    }
    if (line.size() > indent.size()) line += ' ';
    line += word;
    start = end + 1;
  }
  if (line.size() > indent.size()) out += line + "\n";
  return out;
}

// The headline: diagnose::VerdictOf decides it, this only renders it.
std::string VerdictLine(const Style& style, const Diagnosis& diagnosis) {
  switch (diagnose::VerdictOf(diagnosis)) {
    case diagnose::RunVerdict::kDegraded:
      if (!diagnosis.causes.empty()) {
        const cause::Hypothesis& h = diagnosis.causes.front().hypothesis;
        return fmt::format("{}  {}: {}, {}, since {}\n", style.Red("DEGRADED"),
                           style.Bold(diagnose::FaultCategoryName(diagnosis.category)),
                           cause::CauseLocation(h), cause::CauseSteps(h),
                           base::FormatUtcClock(h.since_ns));
      }
      return fmt::format("{}  {} from the logs\n", style.Red("DEGRADED"),
                         style.Bold(diagnose::FaultCategoryName(diagnosis.category)));
    case diagnose::RunVerdict::kFailed:
      return fmt::format("{}  {}: {}\n", style.Red("FAILED"),
                         style.Bold(diagnose::FaultCategoryName(diagnosis.category)),
                         diagnose::FailureHeadline(diagnosis));
    case diagnose::RunVerdict::kUndetermined:
      return fmt::format("{}  {}\n", style.Bold("UNDETERMINED"),
                         diagnose::VerdictWithoutCause(diagnosis));
    case diagnose::RunVerdict::kHealthy:
      return fmt::format("{}  {}\n", style.Green("HEALTHY"),
                         diagnose::VerdictWithoutCause(diagnosis));
  }
  return "";
}

std::string CellValue(cause::Channel channel, double value) {
  if (cause::IsCountChannel(channel)) return fmt::format("{:.0f}", value);
  return base::FormatDuration(static_cast<int64_t>(value));
}

std::string CellName(const diagnose::CauseEvidence& e) {
  if (e.channel == cause::Channel::kCompute) {
    return std::string(localize::OperatorFamilyName(e.family)) + " kernels";
  }
  return std::string(cause::ChannelName(e.channel));
}

// The cause, its evidence and the alternatives.
std::string CauseSection(const Style& style, const Diagnosis& diagnosis, size_t width) {
  std::string out;
  for (size_t i = 0; i < diagnosis.causes.size(); ++i) {
    const diagnose::RootCause& cause = diagnosis.causes[i];
    out += "\n" + style.Bold(i == 0 ? "Cause" : "Second cause") + "\n";
    // A request's cause is read from the requests' steps, not from cells of the map.
    const cause::CauseKind kind = cause.hypothesis.kind;
    const std::string basis =
        kind == cause::CauseKind::kRequestStarved
            ? fmt::format("score {:.0f}: its wait first in line against the run's requests'",
                          cause.hypothesis.score)
        : kind == cause::CauseKind::kRequestPreempted
            ? fmt::format("score {:.0f}: decode steps the preempted requests missed{}",
                          cause.hypothesis.score,
                          cause.hypothesis.requests_blocked > 0
                              ? ", or the blocked requests' wait first in line, the larger"
                              : "")
        : kind == cause::CauseKind::kRequestMisrouted
            ? fmt::format("score {:.0f}: steps the misrouted requests ran in the decode path",
                          cause.hypothesis.score)
            : fmt::format("score {:.0f}, explains {:.0f}% of what moved in its window",
                          cause.hypothesis.score, 100.0 * cause.hypothesis.explained);
    out += Wrap(fmt::format("{} [{}]", cause::CauseSentence(cause.hypothesis), basis), width, "  ");
    if (!cause.confirmed_by_log.empty()) {
      out += Wrap(fmt::format("below the threshold of {:.0f} on its own; the logs confirm it: {}",
                              diagnosis.cause_threshold, cause.confirmed_by_log),
                  width, "  ");
    }
    if (cause.evidence.empty()) continue;
    out += fmt::format("  {:>4} {:>5} {:<22} {:>10} {:>10} {:>7}  {}\n", "rank", "step", "what",
                       "value", "baseline", "z", "role");
    for (const diagnose::CauseEvidence& e : cause.evidence) {
      out += fmt::format("  {:>4} {:>5} {:<22} {:>10} {:>10} {:>7.1f}  {}\n", e.rank, e.step,
                         Printable(CellName(e), 22), CellValue(e.channel, e.value),
                         CellValue(e.channel, e.expected), e.z, e.victim ? "waited" : "culprit");
    }
    for (const bool victims : {false, true}) {
      const std::string list = diagnose::CauseOperatorsText(cause, victims);
      if (!list.empty()) out += Wrap((victims ? "waited: " : "slowed: ") + list, width, "  ");
    }
  }
  if (!diagnosis.alternatives.empty()) {
    out += "\n" +
           style.Bold(diagnosis.causes.empty() ? "Closest causes (below the threshold)"
                                               : "Alternatives") +
           "\n";
    for (size_t i = 0; i < diagnosis.alternatives.size(); ++i) {
      const cause::Hypothesis& h = diagnosis.alternatives[i];
      const std::string p = i < diagnosis.alternative_probabilities.size()
                                ? fmt::format("p {:.2f}, ", diagnosis.alternative_probabilities[i])
                                : "";
      out += Wrap(fmt::format("{}score {:.1f}, explains {:.0f}%: {}", p, h.score,
                              100.0 * h.explained, cause::CauseSentence(h)),
                  width, "  ");
    }
  }
  return out;
}

// The learned decider's probability of its top candidate, then the calibration's: the
// run's probability when no decider gave one, the top finding's.
std::string ProbabilityLines(const Style& style, const Diagnosis& diagnosis) {
  std::string out;
  const bool decided = diagnose::DecidedByLearned(diagnosis);
  if (decided) {
    out += fmt::format("{}  top candidate p {:.2f}, the cause from p {:.2f} ({})\n",
                       style.Bold("decider"), diagnosis.degraded_probability,
                       diagnosis.decider_threshold, diagnosis.decider_file);
  }
  if (diagnosis.calibration.empty()) return out;
  std::vector<std::string> parts;
  if (!decided && diagnosis.degraded_probability >= 0.0) {
    parts.push_back(fmt::format("faulty run {:.2f}", diagnosis.degraded_probability));
  }
  if (!diagnosis.findings.empty() && diagnosis.findings.front().probability >= 0.0) {
    parts.push_back(fmt::format("top finding names an affected operator {:.2f}",
                                diagnosis.findings.front().probability));
  }
  if (parts.empty()) return out;
  return out + fmt::format("{}  {} ({})\n", style.Bold("calibrated"), fmt::join(parts, ", "),
                           diagnosis.calibration);
}

}  // namespace

// How the learned model's flagged steps stand to the verdict: in the cause's steps,
// or, with no cause, weighed and outvoted. The model is one voice of the evidence, never
// a second verdict.
std::string ModelAgreementText(const Diagnosis& diagnosis) {
  const diagnose::ModelOpinion& model = diagnosis.model;
  if (!model.used || model.logs_only || !model.abnormal) return "";
  if (diagnosis.causes.empty()) {
    if (diagnose::DecidedByLearned(diagnosis)) {
      return fmt::format(
          "; weighed with the rules' evidence, no candidate cause reaches the "
          "decider's threshold (best p {:.2f})",
          diagnosis.degraded_probability);
    }
    return "; no cause of the trace stands in them, so they do not make the verdict";
  }
  const cause::Hypothesis& h = diagnosis.causes.front().hypothesis;
  size_t inside = 0;
  for (const diagnose::ModelStep& step : model.steps) {
    inside += h.ShowsIn(step.step);
  }
  return fmt::format("; {} of them in the cause's steps", inside);
}

std::string ModelOpinionText(const diagnose::ModelOpinion& verdict) {
  if (!verdict.used) return verdict.reason.empty() ? "" : "not used: " + verdict.reason;
  std::string out;
  if (verdict.abnormal) {
    std::vector<std::string> steps;
    const size_t shown = verdict.logs_only ? 3 : 5;
    for (size_t i = 0; i < verdict.steps.size() && i < shown; ++i) {
      const diagnose::ModelStep& step = verdict.steps[i];
      steps.push_back(verdict.logs_only
                          ? fmt::format("{} (p {:.2f})", step.request, step.probability)
                          : fmt::format("{} (p {:.2f})", step.step, step.probability));
    }
    out =
        fmt::format("flags {} {}{}: {}{}", verdict.steps.size(),
                    verdict.logs_only ? "log window" : "step", verdict.steps.size() == 1 ? "" : "s",
                    fmt::join(steps, ", "), verdict.steps.size() > shown ? ", ..." : "");
    if (!verdict.operators.empty()) {
      std::vector<std::string> names(
          verdict.operators.begin(),
          verdict.operators.begin() + std::min<size_t>(3, verdict.operators.size()));
      out += fmt::format("; suspects {}", fmt::join(names, ", "));
    }
  } else {
    out = fmt::format("flags nothing (highest {} probability {:.2f}, threshold {:.2f})",
                      verdict.logs_only ? "log-window" : "step", verdict.abnormal_probability,
                      verdict.threshold);
  }
  if (verdict.validation_step_f1 >= 0) {
    out += fmt::format(
        " [model's step F1 on its validation runs: {:.2f}; docs/results.md has the test figures]",
        verdict.validation_step_f1);
  }
  if (!verdict.reason.empty()) out += " (" + verdict.reason + ")";
  return out;
}

std::string ModelExplanationText(const Diagnosis& diagnosis) {
  const diagnose::ModelOpinion& model = diagnosis.model;
  const bool grounded = !model.explanation.empty() && model.explanation_problems.empty();
  if (!model.used || !grounded || diagnosis.causes.empty()) return "";
  const std::string_view cause = diagnose::FaultCategoryName(diagnosis.causes.front().category);
  return eval::ReadExplanation(model.explanation).category == cause ? model.explanation : "";
}

// One finding's row, its example instance and its other abnormal steps.
std::string FindingLines(const model::Trace& trace, const Style& style, const Finding& f,
                         size_t i, size_t width) {
  const std::string slice =
      f.slice.step.valid() ? fmt::format("{}/{} nodes", f.slice.nodes.size(), f.slice.step_nodes)
                           : "-";
  const std::string z = fmt::format("{:6.1f}", f.peak_z);
  std::string out = fmt::format(
      "  {:>2} {:>4} {:>5} {:<14} {:<21} {:>10} {:>10} {} {:>13}\n", i + 1, f.rank,
      f.step_number, Printable(localize::OperatorFamilyName(f.family), 14),
      localize::FeatureName(f.feature), diagnose::FeatureValueText(f.feature, f.value),
      (f.against_peers ? "~" : "") + diagnose::FeatureValueText(f.feature, f.median), z, slice);
  if (!f.suspects.empty()) {
    const model::EventRow event = trace.nodes.event[f.suspects.front().value()];
    out += style.Dim(fmt::format("       e.g. {} {} ({})",
                                 model::LayerName(trace.events.layer[event.value()]),
                                 Printable(trace.str(trace.events.name[event.value()]), width - 40),
                                 base::FormatDuration(trace.events.dur_ns[event.value()]))) +
           "\n";
  }
  if (!f.also_steps.empty()) {
    std::string steps;
    for (size_t k = 0; k < f.also_steps.size() && k < 10; ++k) {
      steps += (k ? "," : "") + std::to_string(f.also_steps[k]);
    }
    if (f.also_steps.size() > 10) steps += ",...";
    out += style.Dim("       also abnormal in steps " + steps) + "\n";
  }
  return out;
}

// One verdict: with a cause, the deviations on its ranks and steps, and where the largest
// other one lies; without one, what the run's noise allows.
std::string FindingsSection(const model::Trace& trace, const Style& style,
                            const Diagnosis& diagnosis, const DiagnosisTextOptions& options,
                            size_t width) {
  const bool cause_only = diagnose::ShowsCauseSupportOnly(diagnosis);
  const size_t shown = diagnose::ListedOf(diagnosis, diagnosis.findings, options.max_findings);
  const std::string elsewhere = diagnose::LargestElsewhereText(diagnosis);
  if (shown == 0 && elsewhere.empty()) return "";
  std::string out = "\n" + style.Bold("Deviations by operator family") +
                    (cause_only ? " on the cause's ranks and steps"
                     : diagnosis.degraded
                         ? ""
                         : " (none stands above this run's noise as a cause)") +
                    "\n";
  if (shown > 0) {
    out += fmt::format("  {:>2} {:>4} {:>5} {:<14} {:<21} {:>10} {:>10} {:>6} {:>13}\n", "#",
                       "rank", "step", "family", "abnormal in", "value", "normal", "z", "slice");
  }
  for (size_t i = 0; i < shown; ++i) out += FindingLines(trace, style, diagnosis.findings[i], i, width);
  if (shown > 0) {
    out += style.Dim(
               "  normal: median of comparable steps of the run, ~ of the peer ranks in the "
               "same step; z: worst step") +
           "\n";
  }
  if (!elsewhere.empty()) {
    out += style.Dim(fmt::format("  {}{}, not the cause's (JSON findings)",
                                 shown == 0 ? "none there; " : "", elsewhere)) +
           "\n";
  }
  return out;
}

// The abnormal requests: with a cause, those served on its ranks and steps.
std::string RequestsSection(const model::Trace& trace, const Style& style,
                            const Diagnosis& diagnosis, const DiagnosisTextOptions& options) {
  const bool cause_only = diagnose::ShowsCauseSupportOnly(diagnosis);
  const size_t listed = diagnose::ListedOf(diagnosis, diagnosis.requests, diagnosis.requests.size());
  if (listed == 0 || options.max_requests == 0) return "";
  std::string out = "\n" + style.Bold("Abnormal requests") +
                    (cause_only ? " in the cause's steps" : "") + "\n";
  for (size_t i = 0; i < listed && i < options.max_requests; ++i) {
    const diagnose::AbnormalRequest& r = diagnosis.requests[i];
    std::string steps;
    for (size_t k = 0; k < r.steps.size() && k < 8; ++k) {
      steps += (k ? "," : "") + std::to_string(r.steps[k]);
    }
    if (r.steps.size() > 8) steps += ",...";
    out += fmt::format("  {:<44} z {:5.1f}  steps {}\n",
                       Printable(trace.str(trace.requests.id[r.request.value()]), 41), r.score,
                       steps);
  }
  if (listed > options.max_requests) {
    out += fmt::format("  ... {} more\n", listed - options.max_requests);
  }
  return out;
}

std::string RenderDiagnosis(const model::Trace& trace, const Diagnosis& diagnosis,
                            const DiagnosisTextOptions& options) {
  const Style style{options.color};
  const size_t width = std::max<size_t>(options.width, 60);
  std::string out;
  out += VerdictLine(style, diagnosis);
  out += ProbabilityLines(style, diagnosis);
  if (const std::string model = ModelOpinionText(diagnosis.model); !model.empty()) {
    out += fmt::format("{}  {}{}\n", style.Bold("model"), model, ModelAgreementText(diagnosis));
  }
  const std::string said = ModelExplanationText(diagnosis);
  if (!said.empty()) {
    out += style.Bold("model says") + " (its decoder; place, steps and amount from the trace)\n" +
           Wrap(said, width, "  ");
  } else if (diagnosis.model.explanation_problems.empty() && !diagnosis.model.explanation.empty() &&
             !diagnosis.causes.empty()) {
    out +=
        "  (its decoder's sentence names another cause than the one above: JSON "
        "model.explanation)\n";
  }

  out += CauseSection(style, diagnosis, width);

  out += FindingsSection(trace, style, diagnosis, options, width);
  out += RequestsSection(trace, style, diagnosis, options);

  if (!diagnosis.logs.empty()) {
    out += "\n" + style.Bold("Log evidence") + "\n";
    for (size_t i = 0; i < diagnosis.logs.size() && i < options.max_log_lines; ++i) {
      const diagnose::LogEvidence& log = diagnosis.logs[i];
      const std::string where = fmt::format("  {}{}:{} ", log.first_cause ? "first cause " : "",
                                            Printable(trace.str(trace.logs.source[log.row]), 30),
                                            trace.logs.line_number[log.row]);
      out += where +
             Printable(trace.str(trace.logs.text[log.row]),
                       width > where.size() + 4 ? width - where.size() - 3 : 10) +
             "\n";
    }
  }

  out += "\n" + style.Bold("Explanation") + "\n" +
         Wrap(diagnose::Explanation(trace, diagnosis), width, "  ");
  out += style.Bold("Next") + "\n" + Wrap(diagnose::NextActionOf(diagnosis), width, "  ");
  if (!options.narrative_status.empty()) {
    out += style.Bold("Narrative") + "\n";
    if (!options.narrative.empty()) out += Wrap(options.narrative, width, "  ");
    out += Wrap(options.narrative_status, width, "  ");
  }

  std::set<int32_t> ranks(trace.steps.rank.begin(), trace.steps.rank.end());
  out += "\n" + style.Bold("Collection") + "\n";
  out += Wrap(
      fmt::format("{} events, {} steps ({}) on {} rank(s), {} log lines; baseline of {} "
                  "(step kind, family) keys over {} scored steps.",
                  trace.events.size(), trace.steps.size(),
                  trace.steps.size() ? model::StepSourceName(trace.steps.source[0]) : "none",
                  ranks.size(), trace.logs.size(), diagnosis.baseline_keys, diagnosis.steps_scored),
      width, "  ");
  for (const std::string& note : diagnosis.notes) out += Wrap("missing: " + note, width, "  ");
  for (const std::string& path : options.outputs) out += "  wrote " + path + "\n";
  return out;
}

}  // namespace teller::report
