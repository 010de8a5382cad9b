// The single-stream variant in the trainer plugin, on sequences whose type and
// sentence a token of the prefix decides: it must read the prefix to get them right.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "learn/explanation_text.h"
#include "learn/single_stream_model.h"
#include "learn/trainer_plugin.h"

namespace teller::learn {
namespace {

constexpr int64_t kTraceVocab = 24;
constexpr int64_t kTypes = 4;    // normal and three faults
constexpr int64_t kMarker = 20;  // token kMarker + t - 1 marks fault type t
constexpr int64_t kWords = 12;   // the four marks, then the sentences' words

// Fault type t says "<where> slow <type word> <when>": words 4, 5, 5 + t, 9.
std::vector<int64_t> Sentence(int64_t type) {
  return {kExplainBegin, 4, 5, 5 + type, 9, kExplainEnd};
}

// Fault type t is marked by one token (kMarker + t - 1), or with by_time by a token of
// the usual ids whose time features say it took 4 (t = 1), 16 or 64 times its median.
std::vector<ModelInput> MakeRecords(size_t count, uint64_t seed, bool by_time = false) {
  std::mt19937_64 rng(seed);
  std::vector<ModelInput> records;
  for (size_t i = 0; i < count; ++i) {
    ModelInput input;
    const size_t length = 12 + rng() % 12;
    for (size_t j = 0; j < length; ++j) input.token.push_back(static_cast<int64_t>(rng() % 20));
    input.time.assign(length * kTimeFeatures, 0.0f);
    input.log_template = {static_cast<int64_t>(rng() % 3), static_cast<int64_t>(rng() % 3)};
    input.fault_label = i % 2 == 0 ? 0 : static_cast<int64_t>(1 + (i / 2) % 3);
    if (input.fault_label > 0 && by_time) {
      const size_t slow = rng() % length;
      input.time[slow * kTimeFeatures + 2] = std::log(std::pow(4.0f, input.fault_label));
      input.explanation = Sentence(input.fault_label);
    } else if (input.fault_label > 0) {
      input.token[rng() % length] = kMarker + input.fault_label - 1;
      input.explanation = Sentence(input.fault_label);
    }
    records.push_back(std::move(input));
  }
  return records;
}

SingleStreamShape Shape() { return {kTraceVocab, 3, kTypes, kWords, 0}; }

SingleStreamOptions FastOptions() {
  SingleStreamOptions options;
  options.epochs = 25;
  options.dim = 32;
  options.heads = 2;
  options.normal_share = 1.0;
  options.max_words = 10;
  options.threads = 1;
  return options;
}

TEST(SingleStream, ReadsTheTypeFromThePrefixAndSaysItsSentence) {
  const std::vector<ModelInput> test = MakeRecords(40, 2);
  auto fit = FitSingleStream(Shape(), MakeRecords(240, 1), test, FastOptions());
  ASSERT_TRUE(fit.ok()) << fit.status().message();
  ASSERT_EQ(fit->type_probability.size(), test.size() * kTypes);
  ASSERT_EQ(fit->words.size(), test.size());
  EXPECT_EQ(fit->epoch_loss.size(), 25u);
  EXPECT_LT(fit->epoch_loss.back(), fit->epoch_loss.front());
  int types_right = 0, sentences_right = 0, abnormal = 0;
  for (size_t r = 0; r < test.size(); ++r) {
    const float* p = fit->type_probability.data() + r * kTypes;
    const int64_t type = std::max_element(p, p + kTypes) - p;
    types_right += type == test[r].fault_label;
    if (type == 0) {
      EXPECT_TRUE(fit->words[r].empty()) << r;
      continue;
    }
    const std::vector<int64_t> expected = Sentence(type);
    sentences_right += std::equal(fit->words[r].begin(), fit->words[r].end(), expected.begin() + 1,
                                  expected.end() - 1) &&
                       fit->words[r].size() == expected.size() - 2;
    abnormal += test[r].fault_label > 0;
  }
  // Chance is a quarter of the types; the sentence follows the decoded type.
  EXPECT_GE(types_right, 34) << "of 40";
  fprintf(stderr, "TYPES %d\n", types_right);
  EXPECT_GE(sentences_right, abnormal - 2) << "of " << abnormal;
}

// The trace tokens' time features reach the network: a slow token tells a faulty
// record from a normal one (ids alone cannot) and roughly how slow it was.
TEST(SingleStream, ReadsTheTimeFeatures) {
  const std::vector<ModelInput> test = MakeRecords(40, 2, true);
  auto fit = FitSingleStream(Shape(), MakeRecords(240, 1, true), test, FastOptions());
  ASSERT_TRUE(fit.ok()) << fit.status().message();
  int faulty_right = 0, types_right = 0;
  for (size_t r = 0; r < test.size(); ++r) {
    const float* p = fit->type_probability.data() + r * kTypes;
    const int64_t type = std::max_element(p, p + kTypes) - p;
    faulty_right += (type > 0) == (test[r].fault_label > 0);
    types_right += type == test[r].fault_label;
  }
  EXPECT_GE(faulty_right, 36) << "of 40";
  EXPECT_GE(types_right, 28) << "of 40";
}

TEST(SingleStream, BadInputsAreStatuses) {
  const std::vector<ModelInput> records = MakeRecords(8, 1);
  EXPECT_FALSE(FitSingleStream(Shape(), records, {}, FastOptions()).ok());
  std::vector<ModelInput> outside = records;
  outside[1].token.push_back(kTraceVocab);
  EXPECT_FALSE(FitSingleStream(Shape(), records, outside, FastOptions()).ok());
  outside = records;
  outside[2].time.pop_back();
  EXPECT_FALSE(FitSingleStream(Shape(), records, outside, FastOptions()).ok());
  outside = records;
  outside[1].fault_label = kTypes;
  EXPECT_FALSE(FitSingleStream(Shape(), outside, records, FastOptions()).ok());
  SingleStreamOptions odd = FastOptions();
  odd.heads = 3;
  EXPECT_FALSE(FitSingleStream(Shape(), records, records, odd).ok());
}

TEST(SingleStream, ThePluginFitsIt) {
  auto plugin = LoadTrainerPlugin();
  ASSERT_TRUE(plugin.ok()) << plugin.status().message();
  SingleStreamOptions options = FastOptions();
  options.epochs = 2;
  std::vector<int32_t> heard;
  auto fit = (*plugin)->fit_single_stream(Shape(), MakeRecords(16, 1), MakeRecords(4, 2), options,
                                          [&](int32_t epoch, float) { heard.push_back(epoch); });
  ASSERT_TRUE(fit.ok()) << fit.status().message();
  EXPECT_EQ(heard, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(fit->words.size(), 4u);
  EXPECT_GT(fit->parameters, 0);
}

}  // namespace
}  // namespace teller::learn
