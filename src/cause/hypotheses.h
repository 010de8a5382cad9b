// Root-cause hypotheses fitted to the deviation map. Each cause is parametric (a
// location, a window of steps, an effect size) and predicts which cells it moves and
// by how much, victims included (peers waiting in collectives for a slow or late
// rank). A cause is fitted by least squares in units of each cell's noise; its score
// is the evidence of its window, so the cause whose prediction matches what moved,
// and nothing that did not, wins (docs/diagnose.md, "Causes").
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/tuning.h"
#include "cause/deviation_map.h"
#include "localize/operator_family.h"

namespace teller::cause {

enum class CauseKind : uint8_t {
  kGpuSlow,           // every compute kernel of one rank slower (throttle, contention)
  kFamilySlow,        // one compute family slower on every rank
  kHostSlow,          // host ranges and calls of one rank slower (memory pressure)
  kLaunchLatency,     // kernel launch calls of one rank slower
  kCopyLatency,       // host-device copies and their calls of one rank slower
  kSyncLatency,       // synchronization calls of one rank wait longer
  kAllocator,         // allocations and frees inside the steps of one rank
  kStraggler,         // one rank's host is slow or stalls: late at the collectives, peers wait
  kLinkDegraded,      // every rank's collectives slower, arrivals aligned
  kEnginePause,       // the engine idles between steps
  kReorder,           // compute kernels run in another order
  kLaunchRetry,       // runtime calls of one rank fail and are retried (launch out of resources)
  kRequestStarved,    // one request waits to be scheduled while later ones are served first
  kRequestPreempted,  // running requests leave the batch mid-decode and come back (KV cache)
  kRequestMisrouted,  // a new request first runs in a decode step: its prompt took the decode path
};
inline constexpr int kCauseKindCount = static_cast<int>(CauseKind::kRequestMisrouted) + 1;
std::string_view CauseKindName(CauseKind kind);
// Whether the cause sits on one rank (Hypothesis::rank) or on all of them.
bool IsRankCause(CauseKind kind);
// Whether the cause is read from the requests (request_causes.h), not the deviation map.
bool IsRequestCause(CauseKind kind);

struct CauseOptions {
  // Windows, discounts and the verdict's threshold (base/tuning_list.h, docs/tuning.md).
  TELLER_TUNED_CAUSE(TELLER_TUNED_FIELD)
  size_t max_alternatives = 4;
  int threads = 0;  // fitting the causes (0: one per core); the same result for any count
  bool operator==(const CauseOptions&) const = default;
};

struct Hypothesis {
  CauseKind kind = CauseKind::kGpuSlow;
  int32_t rank = -1;      // -1: every rank
  int32_t node = -1;      // a link's end: the ranks of this node; -1 every rank
  std::string node_name;  // the node's host name (DeviationMap::node_names), "" unknown
  localize::OperatorFamily family = localize::OperatorFamily::kUnnamed;
  // A family slowdown's other families slowed alike over its window (JoinCoMovingFamilies):
  // one kernel class that the families split; `family` added the most time.
  std::vector<localize::OperatorFamily> also_families;
  // Window: groups (global steps) and the ranks' step numbers at its ends.
  int64_t first_group = -1;
  int64_t last_group = -1;
  int64_t steps = 0;
  model::TimeNs since_ns = 0;  // start of the window's first step
  // Effect: a ratio minus 1 for causes that scale time (gpu, family, host, straggler,
  // copies, syncs, launches, link), else added nanoseconds per step (allocator, pause, a
  // straggler by_stall) or instances per step (reorder), failed calls per step (launch
  // retry).
  double effect = 0.0;
  bool additive = false;
  // A link judged by its collectives' transfers (matched across ranks) besides their time.
  bool by_transfer = false;
  // A straggler late by a stall inside its steps (Channel::kStall: no work recorded, a
  // sleep, a GC pause, I/O) rather than a slower host; its effect is ns per step.
  bool by_stall = false;
  // The job ran no device work (a CPU job: gloo, host ops): its host ranges are its compute
  // and its critical path (DeviationMap::device_work).
  bool host_only_job = false;
  double score = 0.0;  // window evidence without its largest steps
  // Share of what moved in the window (squared positive z of every cell) that lies in
  // the cells the cause predicts to move.
  double explained = 0.0;
  // Cost over the window: the steps' baseline time (the slowest rank's), their time
  // over it as measured, and the time the cause's culprit cells added on the rank
  // where they added most (what putting them back to their baseline would save).
  double step_baseline_ns = 0.0;
  double step_excess_ns = 0.0;
  double impact_ns = 0.0;
  // Whether impact_ns was replayed along the steps' critical paths (step_replay.h),
  // rather than summed over the culprit cells.
  bool impact_replayed = false;
  // Replayed, it cost less than CauseOptions::negligible_impact of the steps' baseline
  // time: off their critical path.
  bool cost_negligible = false;
  // The window's collectives of this rank matched across ranks, how many it reached
  // last, and how many it would by chance (a collective of k members: 1/k).
  int64_t collectives = 0;
  int64_t collectives_late = 0;
  double collectives_late_by_chance = 0.0;
  // A rank's cause that reached at least min_collectives_to_tell of them and was last at
  // twice as many as chance says: its peers waited for it.
  bool reached_collectives_last = false;
  // Ranks that waited for the culprit and how long (victim cells' excess).
  std::vector<int32_t> victims;
  double victim_wait_ns = 0.0;
  // A request's cause (request_causes.h): its id, how many requests that arrived after it
  // were scheduled first, the steps with room that ran while it was first in the queue,
  // and the run's typical queue wait (effect: its own wait).
  // A preemption's: the first preempted request and how many were (effect: the decode
  // steps they missed in all).
  std::string request;
  int64_t requests_preempted = 0;
  // Waiting requests the preemption's engine did not admit while its batch had room, none
  // overtaken (AbsorbBlockedRequests): the longest waiter, how long, how many.
  int64_t requests_blocked = 0;
  std::string blocked_request;
  double blocked_wait_ns = 0.0;
  int64_t requests_misrouted = 0;
  bool request_never_scheduled = false;  // still waiting when the capture ended
  // Its wait read from the engine's queue counts (SGLang's batch lines), which log no
  // arrival: the others' waits are not known, only that the counts show none so long.
  bool wait_from_queue_counts = false;
  int64_t requests_served_first = 0;
  int64_t steps_passed_over = 0;
  double typical_wait_ns = 0.0;
  // A short capture's cause (instance_peers.h): told by kernel calls slower than the same
  // kernel's other calls in the capture, not by a baseline of steps; how many calls of its
  // kernels were compared and how many were slow.
  bool by_instance_peers = false;
  int64_t peer_calls = 0;
  int64_t peer_calls_slow = 0;
  // The steps it shows in, where not every step of its window does: a request cause's
  // window is its requests' wait or life, but the schedule changed only at a misrouted
  // decode's arrival or a preempted request's recompute, and a starved request's wait
  // changed no step; launch retries show where calls failed (in order; none: the cause
  // moved no step).
  bool lists_abnormal_steps = false;
  std::vector<int64_t> abnormal_groups;
  // Cells of the window the cause predicts to move, culprits first, largest z first.
  std::vector<uint32_t> evidence;
  bool IsVictimRank(int32_t r) const {
    return std::find(victims.begin(), victims.end(), r) != victims.end();
  }
  // Whether the cause shows in the step (a group): in its window, or among its listed steps.
  bool ShowsIn(int64_t group) const {
    if (lists_abnormal_steps) {
      return std::binary_search(abnormal_groups.begin(), abnormal_groups.end(), group);
    }
    return group >= first_group && group <= last_group;
  }
};

struct CauseAnalysis {
  // Best first, one per (kind, location); the first max_alternatives + 1 measured in
  // full, the rest only their window, score and effect (no explained share, victims,
  // evidence or cost).
  std::vector<Hypothesis> ranked;
  bool degraded = false;  // ranked[0].score >= min_score
  // A second cause: what the first leaves unexplained, fitted again (degraded only).
  bool has_second = false;
  Hypothesis second;
  int64_t scored_steps = 0;
};

CauseAnalysis AnalyzeCauses(const DeviationMap& map, const CauseOptions& options = {});

// Whether the cause moves this cell of a step as its culprit (a victim's wait is not).
bool MovesAsCulprit(const Hypothesis& hypothesis, const MapStep& step, const Cell& cell);

}  // namespace teller::cause
