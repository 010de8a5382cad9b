// The single-stream model: one causal transformer over [BOS] trace tokens [SEP] log
// templates <fault_type> y </fault_type> explanation. Each trace token's embedding gets
// its time features (as the MoT trace encoder's), and BOS the record summary: token ids
// alone do not say a step was slow. Its generation head scores the fault types after
// <fault_type> and the explanation words after </fault_type>; the prefix is context only
// (no loss), as in the paper's psi_s.
#include "learn/single_stream_model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <random>
#include <string>

#include <torch/nn.h>
#include <torch/optim.h>

#include "learn/explanation_text.h"

namespace teller::learn {
namespace {

constexpr int64_t kPad = 0, kBos = 1, kSep = 2, kTypeOpen = 3, kTypeClose = 4, kFirstTrace = 5;
constexpr size_t kTrainBatch = 32;
constexpr size_t kDecodeBatch = 64;
constexpr double kLearningRate = 2e-3;

// Where each kind of id starts in the stream vocabulary.
struct StreamIds {
  explicit StreamIds(const SingleStreamShape& shape)
      : first_template(kFirstTrace + shape.trace_vocab),
        first_type(first_template + shape.template_count),
        first_word(first_type + shape.type_count),
        size(first_word + shape.word_count),
        shape(shape) {}
  int64_t first_template, first_type, first_word, size;
  SingleStreamShape shape;
};

// The record's context, ending with <fault_type>.
std::vector<int64_t> Prefix(const ModelInput& input, const StreamIds& ids) {
  std::vector<int64_t> out{kBos};
  for (int64_t t : input.token) out.push_back(kFirstTrace + t);
  out.push_back(kSep);
  for (int64_t t : input.log_template) out.push_back(ids.first_template + t);
  out.push_back(kTypeOpen);
  return out;
}

// The record's words after </fault_type>: its explanation, begin and end marks
// included; just the marks for a normal record.
std::vector<int64_t> Tail(const ModelInput& input) {
  if (!input.explanation.empty()) return input.explanation;
  return {kExplainBegin, kExplainEnd};
}

struct StreamNetImpl : torch::nn::Module {
  StreamNetImpl(const StreamIds& ids, int64_t length, const SingleStreamOptions& options)
      : embed(register_module("embed", torch::nn::Embedding(ids.size, options.dim))),
        position(register_module("position", torch::nn::Embedding(length, options.dim))),
        time(register_module("time", torch::nn::Linear(kTimeFeatures, options.dim))),
        summary(register_module(
            "summary",
            torch::nn::Linear(std::max<int64_t>(ids.shape.summary_features, 1), options.dim))),
        norm(register_module("norm",
                             torch::nn::LayerNorm(torch::nn::LayerNormOptions({options.dim})))),
        head(register_module(
            "head", torch::nn::Linear(options.dim, ids.shape.type_count + ids.shape.word_count))) {
    for (int32_t l = 0; l < options.layers; ++l) {
      layers.push_back(
          register_module("layer" + std::to_string(l),
                          torch::nn::TransformerEncoderLayer(
                              torch::nn::TransformerEncoderLayerOptions(options.dim, options.heads)
                                  .dim_feedforward(2 * options.dim)
                                  .dropout(0.1))));
    }
  }

  // ids [B, L], times [B, L, kTimeFeatures], summaries [B, S] -> generation logits
  // [B, L, types + words]; position i sees 0..i.
  torch::Tensor forward(const torch::Tensor& ids, const torch::Tensor& times,
                        const torch::Tensor& summaries) {
    const int64_t length = ids.size(1);
    const torch::Tensor causal =
        torch::triu(torch::full({length, length}, -std::numeric_limits<float>::infinity()), 1);
    torch::Tensor h = embed->forward(ids) + position->forward(torch::arange(length).unsqueeze(0)) +
                      time->forward(times.slice(1, 0, length));
    h = torch::cat({h.slice(1, 0, 1) + summary->forward(summaries).unsqueeze(1), h.slice(1, 1)}, 1);
    h = h.transpose(0, 1);
    for (auto& layer : layers) h = layer->forward(h, causal);
    return head->forward(norm->forward(h.transpose(0, 1)));
  }

  torch::nn::Embedding embed, position;
  torch::nn::Linear time, summary;
  torch::nn::LayerNorm norm;
  torch::nn::Linear head;
  std::vector<torch::nn::TransformerEncoderLayer> layers;
};
TORCH_MODULE(StreamNet);

// The continuous inputs of a batch padded to `length`: each trace token's time
// features at its position (1 + token index), zero elsewhere, and each record's summary.
std::pair<torch::Tensor, torch::Tensor> Context(const std::vector<ModelInput>& inputs,
                                                const std::vector<size_t>& rows, size_t length,
                                                int64_t summary_features) {
  const auto batch = static_cast<int64_t>(rows.size());
  std::vector<float> times(rows.size() * length * kTimeFeatures, 0.0f);
  const auto width = static_cast<size_t>(std::max<int64_t>(summary_features, 1));
  std::vector<float> summaries(rows.size() * width, 0.0f);
  for (size_t b = 0; b < rows.size(); ++b) {
    const ModelInput& input = inputs[rows[b]];
    std::copy(input.time.begin(), input.time.end(),
              times.begin() + static_cast<std::ptrdiff_t>((b * length + 1) * kTimeFeatures));
    // Raw statistics span orders of magnitude: sign(x) log(1 + |x|).
    for (size_t f = 0; f < input.summary.size() && summary_features > 0; ++f) {
      const float x = input.summary[f];
      summaries[b * width + f] = std::copysign(std::log1p(std::fabs(x)), x);
    }
  }
  return {torch::tensor(times).reshape({batch, static_cast<int64_t>(length), kTimeFeatures}),
          torch::tensor(summaries).reshape({batch, static_cast<int64_t>(width)})};
}

// A teacher-forced batch: the sequences right-padded, where each type token is
// predicted (the <fault_type> position) and where each word is.
struct TrainBatch {
  torch::Tensor ids;  // [B, L]
  torch::Tensor times, summaries;
  torch::Tensor type_at, type_target;  // [B] flat positions, [B] types
  torch::Tensor word_at, word_target;  // [W] flat positions, [W] word ids
};

TrainBatch MakeTrainBatch(const std::vector<ModelInput>& inputs, const std::vector<size_t>& rows,
                          const StreamIds& ids) {
  std::vector<std::vector<int64_t>> sequences;
  std::vector<int64_t> type_at, type_target, word_at, word_target;
  size_t length = 0;
  for (const size_t r : rows) {
    std::vector<int64_t> s = Prefix(inputs[r], ids);
    type_at.push_back(static_cast<int64_t>(s.size()) - 1);
    type_target.push_back(inputs[r].fault_label);
    s.push_back(ids.first_type + inputs[r].fault_label);
    s.push_back(kTypeClose);
    const std::vector<int64_t> tail = Tail(inputs[r]);
    for (size_t w = 0; w < tail.size(); ++w) {
      if (w > 0) {
        word_at.push_back(static_cast<int64_t>(s.size()) - 1);
        word_target.push_back(tail[w]);
      }
      s.push_back(ids.first_word + tail[w]);
    }
    length = std::max(length, s.size());
    sequences.push_back(std::move(s));
  }
  // Positions become flat indexes into [B * L] once the padded length is known.
  std::vector<int64_t> flat(rows.size() * length, kPad);
  size_t word = 0;
  for (size_t b = 0; b < sequences.size(); ++b) {
    std::copy(sequences[b].begin(), sequences[b].end(),
              flat.begin() + static_cast<std::ptrdiff_t>(b * length));
    type_at[b] += static_cast<int64_t>(b * length);
    const size_t words = Tail(inputs[rows[b]]).size() - 1;
    for (size_t w = 0; w < words; ++w) word_at[word++] += static_cast<int64_t>(b * length);
  }
  const auto batch = static_cast<int64_t>(rows.size());
  auto [times, summaries] = Context(inputs, rows, length, ids.shape.summary_features);
  return {torch::tensor(flat).reshape({batch, static_cast<int64_t>(length)}),
          times,
          summaries,
          torch::tensor(type_at),
          torch::tensor(type_target),
          torch::tensor(word_at),
          torch::tensor(word_target)};
}

torch::Tensor BatchLoss(StreamNet& net, const TrainBatch& batch, const StreamIds& ids) {
  const torch::Tensor logits = net->forward(batch.ids, batch.times, batch.summaries);
  const torch::Tensor flat = logits.reshape({-1, logits.size(2)});
  const int64_t types = ids.shape.type_count;
  const torch::Tensor type_logits = flat.index_select(0, batch.type_at).slice(1, 0, types);
  const torch::Tensor word_logits = flat.index_select(0, batch.word_at).slice(1, types);
  return torch::nn::functional::cross_entropy(type_logits, batch.type_target) +
         torch::nn::functional::cross_entropy(word_logits, batch.word_target);
}

// Every abnormal record and `share` of the normal ones, shuffled.
std::vector<size_t> EpochRows(const std::vector<ModelInput>& train, double share,
                              std::mt19937_64* rng) {
  std::vector<size_t> rows;
  std::uniform_real_distribution<double> draw(0.0, 1.0);
  for (size_t r = 0; r < train.size(); ++r) {
    if (train[r].fault_label != 0 || draw(*rng) < share) rows.push_back(r);
  }
  for (size_t i = rows.size(); i > 1; --i) std::swap(rows[i - 1], rows[(*rng)() % i]);
  return rows;
}

// The logits of each row at its own position `at[b]`.
torch::Tensor LogitsAt(StreamNet& net, const torch::Tensor& ids,
                       const std::pair<torch::Tensor, torch::Tensor>& context,
                       const std::vector<int64_t>& at) {
  const torch::Tensor logits = net->forward(ids, context.first, context.second);
  std::vector<int64_t> flat;
  for (size_t b = 0; b < at.size(); ++b)
    flat.push_back(static_cast<int64_t>(b) * ids.size(1) + at[b]);
  return logits.reshape({-1, logits.size(2)}).index_select(0, torch::tensor(flat));
}

// Types of a batch of test records, then the words of those whose type is not
// normal, greedily (the abnormal type with the highest probability is written).
void DecodeBatch(StreamNet& net, const std::vector<ModelInput>& test,
                 const std::vector<size_t>& rows, const StreamIds& ids,
                 const SingleStreamOptions& options, SingleStreamFit* fit) {
  const int64_t types = ids.shape.type_count;
  std::vector<std::vector<int64_t>> sequences;
  size_t longest = 0;
  for (size_t r : rows) {
    sequences.push_back(Prefix(test[r], ids));
    longest = std::max(longest, sequences.back().size());
  }
  const size_t length = longest + 2 + static_cast<size_t>(options.max_words);
  std::vector<int64_t> flat(rows.size() * length, kPad), at;
  for (size_t b = 0; b < rows.size(); ++b) {
    std::copy(sequences[b].begin(), sequences[b].end(),
              flat.begin() + static_cast<std::ptrdiff_t>(b * length));
    at.push_back(static_cast<int64_t>(sequences[b].size()) - 1);
  }
  const auto batch = static_cast<int64_t>(rows.size());
  torch::Tensor buffer = torch::tensor(flat).reshape({batch, static_cast<int64_t>(length)});
  const auto context = Context(test, rows, length, ids.shape.summary_features);
  const torch::Tensor type_p =
      torch::softmax(LogitsAt(net, buffer.slice(1, 0, static_cast<int64_t>(longest)), context, at)
                         .slice(1, 0, types),
                     1);
  std::vector<size_t> open;  // rows still decoding
  for (size_t b = 0; b < rows.size(); ++b) {
    const torch::Tensor p = type_p[static_cast<int64_t>(b)].contiguous();
    std::copy(p.data_ptr<float>(), p.data_ptr<float>() + types,
              fit->type_probability.begin() + static_cast<std::ptrdiff_t>(rows[b] * types));
    const int64_t best = p.argmax().item<int64_t>();
    if (best == 0) continue;
    auto row = buffer[static_cast<int64_t>(b)];
    row[at[b] + 1] = ids.first_type + best;
    row[at[b] + 2] = kTypeClose;
    row[at[b] + 3] = ids.first_word + kExplainBegin;
    at[b] += 3;
    open.push_back(b);
  }
  for (int32_t step = 1; step + 1 < options.max_words && !open.empty(); ++step) {
    int64_t end = 0;
    for (size_t b : open) end = std::max(end, at[b] + 1);
    std::vector<int64_t> read = at;  // rows no longer decoding read any position in range
    for (int64_t& position : read) position = std::min(position, end - 1);
    const torch::Tensor logits =
        LogitsAt(net, buffer.slice(1, 0, end), context, read).slice(1, types);
    std::vector<size_t> still;
    for (size_t b : open) {
      const int64_t word = logits[static_cast<int64_t>(b)].argmax().item<int64_t>();
      if (word == kExplainEnd) continue;
      fit->words[rows[b]].push_back(static_cast<int32_t>(word));
      buffer[static_cast<int64_t>(b)][++at[b]] = ids.first_word + word;
      still.push_back(b);
    }
    open = std::move(still);
  }
}

int64_t LongestSequence(const std::vector<ModelInput>& inputs, const StreamIds& ids,
                        int32_t max_words) {
  size_t longest = 0;
  for (const ModelInput& input : inputs) {
    longest =
        std::max(longest, Prefix(input, ids).size() +
                              std::max(Tail(input).size(), static_cast<size_t>(max_words)) + 2);
  }
  return static_cast<int64_t>(longest);
}

SingleStreamFit Fit(const SingleStreamShape& shape, const std::vector<ModelInput>& train,
                    const std::vector<ModelInput>& test, const SingleStreamOptions& options,
                    const std::function<void(int32_t, float)>& on_epoch) {
  const auto start = std::chrono::steady_clock::now();
  const StreamIds ids(shape);
  StreamNet net(ids,
                std::max(LongestSequence(train, ids, options.max_words),
                         LongestSequence(test, ids, options.max_words)),
                options);
  torch::optim::Adam optimizer(net->parameters(), torch::optim::AdamOptions(kLearningRate));
  std::mt19937_64 rng(options.seed);
  SingleStreamFit fit;
  for (int32_t epoch = 0; epoch < options.epochs; ++epoch) {
    net->train();
    const std::vector<size_t> rows = EpochRows(train, options.normal_share, &rng);
    double loss_sum = 0;
    size_t batches = 0;
    for (size_t at = 0; at < rows.size(); at += kTrainBatch) {
      const std::vector<size_t> part(
          rows.begin() + static_cast<std::ptrdiff_t>(at),
          rows.begin() + static_cast<std::ptrdiff_t>(std::min(at + kTrainBatch, rows.size())));
      const torch::Tensor loss = BatchLoss(net, MakeTrainBatch(train, part, ids), ids);
      optimizer.zero_grad();
      loss.backward();
      torch::nn::utils::clip_grad_norm_(net->parameters(), 1.0);
      optimizer.step();
      loss_sum += loss.item<double>();
      ++batches;
    }
    fit.epoch_loss.push_back(static_cast<float>(loss_sum / std::max<size_t>(batches, 1)));
    if (on_epoch) on_epoch(epoch + 1, fit.epoch_loss.back());
  }
  fit.train_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const torch::Tensor& p : net->parameters()) fit.parameters += p.numel();
  torch::NoGradGuard no_grad;
  net->eval();
  fit.type_probability.assign(test.size() * static_cast<size_t>(shape.type_count), 0.0f);
  fit.words.assign(test.size(), {});
  for (size_t at = 0; at < test.size(); at += kDecodeBatch) {
    std::vector<size_t> rows;
    for (size_t r = at; r < std::min(at + kDecodeBatch, test.size()); ++r) rows.push_back(r);
    DecodeBatch(net, test, rows, ids, options, &fit);
  }
  return fit;
}

// An id outside its range, an empty part or a bad option, named.
base::Status CheckInputs(const SingleStreamShape& shape, const std::vector<ModelInput>& train,
                         const std::vector<ModelInput>& test, const SingleStreamOptions& options) {
  if (train.empty() || test.empty())
    return base::InvalidArgument("single-stream: no train or no test records");
  if (shape.trace_vocab < 1 || shape.type_count < 2 || shape.word_count <= kExplainUnknown)
    return base::InvalidArgument("single-stream: the vocabularies are empty");
  if (options.epochs < 1 || options.dim < 1 || options.layers < 1 || options.heads < 1 ||
      options.dim % options.heads != 0 || options.max_words < 3)
    return base::InvalidArgument(
        "single-stream: epochs, layers, heads and a dim they divide must "
        "be positive, max_words at least 3");
  for (const auto* part : {&train, &test}) {
    for (const ModelInput& input : *part) {
      const auto outside = [](const std::vector<int64_t>& v, int64_t size) {
        return std::any_of(v.begin(), v.end(), [&](int64_t id) { return id < 0 || id >= size; });
      };
      if (input.time.size() != input.token.size() * kTimeFeatures ||
          static_cast<int64_t>(input.summary.size()) != shape.summary_features)
        return base::InvalidArgument(
            "single-stream: a record's time features or summary are not of the shape's width");
      if (outside(input.token, shape.trace_vocab) ||
          outside(input.log_template, shape.template_count) ||
          outside(input.explanation, shape.word_count) || input.fault_label < 0 ||
          input.fault_label >= shape.type_count)
        return base::InvalidArgument("single-stream: a record's id lies outside its vocabulary");
    }
  }
  return base::OkStatus();
}

}  // namespace

base::StatusOr<SingleStreamFit> FitSingleStream(
    const SingleStreamShape& shape, const std::vector<ModelInput>& train,
    const std::vector<ModelInput>& test, const SingleStreamOptions& options,
    const std::function<void(int32_t epoch, float loss)>& on_epoch) {
  TELLER_RETURN_IF_ERROR(CheckInputs(shape, train, test, options));
  torch::manual_seed(options.seed);
  torch::set_num_threads(std::max(options.threads, 1));
  try {
    return Fit(shape, train, test, options, on_epoch);
  } catch (const std::exception& e) {
    std::string what = e.what();
    if (const size_t eol = what.find('\n'); eol != std::string::npos) what.resize(eol);
    return base::Internal("single-stream: torch: {}", what);
  }
}

}  // namespace teller::learn
