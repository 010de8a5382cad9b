// The English of what the cause stage found: the sentence of a fitted cause, of a hang,
// a crash and an out-of-memory, and what to check for an OOM. The decisions stay in their
// own files (hypotheses, hang_report, crash_report, oom_report); this file only words
// their facts. The terminal summary, the HTML report and the JSON's sentences read it.
#pragma once

#include <string>
#include <string_view>

#include "cause/crash_report.h"
#include "cause/hang_report.h"
#include "cause/hypotheses.h"
#include "cause/oom_report.h"

namespace teller::cause {

// "steps 5-8", or "step 5".
std::string CauseSteps(const Hypothesis& hypothesis);
// "rank 1's GPU", "the gemm kernels", "rank 2's host", "every rank's collectives".
std::string CauseLocation(const Hypothesis& hypothesis);
// One sentence: what, where, since when (step numbers), how much, and its cost.
std::string CauseSentence(const Hypothesis& hypothesis);

// "rank 2 never entered all_reduce #1004 of communicator 0x41e8... (3 ranks); ranks 0 and 1
// waited 600 s in it."
std::string HangSentence(const HangReport& report);
// "rank 0's engine step Scheduler.run_batch had not ended after 6.0 s when the trace was
// written (its 162 steps before took at most 5.1 ms)".
std::string StalledStepSentence(const StalledStep& stalled);
// Where the culprits were: "rank 2 was in <range> since ..., its last kernel ...".
std::string CulpritSentence(const HangReport& report);

// "Crash: rank 2's cudaLaunchKernel returned 700 (illegal address) in step 8; ..."
std::string CrashSentence(const CrashReport& report);

// "Out of memory on GPU 0 (rank 1): an allocation of 2.00 GiB failed with 1.06 GiB of
// 79.10 GiB free; ..."
std::string OomSentence(const OomReport& report);
// "Before it, PyTorch's allocated memory on GPU 1 rose from 4.06 GiB to 5.44 GiB in 1.7 s
// (peak 5.44 GiB, 11.90 GiB reserved)."; "" without a trend.
std::string TrendSentence(const MemoryTrend& trend);
std::string_view NextActionOfOom(const OomReport& report);

}  // namespace teller::cause
