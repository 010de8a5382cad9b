// LAnoBERT: a small masked language model (word and position embeddings, transformer
// encoder layers, a word head) trained on the distinct lines of normal train records.
// A line's score is the mean of its top masked-word losses (each word masked once); a
// record's is its worst line's.
#include <algorithm>
#include <map>

#include <torch/nn.h>
#include <torch/optim.h>

#include "learn/log_comparison_nets.h"

namespace teller::learn::log_comparisons {
namespace {

constexpr int32_t kLanoBertEpochs = 10;
constexpr size_t kMinBatches = 200;  // small line sets get more passes
constexpr size_t kLanoBertBatch = 64;
constexpr size_t kScoreBatch = 512;
constexpr double kMaskShare = 0.15;
constexpr size_t kTopLosses = 3;
constexpr int64_t kLayers = 2;
constexpr int64_t kHeads = 2;
constexpr double kLanoBertLearningRate = 2e-3;

struct MaskedLmImpl : torch::nn::Module {
  MaskedLmImpl(int64_t words, int64_t length, int64_t dim)
      : word(register_module("word", torch::nn::Embedding(words, dim))),
        position(register_module("position", torch::nn::Embedding(length, dim))),
        head(register_module("head", torch::nn::Linear(dim, words))) {
    for (int64_t l = 0; l < kLayers; ++l) {
      layers.push_back(register_module(
          "layer" + std::to_string(l),
          torch::nn::TransformerEncoderLayer(torch::nn::TransformerEncoderLayerOptions(dim, kHeads)
                                                 .dim_feedforward(2 * dim)
                                                 .dropout(0.1))));
    }
  }

  // ids [B, L] -> word logits [B, L, words].
  torch::Tensor forward(const torch::Tensor& ids) {
    const torch::Tensor positions = torch::arange(ids.size(1)).unsqueeze(0);
    torch::Tensor h = (word->forward(ids) + position->forward(positions)).transpose(0, 1);
    const torch::Tensor padding = ids.eq(kWordPad);
    for (auto& layer : layers) h = layer->forward(h, {}, padding);
    return head->forward(h.transpose(0, 1));
  }

  torch::nn::Embedding word, position;
  torch::nn::Linear head;
  std::vector<torch::nn::TransformerEncoderLayer> layers;
};
TORCH_MODULE(MaskedLm);

int64_t LongestLine(const LogComparisonData& a, const LogComparisonData& b) {
  size_t longest = 1;
  for (const auto* data : {&a, &b}) {
    for (const auto& line : data->lines) longest = std::max(longest, line.size());
  }
  return static_cast<int64_t>(longest);
}

// The distinct lines of the normal records.
std::vector<size_t> NormalLines(const LogComparisonData& data) {
  std::vector<uint8_t> used(data.lines.size(), 0);
  for (size_t r : NormalRecords(data)) {
    for (int32_t line : data.records[r].lines) used[static_cast<size_t>(line)] = 1;
  }
  std::vector<size_t> lines;
  for (size_t l = 0; l < used.size(); ++l) {
    if (used[l]) lines.push_back(l);
  }
  return lines;
}

// A batch of lines with kMaskShare of the words (at least one) masked; targets are
// -100 where nothing is masked.
std::pair<torch::Tensor, torch::Tensor> MaskedBatch(const LogComparisonData& data,
                                                    const std::vector<size_t>& lines,
                                                    std::mt19937_64* rng) {
  size_t length = 1;
  for (size_t l : lines) length = std::max(length, data.lines[l].size());
  std::vector<int64_t> ids(lines.size() * length, kWordPad), target(lines.size() * length, -100);
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::vector<int32_t>& words = data.lines[lines[i]];
    const size_t forced = (*rng)() % words.size();
    for (size_t j = 0; j < words.size(); ++j) {
      ids[i * length + j] = words[j];
      const bool masked = j == forced || static_cast<double>((*rng)() % 1000) < kMaskShare * 1000;
      if (!masked) continue;
      ids[i * length + j] = kWordMask;
      target[i * length + j] = words[j];
    }
  }
  const auto b = static_cast<int64_t>(lines.size());
  return {torch::tensor(ids).reshape({b, -1}), torch::tensor(target).reshape({b, -1})};
}

// Every (line, word) pair of the given lines, that word masked, scored in batches:
// the loss of each masked word, grouped back per line.
std::vector<std::vector<float>> MaskedLosses(MaskedLm& net, const LogComparisonData& data,
                                             const std::vector<size_t>& lines) {
  std::vector<std::pair<size_t, size_t>> pairs;  // (index into lines, word)
  for (size_t i = 0; i < lines.size(); ++i) {
    for (size_t j = 0; j < data.lines[lines[i]].size(); ++j) pairs.emplace_back(i, j);
  }
  std::vector<std::vector<float>> losses(lines.size());
  for (size_t at = 0; at < pairs.size(); at += kScoreBatch) {
    const size_t end = std::min(at + kScoreBatch, pairs.size());
    size_t length = 1;
    for (size_t p = at; p < end; ++p)
      length = std::max(length, data.lines[lines[pairs[p].first]].size());
    std::vector<int64_t> ids((end - at) * length, kWordPad), position, target;
    for (size_t p = at; p < end; ++p) {
      const std::vector<int32_t>& words = data.lines[lines[pairs[p].first]];
      std::copy(words.begin(), words.end(),
                ids.begin() + static_cast<std::ptrdiff_t>((p - at) * length));
      ids[(p - at) * length + pairs[p].second] = kWordMask;
      position.push_back(static_cast<int64_t>((p - at) * length + pairs[p].second));
      target.push_back(words[pairs[p].second]);
    }
    const torch::Tensor logits =
        net->forward(torch::tensor(ids).reshape({static_cast<int64_t>(end - at), -1}));
    const torch::Tensor picked =
        logits.reshape({-1, logits.size(2)}).index_select(0, torch::tensor(position));
    const std::vector<float> loss = ToFloats(torch::nn::functional::cross_entropy(
        picked, torch::tensor(target),
        torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone)));
    for (size_t p = at; p < end; ++p) losses[pairs[p].first].push_back(loss[p - at]);
  }
  return losses;
}

float TopMean(std::vector<float> losses) {
  if (losses.empty()) return 0.0f;
  std::sort(losses.begin(), losses.end(), std::greater<>());
  const size_t k = std::min(kTopLosses, losses.size());
  float sum = 0;
  for (size_t i = 0; i < k; ++i) sum += losses[i];
  return sum / static_cast<float>(k);
}

std::vector<float> Score(MaskedLm& net, const LogComparisonData& data) {
  torch::NoGradGuard no_grad;
  net->eval();
  std::vector<size_t> lines(data.lines.size());
  for (size_t l = 0; l < lines.size(); ++l) lines[l] = l;
  const std::vector<std::vector<float>> losses = MaskedLosses(net, data, lines);
  std::vector<float> line_score(lines.size());
  for (size_t l = 0; l < lines.size(); ++l) line_score[l] = TopMean(losses[l]);
  std::vector<float> scores;
  for (const LogComparisonRecord& record : data.records) {
    float worst = 0;
    for (int32_t line : record.lines)
      worst = std::max(worst, line_score[static_cast<size_t>(line)]);
    scores.push_back(worst);
  }
  return scores;
}

}  // namespace

base::StatusOr<Fitted> FitLanoBert(const LogComparisonData& train, const LogComparisonData& test,
                                   const LogComparisonOptions& options) {
  std::vector<size_t> order = NormalLines(train);
  if (order.empty()) return base::NotFound("lanobert: the normal train records have no log lines");
  MaskedLm net(train.word_count, LongestLine(train, test), options.dim);
  torch::optim::Adam optimizer(net->parameters(), torch::optim::AdamOptions(kLanoBertLearningRate));
  std::mt19937_64 rng(options.seed);
  Fitted fitted;
  const size_t batches_per_pass = (order.size() + kLanoBertBatch - 1) / kLanoBertBatch;
  fitted.epochs = std::max<int32_t>(
      options.epochs > 0 ? options.epochs : kLanoBertEpochs,
      static_cast<int32_t>((kMinBatches + batches_per_pass - 1) / batches_per_pass));
  for (int32_t epoch = 0; epoch < fitted.epochs; ++epoch) {
    net->train();
    Shuffle(&order, &rng);
    for (const std::vector<size_t>& lines : Batches(order, kLanoBertBatch)) {
      auto [ids, target] = MaskedBatch(train, lines, &rng);
      const torch::Tensor logits = net->forward(ids);
      const torch::Tensor loss = torch::nn::functional::cross_entropy(
          logits.reshape({-1, logits.size(2)}), target.reshape({-1}),
          torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-100));
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
