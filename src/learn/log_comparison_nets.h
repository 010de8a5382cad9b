// The log comparison methods in libtorch (learn/log_comparison_data.h says what they read),
// built into the trainer plugin only. Each Fit* trains on the train part and scores
// the records of both parts; learn/log_comparison_models.h calls them.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include <torch/nn.h>

#include "base/status.h"
#include "learn/log_comparison_data.h"

namespace teller::learn::log_comparisons {

// Scores of every record of both parts, higher: more anomalous.
struct Fitted {
  std::vector<float> train_scores, test_scores;
  int64_t parameters = 0;
  int32_t epochs = 0;
};

// RobustLog (Zhang et al., FSE 2019): attention over a BiLSTM of semantic template
// vectors, supervised.
base::StatusOr<Fitted> FitRobustLog(const LogComparisonData& train, const LogComparisonData& test,
                                    const LogComparisonOptions& options);
// LAnoBERT (Lee et al., 2023): a small masked language model over the normal records'
// lines; a line's score is its masked words' top prediction losses.
base::StatusOr<Fitted> FitLanoBert(const LogComparisonData& train, const LogComparisonData& test,
                                   const LogComparisonOptions& options);
// Logs2Graphs (Li et al., 2024): a directed graph of template transitions per record,
// a directed graph network trained one-class (Deep SVDD) on normal records.
base::StatusOr<Fitted> FitLogs2Graphs(const LogComparisonData& train, const LogComparisonData& test,
                                      const LogComparisonOptions& options);
// MAD-GAN (Li et al., ICANN 2019): an LSTM GAN over windows of the step series; the
// discriminator's doubt and the generator's reconstruction error.
base::StatusOr<Fitted> FitMadGan(const LogComparisonData& train, const LogComparisonData& test,
                                 const LogComparisonOptions& options);

// Shared by the four.
std::vector<size_t> NormalRecords(const LogComparisonData& data);
void Shuffle(std::vector<size_t>* order, std::mt19937_64* rng);
int64_t ParameterCount(const torch::nn::Module& module);
torch::Tensor TemplateTable(const LogComparisonData& data);  // [templates, dims]
std::vector<float> ToFloats(const torch::Tensor& values);
// Rows [begin, end) of `order`, at most `size`: the batches of one pass.
std::vector<std::vector<size_t>> Batches(const std::vector<size_t>& order, size_t size);

}  // namespace teller::learn::log_comparisons
