#include "cause/request_causes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "localize/feature_rows.h"
#include "localize/step_features.h"
#include "reconstruct/request_rows.h"
#include "sim/simulated_trace_testing.h"
#include "wire/labels_file.h"

namespace teller::cause {
namespace {

constexpr model::TimeNs kMs = 1'000'000;

RequestCauseInput Input(const model::Trace& trace) { return RequestCauseInputOfTrace(trace); }

// A run of 1 ms steps on one rank, each with `batch` requests (the fullest has 4): the
// requests running in it (five steps from their first), padded with the first request;
// requests arrive (a log line with their id) and are first scheduled at the given times
// (ms); an arrival of -1 logs nothing.
class QueueBuilder {
 public:
  explicit QueueBuilder(uint32_t batch = 4) : batch_(batch) {}

  // rank: the data-parallel engine that serves it (its steps on that rank).
  void Request(const std::string& id, int64_t arrival_ms, int64_t first_ms, int32_t rank = 0) {
    const base::StringId name = trace_.strings.Intern(id);
    rank_of_.push_back(rank);
    ranks_ = std::max(ranks_, rank + 1);
    trace_.requests.id.push_back(name);
    trace_.requests.first_ns.push_back(first_ms * kMs);
    trace_.requests.last_ns.push_back(first_ms * kMs + 5 * kMs);
    trace_.requests.step_count.push_back(5);
    if (arrival_ms >= 0) Log(name, arrival_ms, rank);  // else an offline batch's request
  }

  // A request the engine logged at arrival_ms and never scheduled.
  void Unscheduled(const std::string& id, int64_t arrival_ms, int32_t rank = 0) {
    Log(trace_.strings.Intern(id), arrival_ms, rank);
  }

  // A batch line the engine logged at at_ms (SGLang's "Prefill batch. ... #queue-req: 1"),
  // aligned to the step of that ms.
  void BatchLine(int64_t at_ms, const std::string& text, int32_t rank = 0) {
    trace_.logs.ts_ns.push_back(at_ms * kMs);
    trace_.logs.request.push_back(base::StringPool::kEmpty);
    trace_.logs.rank.push_back(rank);
    trace_.logs.text.push_back(trace_.strings.Intern(text));
    trace_.logs.step.push_back(model::StepIndex(static_cast<uint32_t>(rank * kSteps + at_ms)));
  }

  // The request (by its order of adding) runs five steps again from at_ms.
  void Resume(size_t request, int64_t at_ms) { resumes_.emplace_back(request, at_ms); }
  void SetPhase(int64_t step, model::StepPhase phase) { phases_[step] = phase; }

  const model::Trace& trace() {
    trace_.steps = {};
    trace_.step_requests.clear();
    for (int32_t rank = 0; rank < ranks_; ++rank) {
      for (int64_t s = 0; s < kSteps; ++s) AddStep(rank, s);
    }
    return trace_;
  }

 private:
  void AddStep(int32_t rank, int64_t s) {
    model::StepTable& steps = trace_.steps;
    {
      steps.event.push_back(model::EventRow(static_cast<uint32_t>(steps.event.size())));
      steps.rank.push_back(rank);
      const auto phase = phases_.find(s);
      steps.phase.push_back(phase == phases_.end() ? model::StepPhase::kDecode : phase->second);
      steps.start_ns.push_back(s * kMs);
      steps.end_ns.push_back(s * kMs + kMs - 1);
      steps.number.push_back(s);
      steps.global_step.push_back(s);
      steps.requests_begin.push_back(static_cast<uint32_t>(trace_.step_requests.size()));
      const uint32_t count = s == kSteps - 1 ? 4 : batch_;
      std::vector<model::RequestIndex> running;
      uint32_t pad = trace_.requests.size();  // the engine's first request
      for (uint32_t q = 0; q < trace_.requests.size(); ++q) {
        if (rank_of_[q] != rank) continue;
        pad = std::min(pad, q);
        if (Runs(q, s)) running.push_back(model::RequestIndex(q));
      }
      while (running.size() < count) running.push_back(model::RequestIndex(pad));
      trace_.step_requests.insert(trace_.step_requests.end(), running.begin(), running.end());
      steps.requests_count.push_back(static_cast<uint32_t>(running.size()));
    }
  }

  void Log(base::StringId request, int64_t at_ms, int32_t rank) {
    trace_.logs.ts_ns.push_back(at_ms * kMs);
    trace_.logs.request.push_back(request);
    trace_.logs.rank.push_back(rank);
    trace_.logs.text.push_back(base::StringPool::kEmpty);
    trace_.logs.step.push_back(model::StepIndex());
  }

  bool Runs(uint32_t q, int64_t s) const {
    const int64_t first = trace_.requests.first_ns[q] / kMs;
    if (s >= first && s < first + 5) return true;
    for (const auto& [request, at] : resumes_) {
      if (request == q && s >= at && s < at + 5) return true;
    }
    return false;
  }

  static constexpr int64_t kSteps = 200;
  uint32_t batch_;
  int32_t ranks_ = 1;
  std::vector<int32_t> rank_of_;
  std::vector<std::pair<size_t, int64_t>> resumes_;
  std::map<int64_t, model::StepPhase> phases_;
  model::Trace trace_;
};

TEST(RequestCausesTest, LaterArrivalsScheduledFirstAreCounted) {
  QueueBuilder b;
  b.Request("a", 0, 1);
  b.Request("b", 2, 30);  // waits while c and d go first
  b.Request("c", 4, 5);
  b.Request("d", 6, 7);
  b.Request("e", 40, 41);
  const std::vector<RequestQueueing> queue = MeasureRequestQueueing(Input(b.trace()));
  ASSERT_EQ(queue.size(), 5u);
  for (const RequestQueueing& r : queue) EXPECT_EQ(r.passed_over, 0);  // full batches
  std::vector<int64_t> served_first;
  for (const RequestQueueing& r : queue) served_first.push_back(r.served_first);
  EXPECT_EQ(served_first, (std::vector<int64_t>{0, 2, 0, 0, 0}));
  EXPECT_EQ(queue[1].arrival_ns, 2 * kMs);
  EXPECT_EQ(queue[1].first_scheduled_ns, 30 * kMs);
}

TEST(RequestCausesTest, AStarvedRequestIsNamedWithItsWaitAndTheStepsItMissed) {
  QueueBuilder b(/*batch=*/4);
  for (int i = 0; i < 10; ++i) b.Request("r" + std::to_string(i), 10 * i, 10 * i + 1);
  b.Request("starved", 12, 75);  // six later ones (20..70) go first
  const std::vector<Hypothesis> found = FindStarvedRequests(Input(b.trace()), 3);
  ASSERT_EQ(found.size(), 1u);
  const Hypothesis& h = found[0];
  EXPECT_EQ(h.kind, CauseKind::kRequestStarved);
  EXPECT_EQ(h.request, "starved");
  EXPECT_EQ(h.requests_served_first, 6);  // 20, 30, 40, 50, 60, 70 arrived later
  EXPECT_DOUBLE_EQ(h.effect, 63.0 * kMs);
  EXPECT_DOUBLE_EQ(h.typical_wait_ns, 1.0 * kMs);
  EXPECT_EQ(h.first_group, 13);  // the steps that started while it waited
  EXPECT_EQ(h.last_group, 74);
  EXPECT_EQ(h.steps_passed_over, 0);  // every batch was full
  EXPECT_GT(h.score, 15.0);
}

// SGLang logs no request lines, only its batches with the requests left waiting: one
// request waited with room in the KV pool while r4-r7 were admitted, and the line that
// drained the queue admitted r3 alone. The others waited no longer than the counts show.
std::string PrefillLine(int new_tokens, int running, int waiting, double usage) {
  return "Prefill batch [7], #new-seq: 1, #new-token: " + std::to_string(new_tokens) +
         ", #cached-token: 0, token usage: " + std::to_string(usage) +
         ", #running-req: " + std::to_string(running) + ", #queue-req: " + std::to_string(waiting);
}

QueueBuilder SkippedByTheScheduler(int waiting, double usage) {
  QueueBuilder b(/*batch=*/4);
  for (int i = 0; i < 10; ++i) b.Request("r" + std::to_string(i), -1, i == 3 ? 75 : 10 * i + 1);
  for (int i = 0; i < 10; ++i) {
    const bool skips = i >= 4 && i <= 7;
    if (i != 3) {
      b.BatchLine(10 * i + 1, PrefillLine(skips ? 150 : 400, 2, skips ? waiting : 0, usage));
    }
  }
  b.BatchLine(75, PrefillLine(400, 4, 0, usage));
  return b;
}

TEST(RequestCausesTest, QueueCountsShowARequestSkippedWithRoom) {
  QueueBuilder b = SkippedByTheScheduler(/*waiting=*/1, /*usage=*/0.05);
  const std::vector<RequestQueueing> queue = MeasureRequestQueueing(Input(b.trace()));
  ASSERT_EQ(queue.size(), 10u);
  const std::vector<Hypothesis> found = FindStarvedRequests(Input(b.trace()), 3);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].request, "r3");
  EXPECT_DOUBLE_EQ(found[0].effect, 34.0 * kMs);  // from the first line left waiting (41)
  EXPECT_EQ(found[0].requests_served_first, 4);
  EXPECT_TRUE(found[0].wait_from_queue_counts);
  EXPECT_FALSE(queue[0].arrival_from_queue_counts);
}

// Waiting while the KV pool was nearly full is waiting for memory; two left waiting leave
// open which one the draining line admitted: neither names a request. Nor do batches as
// large as the engine's largest (the prefill budget held the request back), nor batches
// formed with as many running as the engine ever ran (its cap on running requests).
TEST(RequestCausesTest, QueueCountsOfAFullPoolOrOfSeveralWaitingNameNoRequest) {
  QueueBuilder full = SkippedByTheScheduler(/*waiting=*/1, /*usage=*/0.95);
  EXPECT_TRUE(FindStarvedRequests(Input(full.trace()), 3).empty());
  QueueBuilder several = SkippedByTheScheduler(/*waiting=*/2, /*usage=*/0.05);
  EXPECT_TRUE(FindStarvedRequests(Input(several.trace()), 3).empty());
  QueueBuilder budget(/*batch=*/4), cap(/*batch=*/4);
  for (int i = 0; i < 10; ++i) {
    const int waiting = i >= 4 && i <= 7 ? 1 : 0;
    budget.Request("r" + std::to_string(i), -1, i == 3 ? 75 : 10 * i + 1);
    cap.Request("r" + std::to_string(i), -1, i == 3 ? 75 : 10 * i + 1);
    if (i == 3) continue;
    budget.BatchLine(10 * i + 1, PrefillLine(400, 2, waiting, 0.05));
    cap.BatchLine(10 * i + 1, PrefillLine(waiting ? 150 : 400, 4, waiting, 0.05));
  }
  budget.BatchLine(75, PrefillLine(400, 4, 0, 0.05));
  cap.BatchLine(75, PrefillLine(400, 4, 0, 0.05));
  EXPECT_TRUE(FindStarvedRequests(Input(budget.trace()), 3).empty());
  EXPECT_TRUE(FindStarvedRequests(Input(cap.trace()), 3).empty());
}

// A request the engine logged and never scheduled while later ones ran was starved until
// the capture ended (its last step, 199 ms); one logged after that is not counted.
TEST(RequestCausesTest, ARequestStillWaitingWhenTheCaptureEndedIsStarved) {
  QueueBuilder b(/*batch=*/4);
  for (int i = 0; i < 10; ++i) b.Request("r" + std::to_string(i), 10 * i, 10 * i + 1);
  b.Unscheduled("waiting", 12);
  b.Unscheduled("too late", 199);
  const std::vector<RequestQueueing> queue = MeasureRequestQueueing(Input(b.trace()));
  ASSERT_EQ(queue.size(), 11u);
  const std::vector<Hypothesis> found = FindStarvedRequests(Input(b.trace()), 3);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].request, "waiting");
  EXPECT_TRUE(found[0].request_never_scheduled);
  EXPECT_EQ(found[0].requests_served_first, 8);  // r2..r9
  EXPECT_DOUBLE_EQ(found[0].effect, 187.0 * kMs);
}

// An offline batch logs no arrival and numbers its requests as it queues them: request 3,
// scheduled after 4-9, was starved; the others' waits are bounded by the next first step.
TEST(RequestCausesTest, AnOfflineBatchQueuesItsRequestsInTheOrderOfTheirNumbers) {
  QueueBuilder b(/*batch=*/4);
  for (int i = 0; i < 10; ++i) b.Request(std::to_string(i), -1, i == 3 ? 75 : 10 * i + 1);
  const std::vector<RequestQueueing> queue = MeasureRequestQueueing(Input(b.trace()));
  ASSERT_EQ(queue.size(), 10u);
  EXPECT_EQ(queue[3].arrival_ns, 41 * kMs);  // before request 4's first step
  EXPECT_EQ(queue[3].served_first, 4);      // 4-7 ran first, 8 and 9 after it
  EXPECT_EQ(queue[0].arrival_ns, queue[0].first_scheduled_ns);
  const std::vector<Hypothesis> found = FindStarvedRequests(Input(b.trace()), 3);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].request, "3");
  EXPECT_DOUBLE_EQ(found[0].effect, 34.0 * kMs);
}

// A second batch (another LLM.generate call) queued after the first drained is no cause,
// nor is a batch served in order; ids that are not numbers give no arrival at all.
TEST(RequestCausesTest, AnOfflineBatchServedInOrderIsNoCause) {
  QueueBuilder b(/*batch=*/4);
  for (int i = 0; i < 8; ++i) b.Request(std::to_string(i), -1, 2 * i + 1);
  for (int i = 8; i < 16; ++i) b.Request(std::to_string(i), -1, 100 + 2 * i);
  EXPECT_TRUE(FindStarvedRequests(Input(b.trace()), 3).empty());
  QueueBuilder named(/*batch=*/4);
  for (int i = 0; i < 10; ++i) named.Request("r" + std::to_string(i), -1, i == 3 ? 75 : 10 * i);
  EXPECT_TRUE(MeasureRequestQueueing(Input(named.trace())).empty());
}

// Nobody arrives after it, but steps with room in their batch run while it is first in
// line: a first-come first-served engine would have taken it.
TEST(RequestCausesTest, ARequestPassedOverWithRoomInTheBatchIsStarved) {
  QueueBuilder b(/*batch=*/1);
  for (int i = 0; i < 8; ++i) b.Request("r" + std::to_string(i), 10 * i, 10 * i + 1);
  b.Request("r8", 80, 81);
  b.Request("last", 100, 160);  // 59 steps (101..159) with room pass it over
  const std::vector<Hypothesis> found = FindStarvedRequests(Input(b.trace()), 3);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].request, "last");
  EXPECT_EQ(found[0].requests_served_first, 0);
  EXPECT_EQ(found[0].steps_passed_over, 59);
  EXPECT_EQ(found[0].first_group, 101);  // the steps that started while it waited
  EXPECT_EQ(found[0].last_group, 159);
}

// First come, first served with a backlog: long waits, nobody overtaken, no cause.
TEST(RequestCausesTest, AQueueThatKeepsItsOrderIsNoCause) {
  QueueBuilder b;
  for (int i = 0; i < 10; ++i) b.Request("r" + std::to_string(i), i, 20 * i + 1);
  EXPECT_TRUE(FindStarvedRequests(Input(b.trace()), 3).empty());
}

// A policy that reorders (longest prefix first): every request is overtaken now and then,
// so being overtaken once is the run's normal.
TEST(RequestCausesTest, OvertakesAsCommonAsTheRunsAreNoCause) {
  QueueBuilder b;
  for (int i = 0; i < 12; i += 2) {
    b.Request("late" + std::to_string(i), 10 * i, 10 * i + 12);
    b.Request("early" + std::to_string(i), 10 * i + 1, 10 * i + 2);
  }
  EXPECT_TRUE(FindStarvedRequests(Input(b.trace()), 3).empty());
}

// Data-parallel engines keep a queue each: a request of one is not overtaken by the other's.
TEST(RequestCausesTest, EachDataParallelEngineHasItsOwnQueue) {
  QueueBuilder b;
  for (int i = 0; i < 8; ++i) b.Request("a" + std::to_string(i), 10 * i, 10 * i + 1, 0);
  b.Request("b-busy", 12, 60, 1);  // engine 1's only request waits for its own reasons
  const std::vector<RequestQueueing> queue = MeasureRequestQueueing(Input(b.trace()));
  ASSERT_EQ(queue.size(), 9u);
  EXPECT_EQ(queue.back().engine, 1);
  EXPECT_EQ(queue.back().served_first, 0);  // engine 0's later arrivals are not its queue
  EXPECT_TRUE(FindStarvedRequests(Input(b.trace()), 3).empty());
}

// A log line written once the request ran is not its arrival; too few requests compare.
TEST(RequestCausesTest, OnlyLinesBeforeTheFirstStepAreArrivals) {
  QueueBuilder b;
  b.Request("a", 9, 5);
  EXPECT_TRUE(MeasureRequestQueueing(Input(b.trace())).empty());
  for (int i = 0; i < 3; ++i) b.Request("r" + std::to_string(i), 10 * i, 10 * i + 1);
  b.Request("starved", 1, 40);
  EXPECT_TRUE(FindStarvedRequests(Input(b.trace()), 3).empty());  // 4 of known arrival < 5
}

// A running request dropped from decode steps and taken back was preempted: one hypothesis
// for the run with the steps it missed; a gap over prefill-only steps is the policy's.
TEST(RequestCausesTest, ARequestThatLeavesDecodeStepsAndComesBackWasPreempted) {
  QueueBuilder b;
  for (int i = 0; i < 6; ++i) b.Request("r" + std::to_string(i), 10 * i, 10 * i + 1);
  b.Resume(2, 30);  // r2 ran steps 21-25, then 30-34: it missed 26-29
  const std::optional<Hypothesis> found = FindPreemptedRequests(Input(b.trace()));
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->kind, CauseKind::kRequestPreempted);
  EXPECT_EQ(found->requests_preempted, 1);
  EXPECT_EQ(found->request, "r2");
  EXPECT_DOUBLE_EQ(found->effect, 4.0);
  EXPECT_EQ(found->first_group, 26);
  EXPECT_EQ(found->last_group, 30);  // to its return
  // It shows where it came back (its context recomputed), not in the steps it missed.
  EXPECT_EQ(found->abnormal_groups, std::vector<int64_t>{30});
  EXPECT_FALSE(found->ShowsIn(27));
  EXPECT_TRUE(found->ShowsIn(30));

  for (int64_t s = 26; s < 30; ++s) b.SetPhase(s, model::StepPhase::kPrefill);
  EXPECT_FALSE(FindPreemptedRequests(Input(b.trace())).has_value());
}

// A run that preempts its running requests is out of KV-cache blocks: the request left
// waiting with room in the batch but nobody overtaking it waited for blocks, and is the
// preemption's (one cause, the KV cache). A request that later arrivals overtook was
// skipped by the scheduler: it stays starved beside the preemption.
TEST(RequestCausesTest, ARequestBlockedWhileRequestsArePreemptedWaitedForTheKvCache) {
  QueueBuilder blocked(/*batch=*/1);
  for (int i = 0; i < 8; ++i) blocked.Request("r" + std::to_string(i), 10 * i, 10 * i + 1);
  blocked.Request("r8", 80, 81);
  blocked.Request("last", 100, 160);  // passed over with room, overtaken by none
  blocked.Resume(2, 30);              // r2 preempted over steps 26-29
  CauseAnalysis analysis;
  AddRequestCauses(FindRequestCauses(Input(blocked.trace()), CauseOptions()), CauseOptions(),
                   &analysis);
  ASSERT_EQ(analysis.ranked.size(), 1u);
  const Hypothesis& kv = analysis.ranked[0];
  EXPECT_EQ(kv.kind, CauseKind::kRequestPreempted);
  EXPECT_EQ(kv.requests_blocked, 1);
  EXPECT_EQ(kv.blocked_request, "last");
  EXPECT_DOUBLE_EQ(kv.blocked_wait_ns, 60.0 * kMs);
  EXPECT_LE(kv.first_group, 26);
  EXPECT_GE(kv.last_group, 159);  // through the blocked request's wait
  EXPECT_GT(kv.score, 4.0);       // its wait's score, above the 4 decode steps missed
  EXPECT_TRUE(analysis.degraded);

  QueueBuilder skipped(/*batch=*/4);
  for (int i = 0; i < 10; ++i) skipped.Request("r" + std::to_string(i), 10 * i, 10 * i + 1);
  skipped.Request("starved", 12, 75);  // six later ones go first
  skipped.Resume(8, 90);
  CauseAnalysis both;
  AddRequestCauses(FindRequestCauses(Input(skipped.trace()), CauseOptions()), CauseOptions(),
                   &both);
  std::set<CauseKind> kinds;
  for (const Hypothesis& h : both.ranked) kinds.insert(h.kind);
  EXPECT_EQ(kinds, (std::set<CauseKind>{CauseKind::kRequestStarved, CauseKind::kRequestPreempted}));
}

TEST(RequestCausesTest, RequestsThatRunWithoutAGapWereNotPreempted) {
  QueueBuilder b;
  for (int i = 0; i < 6; ++i) b.Request("r" + std::to_string(i), 10 * i, 10 * i + 1);
  EXPECT_FALSE(FindPreemptedRequests(Input(b.trace())).has_value());
}

std::set<std::string> FaultyRequests(const model::Trace& trace);

// Every request's first step prefills it but r3's, which it first ran as a decode: its
// prompt took the decode path. r0, in the engine's first step, may have been prefilled
// before the capture began and is not counted.
TEST(RequestCausesTest, ARequestFirstRunInADecodeStepWasMisrouted) {
  QueueBuilder b;
  for (int i = 0; i < 6; ++i) b.Request("r" + std::to_string(i), 10 * i, 10 * i + 1);
  for (int i = 0; i < 6; ++i) {
    if (i != 3) b.SetPhase(10 * i + 1, model::StepPhase::kPrefill);
  }
  const std::optional<Hypothesis> found = FindMisroutedRequests(Input(b.trace()));
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->kind, CauseKind::kRequestMisrouted);
  EXPECT_EQ(found->request, "r3");
  EXPECT_EQ(found->requests_misrouted, 1);
  EXPECT_DOUBLE_EQ(found->effect, 5.0);  // steps 31-35
  EXPECT_EQ(found->first_group, 31);
  EXPECT_EQ(found->last_group, 35);
  EXPECT_EQ(found->abnormal_groups, std::vector<int64_t>{31});  // where it arrived undecoded
  EXPECT_FALSE(found->ShowsIn(32));

  b.SetPhase(31, model::StepPhase::kMixed);  // chunked prefill: a mixed first step is normal
  EXPECT_FALSE(FindMisroutedRequests(Input(b.trace())).has_value());
}

// A disaggregated decode instance receives its requests prefilled: it runs decode steps
// only, and every request's first step there decodes.
TEST(RequestCausesTest, ADecodeOnlyEngineMisroutesNothing) {
  QueueBuilder b;
  for (int i = 0; i < 6; ++i) b.Request("r" + std::to_string(i), 10 * i, 10 * i + 1);
  EXPECT_FALSE(FindMisroutedRequests(Input(b.trace())).has_value());
}

// The simulator's decode misroute (a hybrid model's new request down the decode path) is
// found and its request named; a fault-free run of the same seed has none.
TEST(RequestCausesTest, TheSimulatorsMisrouteIsFoundAndAFaultFreeRunHasNone) {
  sim::SimConfig config = sim::SmallConfig(sim::EngineKind::kSglang, 4, 12);
  config.model.mamba_period = 4;
  const model::Trace misrouted = sim::SimulatedTrace(config, "decode_misroute", "req_misroute");
  const std::optional<Hypothesis> found = FindMisroutedRequests(Input(misrouted));
  ASSERT_TRUE(found.has_value());
  EXPECT_TRUE(FaultyRequests(misrouted).count(found->request)) << found->request;
  // Its abnormal steps are the steps the simulator's labels say the misroute changed.
  auto labels = wire::ParseLabels(misrouted.meta.labels_json, "test");
  ASSERT_TRUE(labels.ok());
  ASSERT_EQ(labels->faults.size(), 1u);
  const std::vector<int32_t>& affected = labels->faults[0].affected_steps;
  EXPECT_EQ(found->abnormal_groups, std::vector<int64_t>(affected.begin(), affected.end()));
  EXPECT_FALSE(FindMisroutedRequests(Input(sim::SimulatedTrace(config, "", "req_misroute_none"))));
}

std::set<std::string> FaultyRequests(const model::Trace& trace) {
  std::set<std::string> out;
  auto labels = wire::ParseLabels(trace.meta.labels_json, "test");
  EXPECT_TRUE(labels.ok());
  for (const wire::LabelsRequest& r : labels->requests) {
    if (r.is_fault) out.insert(r.id);
  }
  return out;
}

// The simulator's starved request is found and named; a fault-free run of the same seed
// has none. vLLM logs its arrival; SGLang only its batches, with the requests left waiting.
void ExpectTheStarvedRequestFound(sim::EngineKind engine) {
  const model::Trace starved =
      sim::SimulatedTrace(sim::SmallConfig(engine, 4, 12), "starved_request", "req_starved");
  const std::vector<Hypothesis> found = FindStarvedRequests(Input(starved), 3);
  ASSERT_FALSE(found.empty());
  EXPECT_EQ(FaultyRequests(starved).count(found[0].request), 1u) << found[0].request;
  // Only the request waited: no step of its window shows the fault (as the labels say).
  EXPECT_TRUE(found[0].lists_abnormal_steps);
  EXPECT_TRUE(found[0].abnormal_groups.empty());
  EXPECT_FALSE(found[0].ShowsIn(found[0].first_group));
  const model::Trace normal =
      sim::SimulatedTrace(sim::SmallConfig(engine, 4, 12), "", "req_normal");
  EXPECT_TRUE(FindStarvedRequests(Input(normal), 3).empty());
}

TEST(RequestCausesTest, TheSimulatorsStarvedRequestIsFoundAndAFaultFreeRunHasNone) {
  for (sim::EngineKind engine : {sim::EngineKind::kVllmV1Online, sim::EngineKind::kSglang}) {
    SCOPED_TRACE(sim::EngineName(engine));
    ExpectTheStarvedRequestFound(engine);
  }
}

// The same in vLLM's offline engine, which logs no arrival: its requests' numbers order
// the queue.
TEST(RequestCausesTest, TheSimulatorsStarvedRequestOfAnOfflineBatchIsFound) {
  const sim::SimConfig config = sim::SmallConfig(sim::EngineKind::kVllmV1Offline, 4, 48);
  const model::Trace starved = sim::SimulatedTrace(config, "starved_request", "req_starved");
  const std::vector<Hypothesis> found = FindStarvedRequests(Input(starved), 3);
  ASSERT_FALSE(found.empty());
  EXPECT_EQ(FaultyRequests(starved).count(found[0].request), 1u) << found[0].request;
  EXPECT_TRUE(FindStarvedRequests(Input(sim::SimulatedTrace(config, "", "req_normal")), 3).empty());
}

// The input made from a trace's own request rows, findings' rows and log lines is the one
// made from the trace, column for column (SGLang: its queue-count lines are kept).
TEST(RequestCausesTest, TheInputOfATracesRowsIsTheTracesInput) {
  const model::Trace trace = sim::SimulatedTrace(sim::SmallConfig(sim::EngineKind::kSglang, 4, 12),
                                                 "starved_request", "req_input_rows");
  const RequestCauseInput own = Input(trace);
  const reconstruct::RequestRows requests = reconstruct::RequestRowsOfPart(trace);
  const localize::FeatureRows steps =
      localize::FeatureRowsOfPart(trace, localize::ComputeStepFeatures(trace));
  auto rows = RequestCauseInputOfRows(requests, steps, trace.logs, trace.strings);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  EXPECT_EQ(rows->rank, own.rank);
  EXPECT_EQ(rows->group, own.group);
  EXPECT_EQ(rows->phase, own.phase);
  EXPECT_EQ(rows->start_ns, own.start_ns);
  EXPECT_EQ(rows->end_ns, own.end_ns);
  EXPECT_EQ(rows->requests_begin, own.requests_begin);
  EXPECT_EQ(rows->step_requests, own.step_requests);
  EXPECT_EQ(rows->id, own.id);
  EXPECT_EQ(rows->first_ns, own.first_ns);
  EXPECT_EQ(rows->line_ts_ns, own.line_ts_ns);
  EXPECT_EQ(rows->line_rank, own.line_rank);
  EXPECT_EQ(rows->line_request, own.line_request);
  EXPECT_EQ(rows->line_step, own.line_step);
  EXPECT_EQ(rows->line_text, own.line_text);
  EXPECT_GT(own.lines(), 0u);
  EXPECT_TRUE(std::any_of(own.line_text.begin(), own.line_text.end(),
                          [](std::string_view text) { return !text.empty(); }));
  EXPECT_EQ(RequestCausesDifference(FindRequestCauses(*rows, {}), FindRequestCauses(own, {})), "");
}

}  // namespace
}  // namespace teller::cause
