// The multimodal root-cause model (paper 3.6-3.7) in libtorch, for training: it
// is built into the trainer plugin only (learn/trainer_plugin.h); diagnosis runs the
// same network from its exported weights without torch (learn/model_forward.h).
// Trace encoder h_i = E_tok(w_i) + E_depth(d_i) + MLP(time features) with GCN
// layers over the parent/child adjacency; log encoder over template ids; a
// mixture-of-transformers joint layer over [H_log; H_tr] (shared attention,
// modality-specific norms and feed-forward); heads for step anomaly, fault type
// and per-token operator localization.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/progress.h"
#include "base/status.h"
#include "diagnose/diagnosis.h"
#include "learn/model_config.h"
#include "learn/model_inputs.h"
#include "learn/weights_file.h"

namespace teller::learn {

class RootCauseModel {
 public:
  static base::StatusOr<RootCauseModel> Create(const ModelConfig& config);
  RootCauseModel();
  ~RootCauseModel();
  RootCauseModel(RootCauseModel&&) noexcept;
  RootCauseModel& operator=(RootCauseModel&&) noexcept;

  const ModelConfig& config() const;
  int64_t parameter_count() const;

  // Trains on train, keeps the weights of the best validation epoch (step F1 +
  // type macro F1 + token F1), stops after `patience` epochs without a better one.
  base::Status Train(const std::vector<ModelInput>& train, const std::vector<ModelInput>& val,
                     const TrainConfig& config,
                     const std::function<void(const EpochReport&)>& on_epoch);
  std::vector<Prediction> Predict(const std::vector<ModelInput>& inputs) const;
  // Greedy explanation word ids per input (learn/explanation_text.h); empty lists
  // without a decoder.
  std::vector<std::vector<int32_t>> Explain(const std::vector<ModelInput>& inputs) const;
  // Mean loss over inputs (the weighted terms).
  double Loss(const std::vector<ModelInput>& inputs) const;

  // Every parameter and float buffer under its module path (learn/weights_file.h).
  NamedTensors ExportWeights() const;
  // The reverse: every tensor of the network must be present with its shape.
  base::Status ImportWeights(const NamedTensors& tensors);
  // A torch archive (model folders before weights.bin; tools/convert_model_weights).
  base::Status LoadTorchArchive(const std::string& path);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace teller::learn
