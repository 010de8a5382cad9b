// The root-cause model's configuration, training settings and outputs: what both
// the torch trainer (learn/root_cause_model.h, in the trainer plugin) and the
// torch-free forward pass (learn/model_forward.h) share.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "base/progress.h"
#include "diagnose/diagnosis.h"
#include "learn/model_inputs.h"

namespace teller::learn {

struct ModelConfig {
  int64_t vocab_size = 0;      // TPE tokens
  int64_t template_count = 0;  // log templates (with [PAD], [UNK])
  int32_t dim = 64;
  int32_t gcn_layers = 2;
  int32_t log_layers = 1;
  int32_t joint_layers = 1;
  int32_t heads = 4;
  double dropout = 0.1;
  bool use_trace = true;                              // false: the log-only variant
  bool use_logs = true;                               // false: the trace-only variant
  uint64_t init_seed = 1;                             // initial weights
  int32_t summary_features = 2 * model::kLayerCount;  // learn::SummaryWidth of the inputs
  // A linear path from the normalized summary straight to the step and type logits,
  // added to the deep heads' (wide and deep): the record statistics carry most of the
  // step signal, and a linear read of them transfers across runs.
  bool statistics_head = true;
  // Training only: the chance that a record's pooled trace and log vectors are hidden
  // from the step and type heads, so the heads do not lean on them alone.
  double modality_dropout = 0.3;
  // Piecewise-linear encoding of each summary feature over this many quantile bins
  // of the training records (0: off), so the network can learn thresholds the way a
  // tree ensemble does. The bin edges are saved with the weights.
  int32_t summary_bins = 8;
  // Words of the explanation decoder (learn/explanation_text.h); 0: no decoder (models
  // saved before it). A GRU over the words, started from the pooled record state.
  int64_t explain_vocab = 0;
  // The decoder also starts from the fault type (an embedding added to its context):
  // the labelled type in training, the type head's choice when decoding, so the words
  // follow the model's own category. Off in models saved before it.
  bool explain_by_type = false;
};

struct TrainConfig {
  int32_t epochs = 12;
  int32_t batch_size = 8;
  double learning_rate = 2e-3;
  double weight_decay = 1e-4;
  uint64_t seed = 1;
  int32_t patience = 3;  // epochs without a better validation score before stopping
  int32_t threads = 2;
  double step_weight = 1.0;  // loss weights
  double type_weight = 1.0;
  double token_weight = 1.0;
  double explain_weight = 1.0;  // lambda_r: the explanation's NLL, on abnormal records
  // Share of the normal training records (step label 0) each epoch trains on, drawn
  // afresh every epoch; every abnormal record is kept. The vertical view has about six
  // normal records to each abnormal one and five times the horizontal view's records.
  double normal_share = 1.0;
  base::ProgressSink* progress = nullptr;  // stage "train", batches of the epoch (not saved)
};

struct EpochReport {
  int32_t epoch = 0;
  int32_t epochs = 0;
  double train_loss = 0;
  double val_loss = 0;
  double val_step_f1 = 0;
  // Over the six classes: normal where the step head says so, else the most
  // likely of the five categories (the type head learns on abnormal records only).
  double val_type_macro_f1 = 0;
  double val_token_f1 = 0;
  double seconds = 0;
  bool best = false;  // the weights of this epoch are kept
};

struct Prediction {
  float step_probability = 0;
  std::array<float, diagnose::kFaultCategoryCount> type_probability{};
  std::vector<float> token_probability;  // per input token
};

// The fault category (index of diagnose::FaultCategory) a record's prediction names:
// none unless the step is called abnormal, else the likeliest category other than
// none (the first on a tie). The one rule of the model's validation (abnormal: step
// probability > 0.5) and of `teller paper-tables` (>= the model's fitted step threshold).
inline size_t DecideCategory(
    bool abnormal, const std::array<float, diagnose::kFaultCategoryCount>& type_probability) {
  if (!abnormal) return 0;
  return static_cast<size_t>(
      std::max_element(type_probability.begin() + 1, type_probability.end()) -
      type_probability.begin());
}

}  // namespace teller::learn
