// Training and loading the root-cause model with everything it needs at
// diagnosis time: the TPE vocabulary, the log templates, the input settings and
// the weights, saved together in one model folder.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/progress.h"
#include "base/status.h"
#include "learn/explanation_text.h"
#include "learn/model_config.h"
#include "learn/model_forward.h"
#include "learn/model_inputs.h"
#include "step_records/step_records.h"
#include "tpe/tpe_vocabulary.h"

namespace teller::learn {

struct TrainOptions {
  ModelConfig model;  // vocab_size and template_count are set from the data
  InputConfig input;
  TrainConfig train;
  size_t tpe_vocab_size = 512;
  std::string view = "horizontal";  // horizontal: every rank of a request step; vertical: one rank
  std::string corpus;               // free text recorded in the model folder
  bool explain = true;              // train the explanation decoder (NLL term)
};

// A trained model with its vocabularies.
struct TrainedModel {
  TrainOptions options;
  tpe::TpeVocabulary vocab;
  step_records::TemplateVocabulary templates;
  ExplanationVocabulary explanations;  // the decoder's words (marks only: no decoder)
  ModelForward model;                  // the network, run without torch
  std::vector<EpochReport> history;
  // Decision thresholds chosen on the validation part (best F1), 0.5 without one.
  float step_threshold = 0.5f;
  float token_threshold = 0.5f;
  double best_val_step_f1 = -1;  // validation step F1 of the kept epoch (-1 unknown)
  int64_t train_records = 0;
  int64_t val_records = 0;
};

// Learns the TPE vocabulary and the templates on train, then the network (in the
// trainer plugin, learn/trainer_plugin.h: an error when teller was built without
// libtorch).
base::StatusOr<TrainedModel> TrainRootCauseModel(
    const step_records::RecordSet& train, const step_records::RecordSet& val,
    const TrainOptions& options, const std::function<void(const EpochReport&)>& on_epoch);

// Inputs of a record set for a trained model.
base::StatusOr<std::vector<ModelInput>> InputsFor(const TrainedModel& trained,
                                                  const step_records::RecordSet& set);

// Per record: step probability, fault-type probabilities, and the names of the
// nodes covered by tokens the model marks (token probability >= threshold).
struct RecordPrediction {
  float step_probability = 0;
  std::array<float, diagnose::kFaultCategoryCount> type_probability{};
  std::vector<std::string> operators;
};
// Operators use the model's token threshold. `scored`, when given, keeps the inputs
// and the network's raw outputs (the decoder starts from them).
struct ScoredRecords {
  std::vector<ModelInput> inputs;
  std::vector<Prediction> predictions;
};
base::StatusOr<std::vector<RecordPrediction>> PredictRecords(const TrainedModel& trained,
                                                             const step_records::RecordSet& set,
                                                             ScoredRecords* scored = nullptr);

// The explanation vocabulary of the training records' reference explanations
// (learn/explanation_text.h), and their word ids set on the inputs of abnormal
// records (one input per record).
ExplanationVocabulary ExplanationVocabularyOf(const step_records::RecordSet& train);
void SetExplanations(const ExplanationVocabulary& vocab, const step_records::RecordSet& set,
                     std::vector<ModelInput>* inputs);

// Model folder: model.json (configuration, training history, file checksums),
// tpe.json, templates.json, weights.bin (learn/weights_file.h).
base::Status SaveModel(const TrainedModel& trained, const std::string& folder);
// Verifies the files against the checksums in model.json before loading.
base::StatusOr<TrainedModel> LoadModel(const std::string& folder);

}  // namespace teller::learn
