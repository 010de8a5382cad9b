// What a channel should measure in a step, fitted over the run's comparable steps: for
// host work a fixed cost plus a cost per sequence in the batch, for collectives and waits
// for the device a latency plus a cost per token; else a power law in the
// step's batch size, or, for device work and the step's time when the
// trace says how many tokens each step ran, a linear model in the tokens, their square
// (a prefill's attention), the KV context the step's requests carry (a decode's
// attention) and the number of requests (sampling, the LM head). Both are fitted twice, the second
// time without the values beyond 3 sigma of the first, so a fault's window does not widen its own
// baseline.
#pragma once

#include <array>
#include <vector>

#include "model/trace.h"

namespace teller::cause {

// The shape of a step a baseline reads.
struct StepShape {
  double size = 0.0;      // scheduled tokens, else requests, else 0 (unknown)
  double context = 0.0;   // tokens its requests have been served so far, 0 unknown
  double requests = 0.0;  // sequences in the batch (sampling and the LM head scale with it)
  // The largest size among the ranks' steps of its global step, its size when it has none:
  // data-parallel replicas of an MoE model pad their batches to the largest replica's
  // (vLLM's num_tokens_across_dp), so their device work follows it, not their own.
  double padded_size = 0.0;
  // The spread (one sigma, tokens) of `context` where it rests on prompts shared evenly
  // among requests admitted together: a trace gives a step's tokens, not each request's,
  // and a batch that keeps some of them holds longer or shorter prompts than their share.
  double context_spread = 0.0;
};

// The shape with its size the padded one.
inline StepShape Padded(StepShape shape) {
  shape.size = shape.padded_size;
  return shape;
}

// The shape of every step of the trace (by StepIndex). A request's context is the sum,
// over its earlier steps on the rank, of that step's tokens shared by its requests.
std::vector<StepShape> StepShapes(const model::Trace& trace);

// How a channel follows the step's shape.
enum class ShapeModel : uint8_t {
  kPowerLawInSize,    // device work when the trace does not say how many tokens ran
  kLinearInTokens,    // attention and the step's time (the linear model; else power law)
  kTokenWork,         // GEMMs, norms, activations: the linear model in tokens and sequences
                      // only, no coefficient below zero (else power law)
  kSaturating,        // expert kernels: the linear model or the power law, the better fit
  kAffineInRequests,  // host work: a fixed cost per step plus a cost per sequence
  kAffineInSize,      // collectives and device waits: a latency plus what follows the tokens
};

class ChannelBaseline {
 public:
  ChannelBaseline() = default;
  // floor: the smallest sigma.
  ChannelBaseline(const std::vector<StepShape>& shapes, const std::vector<double>& values,
                  double floor, ShapeModel model);
  double Expected(const StepShape& shape) const;
  double sigma() const { return sigma_; }
  // How much Expected grows per token of context (0 unless the linear model was fitted):
  // what the context's spread adds to the sigma of a step.
  double ContextSlope() const;

 private:
  bool FitLinear(const std::vector<StepShape>& shapes, const std::vector<double>& values);
  void FitPowerLaw(const std::vector<StepShape>& shapes, const std::vector<double>& values);
  void FitAffine(const std::vector<StepShape>& shapes, const std::vector<double>& values);
  double AffineX(const StepShape& shape) const;
  void FitSigma(const std::vector<StepShape>& shapes, const std::vector<double>& values,
                double floor);
  void ChooseSaturating(const std::vector<StepShape>& shapes, const std::vector<double>& values,
                        double floor);
  bool FitExperts(const std::vector<StepShape>& shapes, const std::vector<double>& values);

  ShapeModel model_ = ShapeModel::kPowerLawInSize;
  bool linear_ = false;
  bool experts_ = false;
  double expert_p_ = 0.0;
  std::array<double, 3> expert_coefficients_{};  // 1, the experts' share, size
  bool affine_ = false;
  double intercept_ = 0.0;
  double per_unit_ = 0.0;
  // 1, size, size^2 / 1000, context, requests
  double coefficients_[5] = {0.0, 0.0, 0.0, 0.0, 0.0};
  double median_ = 0.0;
  double median_size_ = 0.0;
  double slope_ = 0.0;
  double sigma_ = 0.0;
};

}  // namespace teller::cause
