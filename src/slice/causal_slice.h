// Dependency-aware causal-context slice (paper 3.4): around the suspicious
// instances I_s of one step, the nodes whose relevance
//   R_s(v) = alpha*1[v in I_s] + beta*1[v parent/child of some u in I_s]
//          + gamma*max_u exp(-Delta_t(u, v) / tau0) + eta*1[v comm-coupled to I_s]
// reaches kappa, plus the ancestors of I_s up to h levels up.
// Edges and defaults: docs/slice.md.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "model/trace.h"

namespace teller::slice {

struct SliceOptions {
  // Reasons for each default, with measurements: docs/slice.md.
  // A suspect passes any kappa <= 1 (suspects are kept regardless).
  double alpha = 1.0;
  // Parent/child (E_p) and comm coupling (E_c) each reach kappa alone: the launch of a
  // slow kernel, the collective a slow kernel feeds, are always context.
  double beta = 0.6;
  // Above kappa, so a same-lane neighbour passes on time alone when its gap is at most
  // tau0 * ln(gamma / kappa) (~35 us). At 0.5 (= kappa) only a gap of exactly 0 passed.
  double gamma = 1.0;
  double eta = 0.6;
  // Below beta and eta, above the gamma term beyond tau0 * ln 2.
  double kappa = 0.5;
  // Temporal decay: Delta_t is the gap between two intervals (0 when they overlap).
  // 50 us keeps the kernel or two on each side on a stream and the few runtime calls
  // around a host suspect; 200 us kept 1.3-1.7x more nodes per suspect.
  int64_t tau0_ns = 50'000;
  // E_t: succession edges only between nodes at most this far apart; beyond it the
  // temporal term is 0 (exp(-40) at tau0 = 50 us anyway).
  int64_t temporal_window_ns = 2'000'000;
  // Anc_h: ancestors of each suspicious instance kept up to this many levels; 3 reaches
  // from a kernel through its launch and backend op to the framework module.
  int ancestor_depth = 3;
  // Horizontal view: follow E_c to the matching collective instances on peer ranks
  // (their own steps) and keep them as peer nodes. Off: peers belong to other steps.
  bool horizontal = false;
  // Upper bound on slice nodes; the lowest-relevance nodes go first (0: none, the
  // budget belongs to the consumer). Suspects are never dropped, so a slice has at
  // most max(max_nodes, |I_s|) nodes.
  size_t max_nodes = 0;
  // E_c: a collective is coupled to at most this many compute nodes (device kernels and
  // copies) that start before it and after the previous collective of the step. A TP
  // region (between two all-reduces) holds 3-10 kernels; the cap stops one collective
  // at the end of a step (PP send, DP all-reduce) from coupling to the whole step.
  int comm_region_nodes = 16;
};

// Why a node is in the slice (bit set).
enum SliceReason : uint8_t {
  kReasonSuspect = 1,     // in I_s
  kReasonStructural = 2,  // parent or child of a suspect
  kReasonTemporal = 4,    // temporal term alone or with others reached kappa
  kReasonComm = 8,        // communication-coupled to a suspect
  kReasonAncestor = 16,   // in Anc_h(I_s)
};

// Edges of the slice among its own nodes (indices into StepSlice::nodes).
struct SliceEdges {
  std::vector<std::pair<int32_t, int32_t>> parent_child;  // E_p (parent, child)
  std::vector<std::pair<int32_t, int32_t>> temporal;      // E_t (earlier, later)
  std::vector<std::pair<int32_t, int32_t>> comm;          // E_c (compute, communication)
};

struct StepSlice {
  model::StepIndex step;
  // Kept nodes of the step, ascending (pre-order), with their relevance and reasons.
  std::vector<model::NodeIndex> nodes;
  std::vector<float> relevance;
  std::vector<uint8_t> reasons;
  SliceEdges edges;
  // Horizontal view: matching collective nodes on other ranks (other steps).
  std::vector<model::NodeIndex> peer_nodes;
  // Size against the whole step (or the scope passed in, plus suspects outside it).
  int64_t step_nodes = 0;
  int64_t step_dur_ns = 0;
  double KeptShare() const { return step_nodes ? double(nodes.size()) / step_nodes : 0.0; }
};

// `scope`: the nodes eligible (the request projection V_q(s)); empty means the
// whole step. `suspects`: I_s, nodes of the step. Errors on nodes outside the step.
// Suspects outside a non-empty scope are still kept (they are eligible by definition).
base::StatusOr<StepSlice> SliceStep(const model::Trace& trace, model::StepIndex step,
                                    const std::vector<model::NodeIndex>& suspects,
                                    const std::vector<model::NodeIndex>& scope,
                                    const SliceOptions& options = {});

// The same, for many steps of one trace: keeps its scratch buffers, the collective-name
// cache and (with `horizontal`) the event -> node and collective-match indexes, which
// cost O(events) to build, across calls. Not thread-safe; the trace must outlive it.
class Slicer {
 public:
  explicit Slicer(const model::Trace& trace);
  ~Slicer();
  Slicer(const Slicer&) = delete;
  Slicer& operator=(const Slicer&) = delete;

  base::StatusOr<StepSlice> SliceStep(model::StepIndex step,
                                      const std::vector<model::NodeIndex>& suspects,
                                      const std::vector<model::NodeIndex>& scope,
                                      const SliceOptions& options = {});

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The slice's nodes plus every ancestor inside the step that is missing, ascending:
// a parent-closed set, as tpe::StepSerializer::SerializeNodes needs.
std::vector<model::NodeIndex> ParentClosure(const model::Trace& trace, const StepSlice& slice);

// Slice size against the step it came from.
struct SliceSize {
  int64_t suspects = 0;
  int64_t slice_nodes = 0;
  int64_t step_nodes = 0;  // eligible nodes (the step, or the scope)
  // Max end - min start over the slice's nodes, except those kept only as ancestors
  // (an FE range spans most of the step and says nothing about where the slice is).
  int64_t slice_span_ns = 0;
  int64_t step_dur_ns = 0;
  int64_t peer_nodes = 0;
  double NodeShare() const { return step_nodes ? double(slice_nodes) / step_nodes : 0.0; }
  double SpanShare() const { return step_dur_ns ? double(slice_span_ns) / step_dur_ns : 0.0; }
};
SliceSize MeasureSlice(const model::Trace& trace, const StepSlice& slice);
// "12/386 nodes (3.1%), span 0.41/17.75 ms (2.3%), 3 suspects, 2 peers".
std::string FormatSliceSize(const SliceSize& size);

}  // namespace teller::slice
