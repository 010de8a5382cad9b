// Request-level causes: a fault that delays one request without moving the steps. A
// request's arrival is its first log line with its id before it was first scheduled (the
// engine's "Received request" / "Added request"); its queue wait runs from there to the
// start of its first step. An offline batch (vLLM's LLM.generate) logs no arrival but
// numbers its requests 0, 1, 2, ... as it queues them: a request arrived before the first
// step of any request numbered after it, which bounds its arrival. A starved request waits far longer than the run's requests do
// while the engine could have taken it: requests that arrived after it are scheduled
// first, or steps run with room in their batch while it is first in the queue. Under the
// engines' first-come first-served policy neither happens to a request that waits for
// capacity; under a policy that reorders (SGLang's longest prefix match, priorities) the
// run's own counts are the baseline.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cause/hypotheses.h"
#include "cause/request_cause_input.h"
#include "model/trace.h"

namespace teller::cause {

struct RequestQueueing {
  model::RequestIndex request;  // invalid for a request never scheduled
  std::string_view id;          // a view of RequestCauseInput::id
  int32_t engine = 0;  // the lowest rank whose steps carry it: requests of one queue
  model::TimeNs arrival_ns = 0;
  // Its first step's start; for a request never scheduled, the start of the capture's last
  // step (or its last log line, an abort, when earlier): its wait is at least that long.
  model::TimeNs first_scheduled_ns = 0;
  bool scheduled = true;
  int64_t served_first = 0;  // requests that arrived after it and were scheduled before it
  // Steps that started while it was first in the queue (every earlier arrival scheduled)
  // with fewer requests than the run's fullest step: room it was not given.
  int64_t passed_over = 0;
  // When it was first in line: its arrival, or when the last earlier arrival was
  // scheduled, or when a later arrival was (the queue was served past it). From there to
  // its first step the queue does not explain its wait.
  model::TimeNs first_in_line_ns = 0;
  // Its arrival read from the engine's queue counts, not logged (ArrivalsFromQueueCounts).
  bool arrival_from_queue_counts = false;
};

// Every request with a known arrival, engine by engine (the lowest rank whose steps carry
// it), in arrival order within each; overtakes and steps passed over count within its
// engine: data-parallel engines keep queues of their own. A request logged but in no step
// was never scheduled: its engine is that of the rank that logged it, or the only one.
std::vector<RequestQueueing> MeasureRequestQueueing(const RequestCauseInput& in);

// The starved requests as hypotheses (kind kRequestStarved), best first: requests
// overtaken, or passed over, more than the run's requests are (by at least one, two
// steps, and three robust spreads of the run's counts), scored by the robust z of the
// time they waited first in line against the run's (its spread at least half a median
// step: requests wait in whole steps). Empty with fewer than kMinRequestsToCompare requests of
// known arrival.
inline constexpr size_t kMinRequestsToCompare = 5;
std::vector<Hypothesis> FindStarvedRequests(const RequestCauseInput& in, size_t max_hypotheses);

// A run whose running requests were preempted ran out of KV-cache blocks: a waiting request
// that no later arrival overtook, passed over while the batch had room in its count, waited
// for those blocks, not for a scheduler that skipped it (first come, first served stops at
// the request it cannot place). Such starved hypotheses leave `starved` and join the
// preemption's: counted, the longest wait kept, the window and score the larger of both.
void AbsorbBlockedRequests(std::vector<Hypothesis>* starved, Hypothesis* preempted);

// Running requests preempted: a request that leaves its engine's batch during decode steps
// (pure decode steps that decoded other requests) and comes back (an engine preempts running
// requests when its KV cache runs out of blocks, and recomputes them). One hypothesis (kind
// kRequestPreempted) for the run: how many requests, the first of them, the decode steps they
// missed in all (effect and score) and those steps as its window; none when no request left a
// decode step. Prefill and mixed steps are not counted (a prefill-first policy, vLLM v0 and SGLang,
// pauses every decode in a prefill step; a chunked one, vLLM v1, can run out of token
// budget for some running requests in a mixed step), nor steps of unknown phase or with no
// request (a data-parallel rank's idle batch).
std::optional<Hypothesis> FindPreemptedRequests(const RequestCauseInput& in);

// New requests misrouted to the decode path: a request whose first step on its engine is a
// pure decode step, on an engine that prefills its own requests (it runs prefill or mixed
// steps; a disaggregated decode instance receives its requests prefilled), and that was not
// in the engine's first step (it may have been prefilled before the capture). A request's
// prompt is prefilled before it decodes on vLLM and SGLang alike, so a healthy engine has
// none. One hypothesis (kind kRequestMisrouted): how many, the first, the steps they ran in
// all (effect and score) and those steps as its window; none without one.
std::optional<Hypothesis> FindMisroutedRequests(const RequestCauseInput& in);

// FindStarvedRequests' hypotheses (options.max_alternatives + 1 at most), then
// FindPreemptedRequests' (with the blocked requests it absorbs: AbsorbBlockedRequests), then
// FindMisroutedRequests'.
std::vector<Hypothesis> FindRequestCauses(const RequestCauseInput& in, const CauseOptions& options);

// Adds the request causes found (FindRequestCauses) to the analysis, ranked with the others by
// score; the verdict stands on the new first when it reaches options.min_score.
void AddRequestCauses(std::vector<Hypothesis> found, const CauseOptions& options,
                      CauseAnalysis* analysis);

// Where two lists of request causes differ (kind, request and counts, wait, effect, score,
// window and abnormal groups of each), or "" when they are the same.
std::string RequestCausesDifference(const std::vector<Hypothesis>& a,
                                    const std::vector<Hypothesis>& b);

}  // namespace teller::cause
