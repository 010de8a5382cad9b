// The root-cause model's forward pass in plain C++, for inference: the network of
// learn/root_cause_model.cc (trace encoder with GCN layers, log encoder, joint
// mixture-of-transformers layer, heads) computed one record at a time from the
// exported weights, so `teller diagnose` never loads libtorch. A record alone gives
// what it gives in a padded batch (padding is masked everywhere), and the outputs
// match torch's within float rounding (learn_test: ForwardMatchesTorch).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/status.h"
#include "learn/model_config.h"
#include "learn/model_inputs.h"
#include "learn/weights_file.h"

namespace teller::learn {

class ModelForward {
 public:
  // Checks that every tensor the configuration needs is there with its shape.
  static base::StatusOr<ModelForward> Create(const ModelConfig& config, NamedTensors weights);
  ModelForward();
  ~ModelForward();
  ModelForward(ModelForward&&) noexcept;
  ModelForward& operator=(ModelForward&&) noexcept;

  const ModelConfig& config() const;
  const NamedTensors& weights() const;
  int64_t parameter_count() const;  // learned values (not the normalization buffers)

  Prediction Predict(const ModelInput& input) const;
  // The decoder's greedy word ids for one record (learn/explanation_text.h), as
  // RootCauseModel::Explain; empty without a decoder.
  std::vector<int32_t> Explain(const ModelInput& input) const;
  // Records are independent: up to `threads` score at once (same results).
  std::vector<Prediction> Predict(const std::vector<ModelInput>& inputs, int threads = 2) const;

 private:
  struct Network;
  ModelConfig config_;
  NamedTensors weights_;
  std::unique_ptr<Network> network_;
};

}  // namespace teller::learn
