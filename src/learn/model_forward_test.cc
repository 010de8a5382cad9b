// Torch-free parts of the learned model: its inputs, the weights file and the plain
// C++ forward pass with the shipped model (learn_test checks the forward pass
// against torch).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "base/testing.h"
#include "learn/model_diagnosis.h"
#include "learn/model_folder.h"
#include "learn/model_forward.h"
#include "learn/model_inputs.h"
#include "learn/root_cause.h"
#include "learn/weights_file.h"
#include "sim/simulated_trace_testing.h"

namespace teller::learn {
namespace {

step_records::RecordSet RecordsOf(const model::Trace& trace) {
  step_records::RecordSet set;
  step_records::RecordOptions options;
  options.bundle = "run";
  EXPECT_TRUE(step_records::AddTraceRecords(trace, options, &set).ok());
  return set;
}

tpe::TpeVocabulary VocabularyOf(const step_records::RecordSet& set, size_t size) {
  std::vector<tpe::Serialization> corpus;
  for (const auto& r : set.records) corpus.push_back(r.serialization);
  tpe::TpeTrainConfig config;
  config.vocab_size = size;
  auto vocab = tpe::TpeVocabulary::Train(corpus, set.symbols, config);
  EXPECT_TRUE(vocab.ok());
  return std::move(vocab).value();
}

TEST(ModelInputs, TokensParentsLabelsAndTruncation) {
  const model::Trace trace = sim::SimulatedTrace("gpu_throttle:rank=1", "learn_inputs");
  const step_records::RecordSet set = RecordsOf(trace);
  const tpe::TpeVocabulary vocab = VocabularyOf(set, 256);
  InputConfig config;
  config.max_tokens = 100000;
  auto full = MakeInputs(set, vocab, set.templates, config);
  ASSERT_TRUE(full.ok()) << full.status().message();
  config.max_tokens = 40;
  auto cut = MakeInputs(set, vocab, set.templates, config);
  ASSERT_TRUE(cut.ok());
  ASSERT_EQ(full->size(), set.records.size());
  for (size_t r = 0; r < full->size(); ++r) {
    const ModelInput& in = (*full)[r];
    const step_records::StepRecord& record = set.records[r];
    EXPECT_EQ(in.dropped_tokens, 0);
    EXPECT_EQ(in.step_label, record.is_anomaly ? 1.0f : 0.0f);
    ASSERT_EQ(in.time.size(), in.size() * kTimeFeatures);
    // Token ranges tile the record's nodes; labels say whether a covered node is affected.
    uint32_t next = 0;
    for (size_t j = 0; j < in.size(); ++j) {
      ASSERT_LT(in.parent[j], static_cast<int64_t>(j));
      EXPECT_LE(in.node_begin[j], next + 1);
      next = std::max(next, in.node_end[j]);
      bool affected = false;
      for (uint32_t k = in.node_begin[j]; k < in.node_end[j]; ++k)
        affected |= record.node_affected[k] != 0;
      EXPECT_EQ(in.token_label[j], affected ? 1.0f : 0.0f);
      for (int f = 0; f < kTimeFeatures; ++f)
        ASSERT_TRUE(std::isfinite(in.time[j * kTimeFeatures + f]));
    }
    EXPECT_EQ(next, record.node_count());
    // Truncated: at most 40 tokens, parents still earlier, roots kept.
    const ModelInput& small = (*cut)[r];
    EXPECT_LE(small.size(), 40u);
    EXPECT_EQ(small.size() + static_cast<size_t>(small.dropped_tokens), in.size());
    for (size_t j = 0; j < small.size(); ++j) ASSERT_LT(small.parent[j], static_cast<int64_t>(j));
  }
}

// On rank 1's throttled steps, kernel tokens of rank 1 are slower than the bundle's
// median for the same token: the bundle-relative time feature shows it.
TEST(ModelInputs, BundleRelativeTimeShowsTheThrottle) {
  const model::Trace trace =
      sim::SimulatedTrace("gpu_throttle:rank=1,magnitude=0.5", "learn_relative");
  const step_records::RecordSet set = RecordsOf(trace);
  const tpe::TpeVocabulary vocab = VocabularyOf(set, 256);
  auto inputs = MakeInputs(set, vocab, set.templates, InputConfig{});
  ASSERT_TRUE(inputs.ok());
  double affected_sum = 0, other_sum = 0;
  int64_t affected = 0, other = 0;
  for (const ModelInput& in : *inputs) {
    for (size_t j = 0; j < in.size(); ++j) {
      (in.token_label[j] > 0 ? affected_sum : other_sum) += in.time[j * kTimeFeatures + 2];
      (in.token_label[j] > 0 ? affected : other) += 1;
    }
  }
  ASSERT_GT(affected, 0);
  EXPECT_GT(affected_sum / affected, other_sum / other + 0.1);
}

NamedTensors SomeTensors() {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  NamedTensors tensors;
  for (const auto& [name, shape] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
           {"a.weight", {3, 4}}, {"a.bias", {3}}, {"cls", {1, 1, 2}}, {"empty", {0}}}) {
    NamedTensor t{name, shape, {}};
    int64_t count = 1;
    for (int64_t s : shape) count *= s;
    for (int64_t i = 0; i < count; ++i) t.values.push_back(normal(rng));
    tensors.push_back(t);
  }
  return tensors;
}

TEST(WeightsFile, RoundTripsAndRefusesEveryTruncation) {
  const NamedTensors tensors = SomeTensors();
  const std::string bytes = SerializeWeights(tensors);
  auto parsed = ParseWeights(bytes, "w.bin");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  ASSERT_EQ(parsed->size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ((*parsed)[i].name, tensors[i].name);
    EXPECT_EQ((*parsed)[i].shape, tensors[i].shape);
    EXPECT_EQ((*parsed)[i].values, tensors[i].values);
  }
  for (size_t length = 0; length < bytes.size(); ++length) {
    auto cut = ParseWeights(std::string_view(bytes).substr(0, length), "w.bin");
    ASSERT_FALSE(cut.ok()) << length;
    EXPECT_NE(cut.status().message().find("w.bin: offset"), std::string::npos)
        << cut.status().message();
  }
  EXPECT_FALSE(ParseWeights(bytes + "x", "w.bin").ok());
}

TEST(WeightsFile, RefusesBadValuesNamesAndSizes) {
  const std::string good = SerializeWeights(SomeTensors());
  auto refused = [](const std::string& bytes, const std::string& expected) {
    auto parsed = ParseWeights(bytes, "w.bin");
    ASSERT_FALSE(parsed.ok());
    EXPECT_NE(parsed.status().message().find(expected), std::string::npos)
        << parsed.status().message();
  };
  refused("TLWEIGHX" + good.substr(8), "not a teller weights file");
  NamedTensors twice = SomeTensors();
  twice.push_back(twice.front());
  refused(SerializeWeights(twice), "appears twice");
  NamedTensors nan = SomeTensors();
  nan[0].values[5] = std::nanf("");
  refused(SerializeWeights(nan), "a.weight holds nan");
  // A size far beyond the file: the first dimension of the first tensor.
  std::string huge = good;
  const int64_t big = int64_t{1} << 40;
  std::memcpy(huge.data() + 8 + 4 + 4 + 4 + 8 + 4, &big, sizeof big);
  refused(huge, "has size");
}

TEST(ModelForwardTest, MissingOrMisshapenTensorsAreNamed) {
  ModelConfig config;
  config.vocab_size = 10;
  config.template_count = 4;
  config.dim = 8;
  config.heads = 2;
  auto none = ModelForward::Create(config, {});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no tensor token.weight"), std::string::npos)
      << none.status().message();
  NamedTensors wrong = {{"token.weight", {10, 9}, std::vector<float>(90, 0.0f)}};
  auto misshapen = ModelForward::Create(config, wrong);
  ASSERT_FALSE(misshapen.ok());
  EXPECT_NE(misshapen.status().message().find("token.weight has shape [10, 9]"), std::string::npos)
      << misshapen.status().message();
  config.heads = 3;
  EXPECT_FALSE(ModelForward::Create(config, {}).ok());
}

// The shipped model loads and runs without torch: a record scores the same alone, in
// a list, and whatever the thread count; probabilities are probabilities.
TEST(ModelForwardTest, TheShippedModelScoresRecordsAloneOrTogether) {
  const std::string folder = FindShippedModel(kShippedDefaultModel);
  ASSERT_FALSE(folder.empty());
  auto trained = LoadModel(folder);
  ASSERT_TRUE(trained.ok()) << trained.status().message();
  const model::Trace trace = sim::SimulatedTrace("gpu_throttle:rank=1", "forward_shipped");
  const step_records::RecordSet set = RecordsOf(trace);
  auto inputs = InputsFor(*trained, set);
  ASSERT_TRUE(inputs.ok());
  ASSERT_GT(inputs->size(), 8u);
  const std::vector<Prediction> one = trained->model.Predict(*inputs, 1);
  const std::vector<Prediction> two = trained->model.Predict(*inputs, 2);
  ASSERT_EQ(one.size(), inputs->size());
  for (size_t r = 0; r < one.size(); ++r) {
    const Prediction alone = trained->model.Predict((*inputs)[r]);
    EXPECT_EQ(one[r].step_probability, two[r].step_probability);
    EXPECT_EQ(one[r].step_probability, alone.step_probability);
    EXPECT_EQ(one[r].token_probability, alone.token_probability);
    EXPECT_GE(one[r].step_probability, 0.0f);
    EXPECT_LE(one[r].step_probability, 1.0f);
    float total = 0;
    for (float p : one[r].type_probability) total += p;
    EXPECT_NEAR(total, 1.0f, 1e-5f);
    EXPECT_EQ(one[r].token_probability.size(), (*inputs)[r].size());
  }
  const diagnose::ModelOpinion verdict = DiagnoseWithModel(*trained, folder, trace);
  EXPECT_TRUE(verdict.used) << verdict.reason;
  EXPECT_GT(verdict.records, 0);
  // The shipped model has a decoder: it explains the run it flags, and a sentence that
  // keeps a slot (one the trace could not fill) says why it was dropped.
  ASSERT_GT(trained->options.model.explain_vocab, 0);
  ASSERT_TRUE(verdict.abnormal);
  EXPECT_GT(verdict.explanation.size(), 40u);
  if (verdict.explanation.find('<') != std::string::npos) {
    EXPECT_FALSE(verdict.explanation_problems.empty()) << verdict.explanation;
  }
  EXPECT_NE(verdict.explanation.find("step"), std::string::npos) << verdict.explanation;
}

}  // namespace
}  // namespace teller::learn
