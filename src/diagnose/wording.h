// The English a reader is told of a diagnosis: the explanation, the failure headline and
// what to check next. The decisions are diagnosis.cc's (the verdict, the category, the
// cause); this file only words them, for every surface alike: the terminal summary and
// the HTML report (src/report), the explainer's prompt (src/explain) and the JSON's
// `explanation` and `next_action` (diagnosis_json.cc). The sentences of the cause stage's
// findings are cause/cause_text.h's.
#pragma once

#include <string>
#include <string_view>

#include "diagnose/diagnosis.h"
#include "model/trace.h"

namespace teller::diagnose {

// The verdict's explanation: its cause, hang, crash or OOM in sentences, with the log
// line that names it, or why no cause stands.
std::string Explanation(const model::Trace& trace, const Diagnosis& diagnosis);
// What to check next for the verdict's cause.
std::string NextActionOf(const Diagnosis& diagnosis);
// Why a failed run failed, in a few words: the first log cause's signature ("the log line
// cuda.700.illegal_address, rank 1") or the generic reason.
std::string FailureHeadline(const Diagnosis& diagnosis);

// The headline of a verdict without a cause (healthy or undetermined), lower case: why no
// cause was named, and what the verdict rests on.
std::string VerdictWithoutCause(const Diagnosis& diagnosis);
// The text with its first letter upper case.
std::string Capitalized(std::string text);
// A cause's operators of one role (culprits, or those that waited), the first `shown`
// by stable name (names that differ only in template arguments read as one): "K
// vllm::rms_norm_kernel (4 steps), ..., +3 more"; "" when none.
std::string CauseOperatorsText(const RootCause& cause, bool victims, size_t shown = 3);

// With a cause, a report shows the findings, abnormal steps and requests that support it
// (Diagnosis::findings' supports_cause) and only says where the largest other one lies:
// "the largest elsewhere: rank 8, step 39, frontend total time z 118.4" ("" when the
// findings all support the cause, or when there is no cause).
bool ShowsCauseSupportOnly(const Diagnosis& diagnosis);
std::string LargestElsewhereText(const Diagnosis& diagnosis);
// How many of `items` (the findings, abnormal steps or requests, those that support the
// cause first) a report lists, at most `max`: with a cause, those that support it.
template <typename Item>
size_t ListedOf(const Diagnosis& diagnosis, const std::vector<Item>& items, size_t max) {
  const bool cause_only = ShowsCauseSupportOnly(diagnosis);
  size_t listed = 0;
  while (listed < items.size() && listed < max && (!cause_only || items[listed].supports_cause)) {
    ++listed;
  }
  return listed;
}

// A step feature's value as a reader sees it: a count, a share in percent, a duration.
std::string FeatureValueText(localize::Feature feature, double value);

// What to check next, per category, after a crash, a hang, and for a fitted cause's kind.
std::string_view NextAction(FaultCategory category);
std::string_view NextActionOfCrash(const cause::CrashReport& crash);
std::string_view NextActionOfHang(const cause::HangReport& hang);
std::string_view NextActionOfCause(const cause::Hypothesis& hypothesis);

}  // namespace teller::diagnose
