// A tiny reconstructed trace built by hand for the report tests.
#pragma once

#include "model/trace.h"

namespace teller::report {

// One step (number 3, decode, requests r1 and r2) on rank 0:
//   STEP decode -> FE forward -> RT cudaLaunchKernel (cid 7) -> K gemm (on stream 7)
inline model::Trace MakeReportTestTrace() {
  using namespace model;
  Trace trace;
  auto s = [&](std::string_view text) { return trace.strings.Intern(text); };
  ProcessIndex p = trace.processes.Append(100, s("node0"), s("python"), 0, s("x.json"));
  ThreadIndex host = trace.threads.Append(p, 101, s("main"), false, -1);
  ThreadIndex stream = trace.threads.Append(p, 7, s(""), true, 0);
  const TimeNs t0 = 1700000000000000000;
  EventRow step =
      trace.events.Append(Layer::kStep, EventPhase::kComplete, s("decode"), p, host, t0, 1100000);
  EventRow fe = trace.events.Append(Layer::kFe, EventPhase::kComplete,
                                    s("<script>alert(1)</script>"), p, host, t0 + 1000, 50000);
  EventRow rt = trace.events.Append(Layer::kRt, EventPhase::kComplete, s("cudaLaunchKernel"), p,
                                    host, t0 + 2000, 5000, EventId::Invalid(), CorrelationId(7));
  EventRow k = trace.events.Append(Layer::kK, EventPhase::kComplete, s("gemm_fp16"), p, stream,
                                   t0 + 10000, 900000, EventId::Invalid(), CorrelationId(7));
  for (EventRow row : {step, fe, rt, k}) {
    trace.nodes.event.push_back(row);
    trace.nodes.step.push_back(StepIndex(0));
  }
  trace.nodes.parent = {NodeIndex::Invalid(), NodeIndex(0), NodeIndex(1), NodeIndex(2)};
  trace.nodes.depth = {0, 1, 2, 3};
  trace.requests.id = {s("r1"), s("r2")};
  trace.requests.first_ns = {t0, t0};
  trace.requests.last_ns = {t0 + 1100000, t0 + 1100000};
  trace.requests.step_count = {1, 1};
  trace.step_requests = {RequestIndex(0), RequestIndex(1)};
  trace.steps.event.push_back(step);
  trace.steps.process.push_back(p);
  trace.steps.thread.push_back(host);
  trace.steps.rank.push_back(0);
  trace.steps.number.push_back(3);
  trace.steps.name.push_back(s("decode"));
  trace.steps.phase.push_back(StepPhase::kDecode);
  trace.steps.source.push_back(StepSource::kEngineStep);
  trace.steps.start_ns.push_back(t0);
  trace.steps.end_ns.push_back(t0 + 1100000);
  trace.steps.node_begin.push_back(NodeIndex(0));
  trace.steps.node_end.push_back(NodeIndex(4));
  trace.steps.requests_begin.push_back(0);
  trace.steps.requests_count.push_back(2);
  trace.steps.global_step.push_back(3);
  trace.reconstructed = true;
  return trace;
}

}  // namespace teller::report
