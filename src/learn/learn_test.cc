#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "base/file_util.h"
#include "base/testing.h"
#include "learn/model_diagnosis.h"
#include "learn/model_inputs.h"
#include "learn/root_cause.h"
#include "learn/root_cause_model.h"
#include "sim/simulated_trace_testing.h"
#include "step_records/dataset_testing.h"
#include "store/open_trace.h"

namespace teller::learn {
namespace {

class TinyModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string folder = step_records::BuildSmallDataset("learn_small_dataset");
    train_ =
        new step_records::RecordSet(step_records::LoadParts(folder, "request_disjoint", {"train"}));
    held_out_ = new step_records::RecordSet(
        step_records::LoadParts(folder, "request_disjoint", {"val", "test"}));
  }
  static void TearDownTestSuite() {
    delete train_;
    delete held_out_;
  }
  static TrainOptions Options() {
    TrainOptions options;
    options.model.dim = 32;
    options.model.heads = 2;
    options.model.gcn_layers = 1;
    options.input.max_tokens = 128;
    options.tpe_vocab_size = 256;
    options.train.epochs = 6;
    options.train.patience = 6;
    options.train.batch_size = 8;
    options.train.learning_rate = 3e-3;
    return options;
  }
  static step_records::RecordSet* train_;
  static step_records::RecordSet* held_out_;
};
step_records::RecordSet* TinyModel::train_ = nullptr;
step_records::RecordSet* TinyModel::held_out_ = nullptr;

// A mistyped or oversized model.json is refused with the key, never a crash.
void ExpectBadModelJsonRefused(const std::string& folder) {
  const auto original = base::ReadFile(folder + "/model.json");
  ASSERT_TRUE(original.ok());
  const nlohmann::json doc = nlohmann::json::parse(*original);
  const std::vector<std::pair<std::string, nlohmann::json>> edits = {
      {"/step_threshold", "high"},
      {"/step_threshold", 7.0},
      {"/config/model/dim", 1e12},
      {"/config/model/dim", 1 << 20},
      {"/config/model/heads", 2.5},
      {"/config/model/dropout", "none"},
      {"/config/input/max_tokens", -1},
      {"/schema", 1},
      {"/sha256/weights.bin", 5},
      {"/config", "none"},
      {"/config/model/modality_dropout", 1.0},
      {"/config/model/statistics_head", "yes"}};
  for (const auto& [pointer, value] : edits) {
    nlohmann::json changed = doc;
    changed[nlohmann::json::json_pointer(pointer)] = value;
    { std::ofstream(folder + "/model.json") << changed.dump(); }
    auto refused = LoadModel(folder);
    EXPECT_FALSE(refused.ok()) << pointer << " = " << value.dump();
  }
  { std::ofstream(folder + "/model.json") << *original; }
  ASSERT_TRUE(LoadModel(folder).ok());
}

// The torch network and the plain C++ forward pass agree on every output, for the
// full model and for each variant's switches (logs or trace hidden, no statistics
// head, no summary bins); ImportWeights restores a network from its export.
TEST_F(TinyModel, ForwardMatchesTorch) {
  // 48 records, the abnormal ones first, so the decoder has references to learn.
  step_records::RecordSet set;
  set.symbols = train_->symbols;
  set.templates = train_->templates;
  for (bool abnormal : {true, false}) {
    for (const step_records::StepRecord& r : train_->records) {
      if (r.is_anomaly == abnormal && set.records.size() < (abnormal ? 16u : 48u))
        set.records.push_back(r);
    }
  }
  TrainOptions options = Options();
  std::vector<tpe::Serialization> corpus;
  for (const auto& r : set.records) corpus.push_back(r.serialization);
  tpe::TpeTrainConfig tpe_config;
  tpe_config.vocab_size = 128;
  auto vocab = tpe::TpeVocabulary::Train(corpus, set.symbols, tpe_config);
  ASSERT_TRUE(vocab.ok());
  auto inputs = MakeInputs(set, *vocab, set.templates, options.input);
  ASSERT_TRUE(inputs.ok());
  options.model.vocab_size = static_cast<int64_t>(vocab->size());
  options.model.template_count = static_cast<int64_t>(set.templates.size());
  options.model.summary_features = SummaryWidth(options.input);
  const ExplanationVocabulary words = ExplanationVocabularyOf(set);
  ASSERT_GT(words.size(), 20u);
  SetExplanations(words, set, &*inputs);
  options.model.explain_vocab = static_cast<int64_t>(words.size());
  options.model.explain_by_type = true;
  options.train.epochs = 1;
  struct Variant {
    const char* name;
    void (*apply)(ModelConfig*);
  };
  const Variant variants[] = {{"full", [](ModelConfig*) {}},
                              {"trace only, decoder without type",
                               [](ModelConfig* c) {
                                 c->use_logs = false;
                                 c->explain_by_type = false;
                               }},
                              {"logs only", [](ModelConfig* c) { c->use_trace = false; }},
                              {"plain summary", [](ModelConfig* c) {
                                 c->explain_vocab = 0;
                                 c->statistics_head = false;
                                 c->summary_bins = 0;
                                 c->gcn_layers = 2;
                                 c->joint_layers = 2;
                               }}};
  for (const Variant& variant : variants) {
    SCOPED_TRACE(variant.name);
    ModelConfig config = options.model;
    variant.apply(&config);
    auto network = RootCauseModel::Create(config);
    ASSERT_TRUE(network.ok()) << network.status().message();
    ASSERT_TRUE(network->Train(*inputs, {}, options.train, nullptr).ok());
    const std::vector<Prediction> torch_out = network->Predict(*inputs);
    auto forward = ModelForward::Create(config, network->ExportWeights());
    ASSERT_TRUE(forward.ok()) << forward.status().message();
    EXPECT_EQ(forward->parameter_count(), network->parameter_count());
    const std::vector<Prediction> plain = forward->Predict(*inputs);
    ASSERT_EQ(plain.size(), torch_out.size());
    float worst = 0;
    for (size_t r = 0; r < plain.size(); ++r) {
      worst = std::max(worst, std::abs(plain[r].step_probability - torch_out[r].step_probability));
      for (size_t c = 0; c < plain[r].type_probability.size(); ++c) {
        worst = std::max(worst,
                         std::abs(plain[r].type_probability[c] - torch_out[r].type_probability[c]));
      }
      ASSERT_EQ(plain[r].token_probability.size(), torch_out[r].token_probability.size());
      for (size_t j = 0; j < plain[r].token_probability.size(); ++j) {
        worst = std::max(
            worst, std::abs(plain[r].token_probability[j] - torch_out[r].token_probability[j]));
      }
    }
    EXPECT_LT(worst, 2e-5f);
    // The decoder's greedy words, the same from both.
    const std::vector<std::vector<int32_t>> torch_words = network->Explain(*inputs);
    for (size_t r = 0; r < 8; ++r) {
      EXPECT_EQ(forward->Explain((*inputs)[r]), torch_words[r]) << r;
      EXPECT_EQ(torch_words[r].empty(), config.explain_vocab == 0);
    }

    config.init_seed += 1;
    auto restored = RootCauseModel::Create(config);
    ASSERT_TRUE(restored.ok());
    ASSERT_TRUE(restored->ImportWeights(network->ExportWeights()).ok());
    const std::vector<Prediction> again = restored->Predict(*inputs);
    for (size_t r = 0; r < again.size(); ++r)
      ASSERT_EQ(again[r].step_probability, torch_out[r].step_probability);
    NamedTensors missing = network->ExportWeights();
    missing.pop_back();
    EXPECT_FALSE(restored->ImportWeights(missing).ok());
  }
}

// The decoder learned the references' words and comes back with its vocabulary.
void ExpectDecoderLearned(const TrainedModel& trained, const TrainedModel& loaded,
                          const std::vector<ModelInput>& inputs,
                          const step_records::RecordSet& train) {
  ASSERT_GT(trained.options.model.explain_vocab, 20);
  EXPECT_EQ(loaded.explanations.words(), trained.explanations.words());
  // It starts as the references start (an untrained decoder picks among all words).
  std::set<std::string> openings;
  for (const step_records::StepRecord& r : train.records) {
    if (r.is_anomaly) openings.insert(DelexicalizeExplanation(r.explanation).front());
  }
  size_t abnormal = 0, opened = 0;
  for (size_t r = 0; r < inputs.size(); ++r) {
    if (inputs[r].step_label < 0.5f) continue;
    const std::vector<int32_t> words = trained.model.Explain(inputs[r]);
    EXPECT_EQ(loaded.model.Explain(inputs[r]), words);
    const std::vector<std::string> said = trained.explanations.Decode(words);
    ++abnormal;
    opened += !said.empty() && openings.count(said.front());
  }
  EXPECT_GT(2 * opened, abnormal);
  EXPECT_LT(openings.size() * 4, trained.explanations.size());
}

// One tiny model, trained once: it learns (loss falls), beats chance on held-out
// requests, and survives a save/load round trip.
// --normal-share: an epoch trains on every abnormal record and about that share of the
// normal ones.
TEST_F(TinyModel, AnEpochSamplesTheNormalRecords) {
  struct TrainTotals : base::ProgressSink {
    void Update(std::string_view stage, uint64_t, uint64_t total) override {
      if (stage == "train") totals.push_back(total);
    }
    std::vector<uint64_t> totals;
  } progress;
  double abnormal = 0;
  for (const step_records::StepRecord& r : train_->records) abnormal += r.is_anomaly ? 1 : 0;
  const double normal = static_cast<double>(train_->records.size()) - abnormal;
  ASSERT_GT(normal, 40);
  TrainOptions options = Options();
  options.train.epochs = 1;
  options.train.normal_share = 0.25;
  options.train.progress = &progress;
  ASSERT_TRUE(TrainRootCauseModel(*train_, {}, options, nullptr).ok());
  ASSERT_FALSE(progress.totals.empty());
  const double trained = static_cast<double>(progress.totals.back());
  const double slack = 4 * std::sqrt(normal * 0.25 * 0.75);  // binomial, 4 sigma
  EXPECT_NEAR(trained, abnormal + 0.25 * normal, slack);
}

TEST_F(TinyModel, LearnsBeatsChanceAndRoundTrips) {
  ASSERT_GT(train_->records.size(), 50u);
  std::vector<EpochReport> reports;
  auto trained = TrainRootCauseModel(*train_, *held_out_, Options(),
                                     [&](const EpochReport& r) { reports.push_back(r); });
  ASSERT_TRUE(trained.ok()) << trained.status().message();
  ASSERT_EQ(reports.size(), 6u);
  for (const EpochReport& r : reports) {
    std::printf("epoch %d loss %.3f val %.3f step F1 %.3f type F1 %.3f token F1 %.3f %.1fs\n",
                r.epoch, r.train_loss, r.val_loss, r.val_step_f1, r.val_type_macro_f1,
                r.val_token_f1, r.seconds);
  }
  EXPECT_LT(reports.back().train_loss, reports.front().train_loss);
  EXPECT_TRUE(
      std::any_of(reports.begin(), reports.end(), [](const EpochReport& r) { return r.best; }));

  // Anomalous held-out step records score above normal ones.
  auto inputs = InputsFor(*trained, *held_out_);
  ASSERT_TRUE(inputs.ok());
  const std::vector<Prediction> before = trained->model.Predict(*inputs);
  double pairs = 0, wins = 0;
  for (size_t a = 0; a < inputs->size(); ++a) {
    if ((*inputs)[a].step_label < 0.5f) continue;
    for (size_t b = 0; b < inputs->size(); ++b) {
      if ((*inputs)[b].step_label > 0.5f) continue;
      pairs += 1;
      const float pa = before[a].step_probability, pb = before[b].step_probability;
      wins += pa > pb ? 1.0 : pa == pb ? 0.5 : 0.0;
    }
  }
  ASSERT_GT(pairs, 0);
  // Tokens: the held-out records' affected tokens score above the others.
  std::vector<std::pair<float, bool>> tokens;
  for (size_t r = 0; r < inputs->size(); ++r) {
    for (size_t j = 0; j < (*inputs)[r].size(); ++j) {
      tokens.emplace_back(before[r].token_probability[j], (*inputs)[r].token_label[j] > 0.5f);
    }
  }
  std::sort(tokens.begin(), tokens.end());
  double positives = 0, negatives_below = 0, token_wins = 0, token_pairs = 0;
  for (const auto& [p, label] : tokens) {
    if (label) {
      token_wins += negatives_below;
      positives += 1;
    } else {
      negatives_below += 1;
    }
  }
  token_pairs = positives * negatives_below;
  ASSERT_GT(token_pairs, 0);
  std::printf("held-out AUROC: steps %.3f over %zu records, tokens %.3f over %zu tokens\n",
              wins / pairs, inputs->size(), token_wins / token_pairs, tokens.size());
  EXPECT_GT(token_wins / token_pairs, 0.6);

  const std::string folder = base::TempDir("learn_model") + "/model";
  ASSERT_TRUE(SaveModel(*trained, folder).ok());
  auto loaded = LoadModel(folder);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ(loaded->step_threshold, trained->step_threshold);
  EXPECT_EQ(loaded->token_threshold, trained->token_threshold);
  EXPECT_GT(trained->token_threshold, 0.0f);
  EXPECT_LT(trained->token_threshold, 1.0f);
  ExpectDecoderLearned(*trained, *loaded, *inputs, *train_);
  auto loaded_inputs = InputsFor(*loaded, *held_out_);
  ASSERT_TRUE(loaded_inputs.ok());
  const std::vector<Prediction> after = loaded->model.Predict(*loaded_inputs);
  ASSERT_EQ(before.size(), after.size());
  for (size_t i = 0; i < before.size(); ++i) {
    ASSERT_FLOAT_EQ(before[i].step_probability, after[i].step_probability);
    ASSERT_EQ(before[i].token_probability, after[i].token_probability);
  }

  // The verdict on a whole trace: a simulated throttle is read; a trace without
  // request steps is not, and says why.
  const model::Trace throttled = sim::SimulatedTrace("gpu_throttle:rank=1", "learn_verdict");
  const diagnose::ModelOpinion verdict = DiagnoseWithModel(*loaded, folder, throttled);
  EXPECT_TRUE(verdict.used) << verdict.reason;
  EXPECT_GT(verdict.records, 0);
  EXPECT_GE(verdict.abnormal_probability, 0.0);
  EXPECT_LE(verdict.abnormal_probability, 1.0);
  for (const diagnose::ModelStep& step : verdict.steps)
    EXPECT_GE(step.probability, verdict.threshold);
  EXPECT_EQ(verdict.abnormal, !verdict.steps.empty());
  const diagnose::ModelOpinion empty = DiagnoseWithModel(*loaded, folder, model::Trace{});
  EXPECT_FALSE(empty.used);
  EXPECT_NE(empty.reason.find("requests"), std::string::npos) << empty.reason;

  // Log lines alone: a model that reads traces declines; the same weights read as
  // the logs-only variant score windows of lines and name no operators.
  {
    auto logs = store::OpenTrace({"tests/fixtures/logs/vllm_v0.log"}, store::OpenOptions{});
    ASSERT_TRUE(logs.ok()) << logs.status().message();
    ASSERT_EQ(logs->events.size(), 0u);
    const diagnose::ModelOpinion declined = DiagnoseLogsWithModel(*loaded, folder, *logs);
    EXPECT_FALSE(declined.used);
    EXPECT_NE(declined.reason.find("logs-only"), std::string::npos) << declined.reason;
    auto text = base::ReadFile(folder + "/model.json");
    ASSERT_TRUE(text.ok());
    nlohmann::json doc = nlohmann::json::parse(*text);
    doc["config"]["model"]["use_trace"] = false;
    const std::string logs_folder = base::TempDir("learn_logs_model") + "/model";
    std::filesystem::create_directories(logs_folder);
    for (const char* file : {"tpe.json", "templates.json", "weights.bin"}) {
      std::filesystem::copy_file(folder + "/" + file, logs_folder + "/" + file);
    }
    { std::ofstream(logs_folder + "/model.json") << doc.dump(); }
    auto logs_model = LoadModel(logs_folder);
    ASSERT_TRUE(logs_model.ok()) << logs_model.status().message();
    const diagnose::ModelOpinion read = DiagnoseLogsWithModel(*logs_model, logs_folder, *logs);
    ASSERT_TRUE(read.used) << read.reason;
    EXPECT_TRUE(read.logs_only);
    EXPECT_EQ(read.records,
              static_cast<int64_t>((logs->logs.size() + kLogWindowLines - 1) / kLogWindowLines));
    EXPECT_TRUE(read.operators.empty());
    for (const diagnose::ModelStep& window : read.steps) {
      EXPECT_GE(window.probability, read.threshold);
      EXPECT_NE(window.request.find("vllm_v0.log lines "), std::string::npos) << window.request;
    }
  }

  ExpectBadModelJsonRefused(folder);

  // A changed weights file is refused by its checksum.
  {
    std::ofstream out(folder + "/weights.bin", std::ios::app | std::ios::binary);
    out << "x";
  }
  auto tampered = LoadModel(folder);
  ASSERT_FALSE(tampered.ok());
  EXPECT_NE(tampered.status().message().find("checksum"), std::string::npos);
  auto missing = LoadModel(base::TempDir("learn_no_model"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("model.json"), std::string::npos);
}

}  // namespace
}  // namespace teller::learn
