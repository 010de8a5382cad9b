// Counterfactual replay of engine steps (docs/diagnose.md, "Impact"). A global step's
// work on every rank is a graph: host events in order on their threads, kernels in
// order on their streams and after their launch calls, waits for the device
// (synchronizations, synchronous copies), and collectives (kernels, or a CPU job's
// blocking host calls) that end when their last member arrives. Replaying it with some
// work shortened gives the step time that work cost: the impact of a cause is the time
// saved when the cells it moved are put back to their baseline; work off the critical
// path saves nothing, and a late rank's peers stop waiting.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "cause/deviation_map.h"
#include "cause/hypotheses.h"
#include "cause/replay_graph.h"
#include "localize/step_features.h"
#include "model/trace.h"

namespace teller::cause {

struct ReplayedGroup {
  // Earliest start of the group's steps to the latest end of their work.
  double measured_ns = 0.0;
  double replayed_ns = 0.0;
};

class StepReplay {
 public:
  // Groups are MapStep::group: the global step, else the rank's step number.
  // The replay's gaps and cuts are options' replay_* values (base/tuning_list.h).
  StepReplay(const model::Trace& trace, const localize::StepFeatures& features,
             const CauseOptions& options = {});
  // From a graph that holds the groups to replay (replay_graph.h: every part's appended),
  // no trace: the same replays as the trace's.
  explicit StepReplay(const ReplayGraph& graph, const CauseOptions& options = {});
  const CauseOptions& options() const { return options_; }

  // A node's start or end; ends before starts at one instant, the deeper end first.
  struct Point {
    int64_t t;
    uint8_t is_start;
    uint16_t neg_depth;
    uint32_t node;  // in the group's graph, whose order is the run's
    bool operator<(const Point& o) const;
  };
  // A group's work in replay order (its nodes' starts and ends, sorted), prepared once
  // for any number of replays.
  struct PreparedGroup {
    ReplayGraph graph;   // the group's steps and nodes (CutGroup)
    int64_t origin = 0;  // the group's start: replayed times are relative to it
    std::vector<Point> points;
  };
  // The group's graph: cut from the trace, or from the graph given.
  ReplayGraph GroupGraph(int64_t group) const;
  static PreparedGroup Prepare(ReplayGraph group_graph);
  PreparedGroup Prepare(int64_t group) const { return Prepare(GroupGraph(group)); }

  // Replays one group with the work of each node shortened by cut(node) (a node of the
  // group's graph), a share in [0, 1) of its own time (host ranges: each stretch of it
  // where it lies, so a range's own time before its first child moves the children
  // earlier), its transfer (collectives matched across ranks: a host call among them, a
  // CPU job's blocking all_reduce, as a kernel) or its duration (everything else); and each
  // step's longest stall (LongestStall) shortened by stall_cut(step) (a step of the group's
  // graph), a share of it, on its host threads. An unknown group replays as empty.
  using Cut = std::function<double(uint32_t)>;
  ReplayedGroup Replay(const PreparedGroup& group, const Cut& cut,
                       const Cut& stall_cut = nullptr) const;
  // The same with cut(node) of the run's node and stall_cut(step) of the run's step.
  ReplayedGroup Replay(int64_t group, const Cut& cut, const Cut& stall_cut = nullptr) const;

  // Each of the group's collectives matched across ranks: its members and the rank that
  // reached it last.
  struct Arrival {
    std::vector<int32_t> ranks;  // its members
    int32_t last_rank = -1;
  };
  static std::vector<Arrival> LastArrivals(const ReplayGraph& group_graph);
  std::vector<Arrival> LastArrivals(int64_t group) const {
    return LastArrivals(GroupGraph(group));
  }

 private:
  struct State;
  const model::Trace* trace_ = nullptr;  // or
  const ReplayGraph* graph_ = nullptr;
  std::vector<NodeCell> node_cells_;     // of the trace
  std::vector<int32_t> match_of_event_;  // of the trace: CollectiveMatchOfEvents
  CauseOptions options_;
};

// The hypothesis' impact replayed over its window: the step time its culprit cells cost
// (Hypothesis::impact_ns) and the share of its window's matched collectives that its
// rank reached last (Hypothesis::late_share). Causes that add time keep their own cost.
// The window's groups replay on up to options.threads threads (0: one per core); the same
// result for any count. Sets cost_negligible and reached_collectives_last by the options.
void ReplayImpact(const StepReplay& replay, const DeviationMap& map, Hypothesis* hypothesis,
                  const CauseOptions& options = {});
// ReplayImpact for the ranked hypotheses worth showing (the first `count`) and the second;
// each group is prepared once for all of them.
void ReplayImpacts(const model::Trace& trace, const localize::StepFeatures& features,
                   const DeviationMap& map, size_t count, CauseAnalysis* analysis,
                   const CauseOptions& options = {});
// The same on a graph that holds every group of their windows (ReplayGroupsOf), no trace.
void ReplayImpacts(const ReplayGraph& graph, const DeviationMap& map, size_t count,
                   CauseAnalysis* analysis, const CauseOptions& options = {});

// The groups ReplayImpacts replays or reads the arrivals of for the first `count` ranked
// hypotheses and the second, ascending: what a graph must hold.
std::vector<int64_t> ReplayGroupsOf(const CauseAnalysis& analysis, size_t count);

}  // namespace teller::cause
