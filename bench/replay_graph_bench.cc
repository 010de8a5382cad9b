// The replay graph's wire format (cause/replay_graph_wire.h) on a trace: the graph of the
// groups the impact replay of the shown causes reads (cause::ReplayGroupsOf, as the fifth
// phase of `diagnose --distributed` asks), its bytes per node and per rank-step, and the
// time to encode and decode it per node (best of a few rounds).
// Usage: replay_graph_bench TRACE... (what `teller diagnose` opens). Prints one JSON line.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_util.h"
#include "cause/hypotheses.h"
#include "cause/replay_graph_wire.h"
#include "cause/step_replay.h"
#include "localize/step_features.h"
#include "store/open_trace.h"

using namespace teller;

namespace {

int Fail(const std::string& what) {
  std::fprintf(stderr, "replay_graph_bench: %s\n", what.c_str());
  return 1;
}

// The best of `rounds` timings of `work`, in seconds.
template <typename Work>
double BestOf(int rounds, Work work) {
  double best = 1e30;
  for (int i = 0; i < rounds; ++i) {
    const double start = bench::NowSeconds();
    work();
    best = std::min(best, bench::NowSeconds() - start);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: replay_graph_bench TRACE...\n");
    return 2;
  }
  auto trace = store::OpenTrace(std::vector<std::string>(argv + 1, argv + argc), {});
  if (!trace.ok()) return Fail(trace.status().ToString());
  const localize::StepFeatures features = localize::ComputeStepFeatures(*trace);
  const cause::CauseOptions options;
  const cause::DeviationMap map = cause::BuildDeviationMap(*trace, features, {});
  const cause::CauseAnalysis analysis = cause::AnalyzeCauses(map, options);
  const std::vector<int64_t> groups = cause::ReplayGroupsOf(analysis, options.max_alternatives + 1);
  const cause::ReplayGraph graph =
      cause::CutReplayGraph(*trace, cause::NodeCells(*trace, features),
                            cause::CollectiveMatchOfEvents(*trace), groups);
  const std::string bytes = cause::EncodeReplayGraph(graph);
  auto back = cause::DecodeReplayGraph(bytes);
  if (!back.ok()) return Fail(back.status().ToString());
  const std::string difference = cause::ReplayGraphDifference(*back, graph);
  if (!difference.empty()) return Fail("the round trip differs: " + difference);
  const double encode_s = BestOf(5, [&] { (void)cause::EncodeReplayGraph(graph); });
  const double decode_s = BestOf(5, [&] { (void)cause::DecodeReplayGraph(bytes); });
  const auto nodes = static_cast<double>(std::max<size_t>(graph.nodes.size(), 1));
  const auto steps = static_cast<double>(std::max<size_t>(graph.steps.size(), 1));
  std::printf(
      "{\"groups\": %zu, \"run_rank_steps\": %zu, \"rank_steps\": %zu, \"nodes\": %zu, "
      "\"nodes_per_rank_step\": %.1f, \"bytes\": %zu, \"bytes_per_node\": %.2f, "
      "\"bytes_per_rank_step\": %.0f, \"encode_ns_per_node\": %.1f, "
      "\"decode_ns_per_node\": %.1f}\n",
      groups.size(), trace->steps.size(), graph.steps.size(), graph.nodes.size(),
      static_cast<double>(graph.nodes.size()) / steps, bytes.size(),
      static_cast<double>(bytes.size()) / nodes, static_cast<double>(bytes.size()) / steps,
      encode_s * 1e9 / nodes, decode_s * 1e9 / nodes);
  return 0;
}
