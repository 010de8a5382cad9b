// Timing harness (not a test): builds a synthetic trace of about N events and
// reports reconstruction throughput. Usage: reconstruct_timing [events] [processes]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "reconstruct/call_chain_builder.h"
#include "reconstruct/synthetic_trace.h"

int main(int argc, char** argv) {
  using namespace teller;  // NOLINT
  int64_t target = argc > 1 ? std::atoll(argv[1]) : 5'600'000;
  reconstruct::SyntheticOptions options;
  options.processes = argc > 2 ? std::atoi(argv[2]) : 8;
  options.modules_per_step = 8;
  options.ops_per_module = 4;
  options.graph_every = 4;
  options.graph_kernels = 50;
  // Events per step: 1 step + 3 extra + modules * (1 + ops * 3) + graph kernels.
  int64_t per_step = 4 + options.modules_per_step * (1 + options.ops_per_module * 3) +
                     (options.modules_per_step / options.graph_every) * (options.graph_kernels - 1);
  options.steps_per_process =
      static_cast<int>(std::max<int64_t>(1, target / per_step / options.processes));
  options.shuffle_rows = argc > 3 && std::atoi(argv[3]) != 0;
  auto t0 = std::chrono::steady_clock::now();
  model::Trace trace = reconstruct::MakeSyntheticTrace(options);
  auto t1 = std::chrono::steady_clock::now();
  std::clock_t cpu0 = std::clock();
  base::Status status = reconstruct::BuildCallChains(&trace);
  std::clock_t cpu1 = std::clock();
  auto t2 = std::chrono::steady_clock::now();
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", status.c_message());
    return 1;
  }
  double generate_s = std::chrono::duration<double>(t1 - t0).count();
  double build_s = std::chrono::duration<double>(t2 - t1).count();
  double cpu_s = static_cast<double>(cpu1 - cpu0) / CLOCKS_PER_SEC;
  std::printf(
      "events %zu nodes %zu steps %zu shuffled %d | generate %.2f s | reconstruct wall %.3f s "
      "(%.2f M nodes/s), cpu %.3f s (%.2f M nodes/s)\n",
      trace.events.size(), trace.nodes.size(), trace.steps.size(), options.shuffle_rows ? 1 : 0,
      generate_s, build_s, trace.nodes.size() / build_s / 1e6, cpu_s,
      trace.nodes.size() / cpu_s / 1e6);
  return 0;
}
