// Reconstruction at paper scale: builds an imported-shape trace in memory (engine
// steps with request ids, forward/decoder-layer ranges, aten ops, launches, kernels
// bound by correlation, a collective per layer) and times BuildCallChains.
// Usage: reconstruct_bench [TARGET_NODES] (default 5,600,000)
// Prints {"nodes":N,"events":E,"seconds":S,"peak_rss_bytes":B}.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench_util.h"
#include "reconstruct/call_chain_builder.h"

using namespace teller;
using namespace teller::model;

int main(int argc, char** argv) {
  int64_t target = argc > 1 ? std::strtoll(argv[1], nullptr, 10) : 5600000;
  Trace trace;
  auto s = [&](std::string_view text) { return trace.strings.Intern(text); };
  ProcessIndex process = trace.processes.Append(1000, s("node0"), s("python"), 0, s("bench"));
  ThreadIndex host = trace.threads.Append(process, 1000, s("engine"), false, -1);
  ThreadIndex stream = trace.threads.Append(process, 7, s(""), true, 0);
  StringId step_key = s("step"), phase_key = s("phase"), requests_key = s("requests");
  StringId decode = s("decode"), forward = s("Qwen3ForCausalLM.forward"),
           layer_name = s("Qwen3DecoderLayer"), linear = s("aten::linear"),
           launch = s("cudaLaunchKernel"), gemm = s("sm90_xmma_gemm_bf16bf16_bf16f32"),
           attention = s("flash_fwd_splitkv_kernel"), nccl = s("ncclDevKernel_AllReduce_Sum_bf16");
  const int kLayers = 36, kOpsPerLayer = 15;  // ~2,200 events per step
  int64_t t = 1700000000000000000, correlation = 1, step = 0;
  trace.events.Reserve(static_cast<size_t>(target) + 4096);
  while (static_cast<int64_t>(trace.events.size()) < target) {
    int64_t step_start = t;
    EventRow step_row = trace.events.Append(Layer::kStep, EventPhase::kComplete, decode, process,
                                            host, step_start, 0);
    trace.AddIntArg(step_row, step_key, step);
    trace.AddStringArg(step_row, phase_key, decode);
    trace.AddStringArg(
        step_row, requests_key,
        s("req-" + std::to_string(step % 300) + ",req-" + std::to_string((step + 7) % 300)));
    t += 2000;
    EventRow forward_row =
        trace.events.Append(Layer::kFe, EventPhase::kComplete, forward, process, host, t, 0);
    int64_t forward_start = t;
    for (int layer = 0; layer < kLayers; ++layer) {
      int64_t layer_start = t;
      EventRow layer_row =
          trace.events.Append(Layer::kFe, EventPhase::kComplete, layer_name, process, host, t, 0);
      for (int op = 0; op < kOpsPerLayer; ++op) {
        trace.events.Append(Layer::kBe, EventPhase::kComplete, linear, process, host, t + 100,
                            9000);
        trace.events.Append(Layer::kRt, EventPhase::kComplete, launch, process, host, t + 1000,
                            4000, EventId::Invalid(), CorrelationId(correlation));
        bool last = op == kOpsPerLayer - 1;
        trace.events.Append(last ? Layer::kComm : Layer::kK, EventPhase::kComplete,
                            last ? nccl : (op % 3 ? gemm : attention), process, stream, t + 6000,
                            7000, EventId::Invalid(), CorrelationId(correlation));
        ++correlation;
        t += 10000;
      }
      trace.events.dur_ns[layer_row.value()] = t - layer_start;
    }
    trace.events.dur_ns[forward_row.value()] = t - forward_start;
    t += 3000;
    trace.events.dur_ns[step_row.value()] = t - step_start;
    t += 5000;
    ++step;
  }
  double start = bench::NowSeconds();
  base::Status status = reconstruct::BuildCallChains(&trace, {});
  double seconds = bench::NowSeconds() - start;
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", status.ToString().c_str());
    return 1;
  }
  std::printf(
      "{\"nodes\":%zu,\"events\":%zu,\"steps\":%zu,\"seconds\":%.6f,\"peak_rss_bytes\":%ld}\n",
      trace.nodes.size(), trace.events.size(), trace.steps.size(), seconds, bench::PeakRssBytes());
  return 0;
}
