// RobustLog: each record's template sequence as semantic vectors (learn/log_comparisons.h),
// a bidirectional LSTM, attention pooling and a logistic output, trained on the labels.
#include <algorithm>

#include <torch/nn.h>
#include <torch/optim.h>

#include "learn/log_comparison_nets.h"

namespace teller::learn::log_comparisons {
namespace {

constexpr int32_t kRobustLogEpochs = 8;
constexpr size_t kRobustLogBatch = 64;
constexpr double kRobustLogLearningRate = 3e-3;

struct RobustLogNetImpl : torch::nn::Module {
  RobustLogNetImpl(int64_t input, int64_t hidden)
      : lstm(register_module(
            "lstm",
            torch::nn::LSTM(
                torch::nn::LSTMOptions(input, hidden).bidirectional(true).batch_first(true)))),
        attention(register_module("attention", torch::nn::Linear(2 * hidden, 1))),
        out(register_module("out", torch::nn::Linear(2 * hidden, 1))) {}

  // x [B, T, D], mask [B, T] (true: a template) -> logits [B].
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask) {
    const torch::Tensor h = std::get<0>(lstm->forward(x));
    torch::Tensor weight = attention->forward(torch::tanh(h)).squeeze(-1);
    weight = torch::softmax(weight.masked_fill(mask.logical_not(), -1e9), 1);
    return out->forward((weight.unsqueeze(-1) * h).sum(1)).squeeze(-1);
  }

  torch::nn::LSTM lstm;
  torch::nn::Linear attention, out;
};
TORCH_MODULE(RobustLogNet);

// The batch's template vectors, padded; a record without logs is one zero vector.
std::pair<torch::Tensor, torch::Tensor> Sequences(const LogComparisonData& data,
                                                  const torch::Tensor& table,
                                                  const std::vector<size_t>& rows) {
  size_t length = 1;
  for (size_t r : rows) length = std::max(length, data.records[r].templates.size());
  const auto b = static_cast<int64_t>(rows.size());
  const auto t = static_cast<int64_t>(length);
  std::vector<int64_t> index(rows.size() * length, 0);
  std::vector<uint8_t> present(rows.size() * length, 0);
  std::vector<float> real(rows.size() * length, 0.0f);
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::vector<int32_t>& templates = data.records[rows[i]].templates;
    present[i * length] = 1;
    for (size_t j = 0; j < templates.size(); ++j) {
      index[i * length + j] = templates[j];
      present[i * length + j] = 1;
      real[i * length + j] = 1.0f;
    }
  }
  const torch::Tensor x = table.index_select(0, torch::tensor(index)).reshape({b, t, -1}) *
                          torch::tensor(real).reshape({b, t, 1});
  return {x, torch::tensor(present).to(torch::kBool).reshape({b, t})};
}

torch::Tensor Labels(const LogComparisonData& data, const std::vector<size_t>& rows) {
  std::vector<float> labels;
  for (size_t r : rows) labels.push_back(data.records[r].anomaly ? 1.0f : 0.0f);
  return torch::tensor(labels);
}

std::vector<float> Score(RobustLogNet& net, const LogComparisonData& data) {
  torch::NoGradGuard no_grad;
  net->eval();
  const torch::Tensor table = TemplateTable(data);
  std::vector<size_t> all(data.records.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  std::vector<float> scores;
  for (const std::vector<size_t>& rows : Batches(all, 256)) {
    auto [x, mask] = Sequences(data, table, rows);
    const std::vector<float> part = ToFloats(torch::sigmoid(net->forward(x, mask)));
    scores.insert(scores.end(), part.begin(), part.end());
  }
  return scores;
}

}  // namespace

base::StatusOr<Fitted> FitRobustLog(const LogComparisonData& train, const LogComparisonData& test,
                                    const LogComparisonOptions& options) {
  const size_t normal = NormalRecords(train).size();
  if (normal == 0 || normal == train.records.size()) {
    return base::InvalidArgument(
        "robustlog: supervised, it needs normal and abnormal train records ({} of {} normal)",
        normal, train.records.size());
  }
  RobustLogNet net(train.template_dims, options.dim);
  const double positive_weight = std::clamp(
      static_cast<double>(normal) / static_cast<double>(train.records.size() - normal), 1.0, 20.0);
  torch::optim::Adam optimizer(net->parameters(),
                               torch::optim::AdamOptions(kRobustLogLearningRate));
  const torch::Tensor table = TemplateTable(train);
  std::mt19937_64 rng(options.seed);
  std::vector<size_t> order(train.records.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  Fitted fitted;
  fitted.epochs = options.epochs > 0 ? options.epochs : kRobustLogEpochs;
  for (int32_t epoch = 0; epoch < fitted.epochs; ++epoch) {
    net->train();
    Shuffle(&order, &rng);
    for (const std::vector<size_t>& rows : Batches(order, kRobustLogBatch)) {
      auto [x, mask] = Sequences(train, table, rows);
      const torch::Tensor loss = torch::binary_cross_entropy_with_logits(
          net->forward(x, mask), Labels(train, rows), {}, torch::full({1}, positive_weight));
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
    }
  }
  fitted.parameters = ParameterCount(*net);
  fitted.train_scores = Score(net, train);
  fitted.test_scores = Score(net, test);
  return fitted;
}

}  // namespace teller::learn::log_comparisons
