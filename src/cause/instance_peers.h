// Short captures: a capture of one or two steps has no baseline of steps, but a model's
// layers call the same kernels with the same launch shape over and over in every step
// (32 decoder layers, 32 attention calls). Those calls are each other's peers: identical
// work on one GPU takes the same time within a few percent. A slowdown that reached some of
// them and not the others (from an onset on, one layer, one phase) stands out against the
// rest; one that reached every call alike cannot be told from a capture this short.
// Collectives are left out: their time includes waiting for the other ranks.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "cause/hypotheses.h"
#include "localize/step_features.h"
#include "model/trace.h"

namespace teller::cause {

// Calls of one kernel (name and launch shape) in one step of a rank that are compared.
inline constexpr int64_t kMinInstancePeers = 8;
// Identical kernels on one GPU jitter by a few percent (the real traces' repeated calls:
// a robust spread of 1-5% of their median); a call counts slow from here.
inline constexpr double kInstanceResolution = 0.05;
inline constexpr double kSlowInstanceZ = 5.0;
// A slowdown the capture's peers decide: its calls added this share of the rank's compute
// kernel time at least (a degradation that matters, not one slow call of a small kernel).
inline constexpr double kMaterialExcessShare = 0.05;
// The peers can tell a capture healthy when the kernels with peers hold this share of the
// rank's compute kernel time at least.
inline constexpr double kPeerCoverageToTell = 0.5;

struct InstancePeerCheck {
  int64_t kernels = 0;         // compute kernel calls of the scored ranks
  int64_t calls_compared = 0;  // in groups of kMinInstancePeers or more
  int64_t calls_slow = 0;
  double compute_ns = 0.0;  // compute kernel time, summed over ranks
  double covered_ns = 0.0;  // of the calls compared
  double excess_ns = 0.0;   // slow calls' time over their peers' median
  // The rank whose slow calls added the largest share of its compute time, that share, and
  // the share of the rank's compute time its compared calls hold.
  int32_t worst_rank = -1;
  double worst_excess_share = 0.0;
  double worst_covered_share = 0.0;
  bool ran() const { return kernels > 0; }
  // Share of the compute kernel time, every rank, in the calls compared.
  double covered_share() const { return compute_ns > 0.0 ? covered_ns / compute_ns : 0.0; }
  // Whether enough of the worst rank's kernel time had peers to call the capture healthy.
  bool can_tell() const { return worst_covered_share >= kPeerCoverageToTell; }
};

// Compares the compute kernel calls of each rank with the rank's other calls of the same
// kernel and launch shape (grid and block where the trace has them), and returns the check
// and, when the slow calls of a rank added kMaterialExcessShare of its compute time or
// more, the cause: the family that holds two thirds of their excess (kFamilySlow with its
// rank) when the other families' calls that ran meanwhile, and could have shown as much,
// mostly did not slow; else the rank's GPU (kGpuSlow). Its
// window is the steps of the slow calls, its effect their time over their peers' normal
// minus 1, its score the median z of the slow calls. A kernel's normal is the lower
// quartile of its calls (a slowdown only adds time: up to three quarters of the calls may
// be slow and the rest still tell the normal), its spread that of the faster half around
// it, floored at kInstanceResolution of the normal and a microsecond. The first step of a
// rank with more (cold caches, lazy initialization) is compared but never slow.
struct InstancePeerResult {
  InstancePeerCheck check;
  std::optional<Hypothesis> cause;
};
InstancePeerResult CompareInstancePeers(const model::Trace& trace,
                                        const localize::StepFeatures& features);

}  // namespace teller::cause
