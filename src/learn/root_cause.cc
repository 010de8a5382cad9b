#include "learn/root_cause.h"

#include "learn/model_folder.h"
#include "learn/trainer_plugin.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <stdexcept>
#include <type_traits>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "base/file_util.h"
#include "base/sha256.h"

namespace teller::learn {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

// The threshold in 0.05 .. 0.95 with the best F1 of scores against labels; 0.5
// when there is no positive label.
float BestThreshold(const std::vector<std::pair<float, bool>>& scored) {
  float best = 0.5f;
  double best_f1 = -1;
  for (int t = 1; t < 20; ++t) {
    const float threshold = 0.05f * static_cast<float>(t);
    int64_t tp = 0, fp = 0, fn = 0;
    for (const auto& [score, label] : scored) {
      const bool said = score >= threshold;
      tp += said && label;
      fp += said && !label;
      fn += !said && label;
    }
    if (tp + fn == 0) return 0.5f;
    const double f1 = 2.0 * tp / std::max<double>(1.0, 2.0 * tp + fp + fn);
    if (f1 > best_f1 + 1e-12) {
      best_f1 = f1;
      best = threshold;
    }
  }
  return best;
}

}  // namespace

base::StatusOr<TrainedModel> TrainRootCauseModel(
    const step_records::RecordSet& train, const step_records::RecordSet& val,
    const TrainOptions& options, const std::function<void(const EpochReport&)>& on_epoch) {
  if (train.records.empty())
    return base::InvalidArgument("train: the training split has no step records");
  TrainedModel trained;
  trained.options = options;
  std::vector<tpe::Serialization> corpus;
  corpus.reserve(train.records.size());
  for (const step_records::StepRecord& record : train.records)
    corpus.push_back(record.serialization);
  tpe::TpeTrainConfig tpe_config;
  tpe_config.vocab_size = options.tpe_vocab_size;
  tpe_config.corpus = options.corpus.empty() ? "teller train" : options.corpus;
  TELLER_ASSIGN_OR_RETURN(trained.vocab,
                          tpe::TpeVocabulary::Train(corpus, train.symbols, tpe_config));
  corpus.clear();
  corpus.shrink_to_fit();
  for (size_t t = 0; t < train.templates.size(); ++t) {
    trained.templates.Intern(train.templates.Get(static_cast<int32_t>(t)));
  }
  trained.options.model.vocab_size = static_cast<int64_t>(trained.vocab.size());
  trained.options.model.template_count = static_cast<int64_t>(trained.templates.size());
  trained.options.model.init_seed = options.train.seed;
  trained.options.model.summary_features = SummaryWidth(options.input);
  if (options.explain) {
    trained.explanations = ExplanationVocabularyOf(train);
    trained.options.model.explain_vocab = trained.explanations.size() > kExplainUnknown + 1
                                              ? static_cast<int64_t>(trained.explanations.size())
                                              : 0;
    trained.options.model.explain_by_type = trained.options.model.explain_vocab > 0;
  }
  TELLER_ASSIGN_OR_RETURN(const TrainerPlugin* trainer, LoadTrainerPlugin());
  TELLER_ASSIGN_OR_RETURN(std::vector<ModelInput> train_inputs, InputsFor(trained, train));
  TELLER_ASSIGN_OR_RETURN(std::vector<ModelInput> val_inputs, InputsFor(trained, val));
  if (trained.options.model.explain_vocab > 0) {
    SetExplanations(trained.explanations, train, &train_inputs);
    SetExplanations(trained.explanations, val, &val_inputs);
  }
  trained.train_records = static_cast<int64_t>(train_inputs.size());
  trained.val_records = static_cast<int64_t>(val_inputs.size());
  TELLER_ASSIGN_OR_RETURN(NetworkFit fit, trainer->fit(trained.options.model, train_inputs,
                                                       val_inputs, options.train, on_epoch));
  trained.history = std::move(fit.history);
  TELLER_ASSIGN_OR_RETURN(trained.model,
                          ModelForward::Create(trained.options.model, std::move(fit.weights)));
  if (!val_inputs.empty()) {
    const std::vector<Prediction> predictions = trained.model.Predict(val_inputs);
    std::vector<std::pair<float, bool>> steps, tokens;
    for (size_t r = 0; r < val_inputs.size(); ++r) {
      steps.emplace_back(predictions[r].step_probability, val_inputs[r].step_label > 0.5f);
      for (size_t j = 0; j < val_inputs[r].size(); ++j) {
        tokens.emplace_back(predictions[r].token_probability[j],
                            val_inputs[r].token_label[j] > 0.5f);
      }
    }
    trained.step_threshold = BestThreshold(steps);
    trained.token_threshold = BestThreshold(tokens);
  }
  return trained;
}

base::StatusOr<std::vector<ModelInput>> InputsFor(const TrainedModel& trained,
                                                  const step_records::RecordSet& set) {
  return MakeInputs(set, trained.vocab, trained.templates, trained.options.input);
}

ExplanationVocabulary ExplanationVocabularyOf(const step_records::RecordSet& train) {
  std::vector<std::vector<std::string>> sentences;
  for (const step_records::StepRecord& record : train.records) {
    if (record.is_anomaly && !record.explanation.empty())
      sentences.push_back(DelexicalizeExplanation(record.explanation));
  }
  return ExplanationVocabulary::Build(sentences);
}

void SetExplanations(const ExplanationVocabulary& vocab, const step_records::RecordSet& set,
                     std::vector<ModelInput>* inputs) {
  for (size_t r = 0; r < inputs->size() && r < set.records.size(); ++r) {
    const step_records::StepRecord& record = set.records[r];
    if (!record.is_anomaly || record.explanation.empty()) continue;
    (*inputs)[r].explanation = vocab.Encode(DelexicalizeExplanation(record.explanation));
  }
}

base::StatusOr<std::vector<RecordPrediction>> PredictRecords(const TrainedModel& trained,
                                                             const step_records::RecordSet& set,
                                                             ScoredRecords* scored) {
  const float token_threshold = trained.token_threshold;
  TELLER_ASSIGN_OR_RETURN(std::vector<ModelInput> inputs, InputsFor(trained, set));
  std::vector<Prediction> predictions = trained.model.Predict(inputs);
  std::vector<RecordPrediction> out(inputs.size());
  for (size_t r = 0; r < inputs.size(); ++r) {
    out[r].step_probability = predictions[r].step_probability;
    out[r].type_probability = predictions[r].type_probability;
    std::set<std::string> names;
    const step_records::StepRecord& record = set.records[r];
    for (size_t j = 0; j < inputs[r].size(); ++j) {
      if (predictions[r].token_probability[j] < token_threshold) continue;
      for (uint32_t k = inputs[r].node_begin[j]; k < inputs[r].node_end[j]; ++k) {
        names.emplace(set.symbols.Get(record.serialization.symbol[2 * k + 1]));
      }
    }
    out[r].operators.assign(names.begin(), names.end());
  }
  if (scored) {
    scored->inputs = std::move(inputs);
    scored->predictions = std::move(predictions);
  }
  return out;
}

base::Status SaveModel(const TrainedModel& trained, const std::string& folder) {
  std::error_code error;
  fs::create_directories(folder, error);
  if (error)
    return base::IoError("{}: cannot create the model folder: {}", folder, error.message());
  const fs::path dir(folder);
  TELLER_RETURN_IF_ERROR(trained.vocab.Save((dir / "tpe.json").string()));
  Json templates = Json::array();
  for (size_t t = 0; t < trained.templates.size(); ++t) {
    templates.push_back(std::string(trained.templates.Get(static_cast<int32_t>(t))));
  }
  TELLER_RETURN_IF_ERROR(
      base::WriteFileAtomic((dir / "templates.json").string(), templates.dump(1) + "\n"));
  TELLER_RETURN_IF_ERROR(
      WriteWeightsFile(trained.model.weights(), (dir / kWeightsFileName).string()));
  Json doc;
  doc["schema"] = kModelSchema;
  doc["config"] = ConfigToJson(trained.options);
  doc["train_records"] = trained.train_records;
  doc["val_records"] = trained.val_records;
  doc["parameters"] = trained.model.parameter_count();
  doc["step_threshold"] = trained.step_threshold;
  double best_f1 = trained.best_val_step_f1;
  for (const EpochReport& e : trained.history) {
    if (e.best) best_f1 = e.val_step_f1;
  }
  doc["best_val_step_f1"] = best_f1;
  doc["token_threshold"] = trained.token_threshold;
  if (trained.options.model.explain_vocab > 0)
    doc["explanation_words"] = trained.explanations.words();
  Json history = Json::array();
  for (const EpochReport& e : trained.history) {
    history.push_back({{"epoch", e.epoch},
                       {"train_loss", e.train_loss},
                       {"val_loss", e.val_loss},
                       {"val_step_f1", e.val_step_f1},
                       {"val_type_macro_f1", e.val_type_macro_f1},
                       {"val_token_f1", e.val_token_f1},
                       {"seconds", e.seconds},
                       {"best", e.best}});
  }
  doc["history"] = history;
  Json sums;
  for (const char* file : kModelFiles) {
    TELLER_ASSIGN_OR_RETURN(std::string sum, base::Sha256OfFile((dir / file).string()));
    sums[file] = sum;
  }
  doc["sha256"] = sums;
  return base::WriteFileAtomic((dir / "model.json").string(), doc.dump(1) + "\n");
}

base::StatusOr<TrainedModel> LoadModel(const std::string& folder) {
  TELLER_ASSIGN_OR_RETURN(ModelFolder files, ReadModelFolder(folder));
  TrainedModel trained;
  trained.options = std::move(files.options);
  trained.vocab = std::move(files.vocab);
  trained.templates = std::move(files.templates);
  trained.explanations = std::move(files.explanations);
  trained.step_threshold = files.step_threshold;
  trained.token_threshold = files.token_threshold;
  trained.best_val_step_f1 = files.best_val_step_f1;
  trained.train_records = files.train_records;
  trained.val_records = files.val_records;
  TELLER_ASSIGN_OR_RETURN(NamedTensors weights, ReadWeightsFile(files.weights_path));
  base::StatusOr<ModelForward> network =
      ModelForward::Create(trained.options.model, std::move(weights));
  if (!network.ok())
    return base::InvalidArgument("{}: {}", files.weights_path, network.status().message());
  trained.model = std::move(network).value();
  return trained;
}

}  // namespace teller::learn
