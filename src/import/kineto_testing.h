// Test-only: small Kineto traces in the shape of a vLLM engine profile.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "fmt/format.h"

namespace teller::import::testing {

struct EngineTraceShape {
  int steps = 40;
  int kernels_per_step = 3;
  // Idle time after each step's last kernel; 0 makes each step start while the last
  // kernel of the one before still runs (no quiet point anywhere).
  int64_t gap_us = 400;
  // A python_function frame around all steps (it must not keep windows from closing).
  bool root_python_frame = true;
};

struct EngineTrace {
  std::string json;
  // [start, end) in ns of each step, its kernels included, relative to ts 0.
  std::vector<std::pair<int64_t, int64_t>> step_spans_ns;
};

// Steps are vLLM execute_context/generation annotations (no step numbers) with one
// aten::mm per kernel launching it through cudaLaunchKernel; kernels run on stream 7
// of GPU 0. Process and thread names come as metadata events, the rank from
// distributedInfo after traceEvents, and ts is relative to baseTimeNanoseconds.
inline EngineTrace MakeEngineTrace(const EngineTraceShape& shape) {
  EngineTrace trace;
  std::vector<std::string> events;
  events.push_back(R"({"ph": "M", "name": "process_name", "pid": 4242, "tid": 0, )"
                   R"("args": {"name": "vllm-engine"}})");
  events.push_back(R"({"ph": "M", "name": "thread_name", "pid": 4242, "tid": 4243, )"
                   R"("args": {"name": "engine-core"}})");
  int64_t t = 1000;  // us
  int64_t correlation = 1;
  int64_t first = t;
  for (int s = 0; s < shape.steps; ++s) {
    int64_t step_start = t;
    int64_t host = step_start + 5;
    int64_t kernel_end = host;
    std::vector<std::string> step_events;
    for (int k = 0; k < shape.kernels_per_step; ++k) {
      int64_t op_start = host;
      int64_t launch = op_start + 3;
      step_events.push_back(fmt::format(
          R"({{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 4242, "tid": 4243, )"
          R"("ts": {}.000, "dur": 12.000, "args": {{"External id": {}}}}})",
          op_start, correlation));
      step_events.push_back(fmt::format(
          R"({{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 4242, )"
          R"("tid": 4243, "ts": {}.000, "dur": 6.000, "args": {{"correlation": {}}}}})",
          launch, correlation));
      int64_t kernel_start = std::max(kernel_end, launch + 8);
      int64_t kernel_dur = 40 + 7 * k;
      step_events.push_back(fmt::format(
          R"({{"ph": "X", "cat": "kernel", "name": "sm90_gemm_{}", "pid": 0, "tid": 7, )"
          R"("ts": {}.000, "dur": {}.000, "args": {{"device": 0, "stream": 7, )"
          R"("correlation": {}}}}})",
          k, kernel_start, kernel_dur, correlation));
      kernel_end = kernel_start + kernel_dur;
      host = op_start + 14;
      ++correlation;
    }
    // The step range waits for its kernels (vLLM syncs on the sampled tokens).
    int64_t step_end = std::max(host, kernel_end) + 2;
    events.push_back(fmt::format(R"({{"ph": "X", "cat": "user_annotation", )"
                                 R"js("name": "execute_context_0(0)_generation_4(4)", )js"
                                 R"("pid": 4242, "tid": 4243, "ts": {}.000, "dur": {}.000}})",
                                 step_start, step_end - step_start));
    for (std::string& event : step_events) events.push_back(std::move(event));
    trace.step_spans_ns.emplace_back(step_start * 1000, std::max(step_end, kernel_end) * 1000);
    t = shape.gap_us > 0 ? step_end + shape.gap_us : kernel_end - 10;
  }
  if (shape.root_python_frame) {
    events.push_back(fmt::format(R"({{"ph": "X", "cat": "python_function", )"
                                 R"("name": "vllm/engine/core.py(210): run_busy_loop", )"
                                 R"("pid": 4242, "tid": 4243, "ts": {}.000, "dur": {}.000}})",
                                 first - 10, t - first + 20));
  }
  trace.json = "{\n  \"schemaVersion\": 1,\n  \"traceEvents\": [\n";
  for (size_t i = 0; i < events.size(); ++i) {
    trace.json += "    " + events[i] + (i + 1 < events.size() ? ",\n" : "\n");
  }
  trace.json +=
      "  ],\n  \"distributedInfo\": {\"backend\": \"nccl\", \"rank\": 3, \"world_size\": 8},\n"
      "  \"baseTimeNanoseconds\": 1700000000000000000\n}\n";
  return trace;
}

}  // namespace teller::import::testing
