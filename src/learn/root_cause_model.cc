#include "learn/root_cause_model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <random>

#include <torch/nn.h>
#include <torch/nn/functional.h>
#include <torch/optim.h>
#include <torch/serialize.h>

#include "base/metrics.h"
#include "learn/explanation_text.h"

namespace teller::learn {
namespace {

using torch::Tensor;
constexpr int64_t kTypes = diagnose::kFaultCategoryCount;
constexpr int64_t kLevels = 6;

struct Batch {
  int64_t size = 0;
  Tensor token, depth, time, mask;  // [B, L]; time [B, L, F]; mask true = real token
  Tensor edge_src, edge_dst, edge_weight, self_weight;  // flattened [B * L] graph
  Tensor log_template, log_level, log_mask;             // [B, M]
  Tensor step_label, type_label, token_label;
  Tensor summary;  // [B, summary features]
  // Teacher forcing for the decoder, rows with a reference explanation only:
  // explain_rows [E] into the batch, explain_input [E, T] (begin mark first),
  // explain_target [E, T] (shifted by one, -100 past the end).
  Tensor explain_rows, explain_input, explain_target;
};

constexpr int64_t kIgnoreTarget = -100;

void AddExplanations(const std::vector<ModelInput>& inputs, const std::vector<size_t>& rows,
                     Batch* batch) {
  std::vector<int64_t> with;
  int64_t steps = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& ids = inputs[rows[i]].explanation;
    if (ids.size() < 2) continue;
    with.push_back(static_cast<int64_t>(i));
    steps = std::max<int64_t>(steps, static_cast<int64_t>(ids.size()) - 1);
  }
  if (with.empty()) return;
  const int64_t e = static_cast<int64_t>(with.size());
  std::vector<int64_t> input(e * steps, kExplainPad), target(e * steps, kIgnoreTarget);
  for (int64_t k = 0; k < e; ++k) {
    const auto& ids = inputs[rows[static_cast<size_t>(with[k])]].explanation;
    for (size_t t = 0; t + 1 < ids.size(); ++t) {
      input[k * steps + static_cast<int64_t>(t)] = ids[t];
      target[k * steps + static_cast<int64_t>(t)] = ids[t + 1];
    }
  }
  batch->explain_rows = torch::tensor(with, torch::kInt64);
  batch->explain_input = torch::tensor(input, torch::kInt64).reshape({e, steps});
  batch->explain_target = torch::tensor(target, torch::kInt64).reshape({e, steps});
}

Batch MakeBatch(const std::vector<ModelInput>& inputs, const std::vector<size_t>& rows,
                int64_t summary_width) {
  Batch batch;
  const int64_t b = static_cast<int64_t>(rows.size());
  int64_t length = 1, logs = 0;
  for (size_t r : rows) {
    length = std::max<int64_t>(length, static_cast<int64_t>(inputs[r].size()));
    logs = std::max<int64_t>(logs, static_cast<int64_t>(inputs[r].log_template.size()));
  }
  std::vector<int64_t> token(b * length, 0), depth(b * length, 0);
  std::vector<float> time(b * length * kTimeFeatures, 0.0f), token_label(b * length, 0.0f);
  std::vector<uint8_t> mask(b * length, 0);
  std::vector<int64_t> src, dst;
  std::vector<float> degree(b * length, 1.0f);
  std::vector<int64_t> log_template(b * std::max<int64_t>(logs, 1), 0),
      log_level(b * std::max<int64_t>(logs, 1), 0);
  std::vector<uint8_t> log_mask(b * std::max<int64_t>(logs, 1), 0);
  std::vector<float> step_label(b);
  std::vector<int64_t> type_label(b);
  std::vector<float> summary(b * summary_width, 0.0f);
  for (int64_t i = 0; i < b; ++i) {
    const ModelInput& in = inputs[rows[static_cast<size_t>(i)]];
    const int64_t n = static_cast<int64_t>(in.size());
    for (int64_t j = 0; j < n; ++j) {
      const int64_t at = i * length + j;
      token[at] = in.token[j];
      depth[at] = in.depth[j];
      mask[at] = 1;
      token_label[at] = in.token_label[j];
      for (int f = 0; f < kTimeFeatures; ++f)
        time[at * kTimeFeatures + f] = in.time[j * kTimeFeatures + f];
      if (in.parent[j] >= 0) {
        const int64_t parent = i * length + in.parent[j];
        src.push_back(at);
        dst.push_back(parent);
        src.push_back(parent);
        dst.push_back(at);
        degree[at] += 1;
        degree[parent] += 1;
      }
    }
    const int64_t m = static_cast<int64_t>(in.log_template.size());
    for (int64_t l = 0; l < m; ++l) {
      log_template[i * std::max<int64_t>(logs, 1) + l] = in.log_template[l];
      log_level[i * std::max<int64_t>(logs, 1) + l] =
          std::clamp<int64_t>(in.log_level[l], 0, kLevels - 1);
      log_mask[i * std::max<int64_t>(logs, 1) + l] = 1;
    }
    step_label[i] = in.step_label;
    type_label[i] = in.fault_label;
    for (int64_t f = 0; f < summary_width && static_cast<size_t>(f) < in.summary.size(); ++f) {
      summary[i * summary_width + f] = in.summary[f];
    }
  }
  std::vector<float> edge_weight(src.size()), self_weight(degree.size());
  for (size_t e = 0; e < src.size(); ++e) {
    edge_weight[e] = 1.0f / std::sqrt(degree[src[e]] * degree[dst[e]]);
  }
  for (size_t v = 0; v < degree.size(); ++v) self_weight[v] = 1.0f / degree[v];
  auto longs = [](std::vector<int64_t>& v, std::vector<int64_t> shape) {
    return torch::from_blob(v.data(), shape, torch::kInt64).clone();
  };
  auto floats = [](std::vector<float>& v, std::vector<int64_t> shape) {
    return torch::from_blob(v.data(), shape, torch::kFloat32).clone();
  };
  auto bools = [](std::vector<uint8_t>& v, std::vector<int64_t> shape) {
    return torch::from_blob(v.data(), shape, torch::kUInt8).clone().to(torch::kBool);
  };
  const int64_t m = std::max<int64_t>(logs, 1);
  batch.size = b;
  batch.token = longs(token, {b, length});
  batch.depth = longs(depth, {b, length});
  batch.time = floats(time, {b, length, kTimeFeatures});
  batch.mask = bools(mask, {b, length});
  batch.token_label = floats(token_label, {b, length});
  batch.edge_src = longs(src, {static_cast<int64_t>(src.size())});
  batch.edge_dst = longs(dst, {static_cast<int64_t>(dst.size())});
  batch.edge_weight = floats(edge_weight, {static_cast<int64_t>(edge_weight.size()), 1});
  batch.self_weight = floats(self_weight, {b * length, 1});
  batch.log_template = longs(log_template, {b, m});
  batch.log_level = longs(log_level, {b, m});
  batch.log_mask = bools(log_mask, {b, m});
  batch.step_label = floats(step_label, {b});
  batch.type_label = longs(type_label, {b});
  batch.summary = floats(summary, {b, summary_width});
  AddExplanations(inputs, rows, &batch);
  return batch;
}

struct FeedForwardImpl : torch::nn::Module {
  FeedForwardImpl(int64_t dim, double dropout)
      : expand(register_module("expand", torch::nn::Linear(dim, 2 * dim))),
        project(register_module("project", torch::nn::Linear(2 * dim, dim))),
        drop(register_module("drop", torch::nn::Dropout(dropout))) {}
  // Module names are TorchScript identifiers in the saved archive: no Python keywords.
  Tensor forward(const Tensor& x) { return drop(project(torch::gelu(expand(x)))); }
  torch::nn::Linear expand, project;
  torch::nn::Dropout drop;
};
TORCH_MODULE(FeedForward);

// Mixture-of-transformers layer: one attention over both modalities, per-modality
// pre-norms and feed-forward blocks (Liang et al.; the paper's dual-stream MoT).
struct JointLayerImpl : torch::nn::Module {
  JointLayerImpl(int64_t dim, int64_t heads, double dropout)
      : attention(register_module(
            "attention", torch::nn::MultiheadAttention(
                             torch::nn::MultiheadAttentionOptions(dim, heads).dropout(dropout)))),
        norm_log(
            register_module("norm_log", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})))),
        norm_trace(register_module("norm_trace",
                                   torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})))),
        norm_log2(
            register_module("norm_log2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})))),
        norm_trace2(register_module("norm_trace2",
                                    torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})))),
        ffn_log(register_module("ffn_log", FeedForward(dim, dropout))),
        ffn_trace(register_module("ffn_trace", FeedForward(dim, dropout))),
        drop(register_module("drop", torch::nn::Dropout(dropout))) {}

  // x [B, M + L, d]: the first `logs` positions are log tokens. ignore [B, M + L]: true = padding.
  Tensor forward(const Tensor& x, int64_t logs, const Tensor& ignore) {
    Tensor normed = torch::cat(
        {norm_log(x.narrow(1, 0, logs)), norm_trace(x.narrow(1, logs, x.size(1) - logs))}, 1);
    Tensor seq = normed.transpose(0, 1);
    Tensor attended = std::get<0>(attention(seq, seq, seq, ignore)).transpose(0, 1);
    Tensor y = x + drop(attended);
    Tensor log_part = y.narrow(1, 0, logs);
    Tensor trace_part = y.narrow(1, logs, y.size(1) - logs);
    log_part = log_part + ffn_log(norm_log2(log_part));
    trace_part = trace_part + ffn_trace(norm_trace2(trace_part));
    return torch::cat({log_part, trace_part}, 1);
  }
  torch::nn::MultiheadAttention attention;
  torch::nn::LayerNorm norm_log, norm_trace, norm_log2, norm_trace2;
  FeedForward ffn_log, ffn_trace;
  torch::nn::Dropout drop;
};
TORCH_MODULE(JointLayer);

struct NetworkImpl : torch::nn::Module {
  explicit NetworkImpl(const ModelConfig& c) : config(c) {
    const int64_t d = c.dim;
    token = register_module("token", torch::nn::Embedding(std::max<int64_t>(c.vocab_size, 1), d));
    depth = register_module("depth", torch::nn::Embedding(64, d));
    time_in = register_module("time_in", torch::nn::Linear(kTimeFeatures, d));
    time_out = register_module("time_out", torch::nn::Linear(d, d));
    for (int32_t i = 0; i < c.gcn_layers; ++i) {
      gcn.push_back(register_module("gcn" + std::to_string(i), torch::nn::Linear(d, d)));
      gcn_norm.push_back(register_module("gcn_norm" + std::to_string(i),
                                         torch::nn::LayerNorm(torch::nn::LayerNormOptions({d}))));
    }
    log_template = register_module("log_template",
                                   torch::nn::Embedding(std::max<int64_t>(c.template_count, 2), d));
    log_level = register_module("log_level", torch::nn::Embedding(kLevels, d));
    log_cls = register_parameter("log_cls", torch::randn({1, 1, d}) * 0.02);
    for (int32_t i = 0; i < c.log_layers; ++i) {
      log_layers.push_back(
          register_module("log" + std::to_string(i), JointLayer(d, c.heads, c.dropout)));
    }
    for (int32_t i = 0; i < c.joint_layers; ++i) {
      joint.push_back(
          register_module("joint" + std::to_string(i), JointLayer(d, c.heads, c.dropout)));
    }
    drop = register_module("drop", torch::nn::Dropout(c.dropout));
    if (c.summary_features > kSummaryFeatures) {
      // Record statistics mix log counts and durations: normalized with the training
      // set's running statistics (kept in the weights).
      summary_norm = register_module("summary_norm", torch::nn::BatchNorm1d(c.summary_features));
    }
    const int64_t summary_width = c.summary_features * (1 + std::max(c.summary_bins, 0));
    if (c.summary_bins > 0) {
      summary_edges =
          register_buffer("summary_edges", torch::zeros({c.summary_features, c.summary_bins + 1}));
    }
    summary_in = register_module("summary_in", torch::nn::Linear(summary_width, d));
    if (c.statistics_head) {
      statistics_step = register_module("statistics_step", torch::nn::Linear(summary_width, 1));
      statistics_type =
          register_module("statistics_type", torch::nn::Linear(summary_width, kTypes));
    }
    step_hidden = register_module("step_hidden", torch::nn::Linear(4 * d, d));
    step_out = register_module("step_out", torch::nn::Linear(d, 1));
    type_hidden = register_module("type_hidden", torch::nn::Linear(4 * d, d));
    type_out = register_module("type_out", torch::nn::Linear(d, kTypes));
    token_hidden = register_module("token_hidden", torch::nn::Linear(2 * d, d));
    token_out = register_module("token_out", torch::nn::Linear(d, 1));
    if (c.explain_vocab > 0) {
      explain_context = register_module("explain_context", torch::nn::Linear(4 * d, d));
      explain_embed = register_module("explain_embed", torch::nn::Embedding(c.explain_vocab, d));
      explain_cell = register_module("explain_cell", torch::nn::GRUCell(2 * d, d));
      explain_out = register_module("explain_out", torch::nn::Linear(d, c.explain_vocab));
      if (c.explain_by_type)
        explain_type = register_module("explain_type", torch::nn::Embedding(kTypes, d));
    }
  }

  struct Output {
    Tensor step_logit, type_logits, token_logits;
    Tensor pooled;  // [B, 4d]: what the heads and the decoder read
  };

  Output forward(const Batch& batch) {
    const int64_t b = batch.size, length = batch.token.size(1), d = config.dim;
    Tensor h = token(batch.token) + depth(batch.depth.clamp(0, 63)) +
               time_out(torch::gelu(time_in(batch.time)));
    if (!config.use_trace) h = torch::zeros_like(h);
    for (size_t i = 0; i < gcn.size(); ++i) {
      Tensor flat = h.reshape({b * length, d});
      Tensor mixed = flat * batch.self_weight;
      if (batch.edge_src.numel() > 0) {
        mixed = mixed.index_add(0, batch.edge_dst,
                                flat.index_select(0, batch.edge_src) * batch.edge_weight);
      }
      h = gcn_norm[i](h + drop(torch::gelu(gcn[i](mixed.reshape({b, length, d})))));
    }
    Tensor trace_mask = batch.mask;
    // Logs: a learned summary token first, so no record has an empty log stream.
    Tensor g = log_template(batch.log_template) + log_level(batch.log_level);
    Tensor log_mask = batch.log_mask;
    if (!config.use_logs) log_mask = torch::zeros_like(log_mask);
    g = torch::cat({log_cls.expand({b, 1, d}), g}, 1);
    Tensor log_valid = torch::cat({torch::ones({b, 1}, torch::kBool), log_mask}, 1);
    const int64_t logs = g.size(1);
    for (auto& layer : log_layers) {
      // A log-only layer: the trace part is empty.
      g = layer
              ->forward(torch::cat({g, g.narrow(1, 0, 1)}, 1), logs,
                        torch::cat({~log_valid, torch::ones({b, 1}, torch::kBool)}, 1))
              .narrow(1, 0, logs);
    }
    Tensor trace_valid = config.use_trace ? trace_mask : torch::zeros_like(trace_mask);
    // A trace-less record keeps one visible (zero) token so attention has a key.
    trace_valid = trace_valid.clone();
    trace_valid.select(1, 0).fill_(true);
    Tensor x = torch::cat({g, h}, 1);
    Tensor ignore = torch::cat({~log_valid, ~trace_valid}, 1);
    for (auto& layer : joint) x = layer->forward(x, logs, ignore);
    Tensor log_summary = x.select(1, 0);
    Tensor trace_part = x.narrow(1, logs, length);
    Tensor valid = trace_valid.unsqueeze(-1).to(torch::kFloat32);
    Tensor mean = (trace_part * valid).sum(1) / valid.sum(1).clamp_min(1.0);
    Tensor max = trace_part.masked_fill(~trace_valid.unsqueeze(-1), -1e4).amax(1);
    Tensor summary_features = batch.summary;
    if (summary_norm) {
      // A batch of one has no spread: it is normalized with the running statistics.
      const bool single = is_training() && b == 1;
      summary_features = torch::batch_norm(
          summary_features, summary_norm->weight, summary_norm->bias, summary_norm->running_mean,
          summary_norm->running_var, is_training() && !single, 0.1, 1e-5, false);
    }
    if (config.summary_bins > 0) {
      summary_features = torch::cat({summary_features, PiecewiseLinear(batch.summary)}, 1);
    }
    if (!config.use_trace) summary_features = torch::zeros_like(summary_features);
    Tensor summary = torch::gelu(summary_in(summary_features));
    Tensor sequence = torch::cat({mean, max, log_summary}, 1);
    if (is_training() && config.modality_dropout > 0) {
      Tensor keep = torch::rand({b, 1}) >= config.modality_dropout;
      sequence = sequence * keep.to(torch::kFloat32);
    }
    Tensor pooled = torch::cat({sequence, summary}, 1);
    Output out;
    out.pooled = pooled;
    out.step_logit = step_out(drop(torch::gelu(step_hidden(pooled)))).squeeze(-1);
    out.type_logits = type_out(drop(torch::gelu(type_hidden(pooled))));
    if (statistics_step) {
      out.step_logit = out.step_logit + statistics_step(drop(summary_features)).squeeze(-1);
      out.type_logits = out.type_logits + statistics_type(drop(summary_features));
    }
    Tensor context = mean.unsqueeze(1).expand({b, length, d});
    out.token_logits =
        token_out(torch::gelu(token_hidden(torch::cat({trace_part, context}, -1)))).squeeze(-1);
    return out;
  }

  // Teacher-forced word logits [E, T, V] of the rows with a reference explanation.
  Tensor ExplainLogits(const Tensor& pooled, const Batch& batch) {
    Tensor context = explain_context(pooled.index_select(0, batch.explain_rows));
    if (explain_type)
      context = context + explain_type(batch.type_label.index_select(0, batch.explain_rows));
    context = torch::tanh(context);
    Tensor h = context;
    std::vector<Tensor> logits;
    for (int64_t t = 0; t < batch.explain_input.size(1); ++t) {
      Tensor x = torch::cat({explain_embed(batch.explain_input.select(1, t)), context}, 1);
      h = explain_cell(x, h);
      logits.push_back(explain_out(drop(h)));
    }
    return torch::stack(logits, 1);
  }

  // Greedy decoding from one pooled state [1, 4d]: the word ids after the begin mark,
  // up to the end mark (not included) or the length bound.
  std::vector<int32_t> Explain(const Tensor& pooled, int64_t type) {
    Tensor context = explain_context(pooled);
    if (explain_type) context = context + explain_type(torch::full({1}, type, torch::kInt64));
    context = torch::tanh(context);
    Tensor h = context;
    std::vector<int32_t> words;
    int64_t previous = kExplainBegin;
    while (words.size() + 2 < kMaxExplanationTokens) {
      Tensor x = torch::cat({explain_embed(torch::full({1}, previous, torch::kInt64)), context}, 1);
      h = explain_cell(x, h);
      previous = explain_out(h).argmax(1).item<int64_t>();
      if (previous == kExplainEnd) break;
      words.push_back(static_cast<int32_t>(previous));
    }
    return words;
  }

  // x [B, F] -> [B, F * bins]: per bin, 0 below it, 1 above it, linear inside; a bin
  // of zero width (repeated quantiles) is a step at its edge.
  Tensor PiecewiseLinear(const Tensor& x) const {
    const int64_t bins = config.summary_bins;
    Tensor low = summary_edges.narrow(1, 0, bins), high = summary_edges.narrow(1, 1, bins);
    Tensor width = high - low;
    Tensor v = x.unsqueeze(-1);
    Tensor ramp = ((v - low) / width.clamp_min(1e-6)).clamp(0, 1);
    Tensor step = (v >= low).to(torch::kFloat32);
    return torch::where(width > 1e-6, ramp, step).reshape({x.size(0), -1});
  }

  ModelConfig config;
  Tensor summary_edges;  // [F, bins + 1], from the training records
  torch::nn::Embedding token{nullptr}, depth{nullptr}, log_template{nullptr}, log_level{nullptr};
  torch::nn::Linear time_in{nullptr}, time_out{nullptr}, summary_in{nullptr};
  torch::nn::Linear statistics_step{nullptr}, statistics_type{nullptr};
  torch::nn::BatchNorm1d summary_norm{nullptr};
  std::vector<torch::nn::Linear> gcn;
  std::vector<torch::nn::LayerNorm> gcn_norm;
  Tensor log_cls;
  std::vector<JointLayer> log_layers, joint;
  torch::nn::Dropout drop{nullptr};
  torch::nn::Linear step_hidden{nullptr}, step_out{nullptr}, type_hidden{nullptr},
      type_out{nullptr}, token_hidden{nullptr}, token_out{nullptr};
  torch::nn::Linear explain_context{nullptr}, explain_out{nullptr};
  torch::nn::Embedding explain_embed{nullptr}, explain_type{nullptr};
  torch::nn::GRUCell explain_cell{nullptr};
};
TORCH_MODULE(Network);

struct LossWeights {
  double step = 1, type = 1, token = 1, explain = 1;
  double step_positive = 1;  // BCE pos_weight
  double token_positive = 1;
};

Tensor BatchLoss(NetworkImpl& network, const NetworkImpl::Output& out, const Batch& batch,
                 const LossWeights& w, bool use_trace) {
  Tensor step = torch::binary_cross_entropy_with_logits(out.step_logit, batch.step_label, {},
                                                        torch::full({1}, w.step_positive));
  // Fault type is learned on abnormal records only; normal ones are the step head's.
  Tensor abnormal = batch.step_label > 0.5;
  Tensor loss = w.step * step;
  if (abnormal.any().item<bool>()) {
    Tensor type = torch::nn::functional::cross_entropy(out.type_logits.index({abnormal}),
                                                       batch.type_label.index({abnormal}));
    loss = loss + w.type * type;
  }
  if (use_trace) {
    Tensor valid = batch.mask.to(torch::kFloat32);
    Tensor token = torch::binary_cross_entropy_with_logits(out.token_logits, batch.token_label, {},
                                                           torch::full({1}, w.token_positive),
                                                           at::Reduction::None);
    loss = loss + w.token * (token * valid).sum() / valid.sum().clamp_min(1.0);
  }
  if (network.explain_cell && batch.explain_rows.defined()) {
    Tensor logits = network.ExplainLogits(out.pooled, batch);
    Tensor nll = torch::nn::functional::cross_entropy(
        logits.reshape({-1, logits.size(2)}), batch.explain_target.reshape({-1}),
        torch::nn::functional::CrossEntropyFuncOptions().ignore_index(kIgnoreTarget));
    loss = loss + w.explain * nll;
  }
  return loss;
}

// Fisher-Yates with a fixed generator, so the order is the same everywhere.
void Shuffle(std::vector<size_t>* order, std::mt19937_64* rng) {
  for (size_t i = order->size(); i > 1; --i) {
    const size_t j = static_cast<size_t>((*rng)() % i);
    std::swap((*order)[i - 1], (*order)[j]);
  }
}

// Quantile bin edges of each summary feature over the training records.
void FitSummaryEdges(const std::vector<ModelInput>& train, NetworkImpl* network) {
  const int64_t features = network->config.summary_features, bins = network->config.summary_bins;
  std::vector<float> column(train.size());
  auto edges = network->summary_edges.accessor<float, 2>();
  for (int64_t f = 0; f < features; ++f) {
    for (size_t r = 0; r < train.size(); ++r) {
      column[r] = static_cast<size_t>(f) < train[r].summary.size() ? train[r].summary[f] : 0.0f;
    }
    std::sort(column.begin(), column.end());
    for (int64_t k = 0; k <= bins; ++k) {
      const auto at = static_cast<size_t>(static_cast<double>(k) / bins *
                                          static_cast<double>(column.size() - 1));
      edges[f][k] = column[at];
    }
  }
}

}  // namespace

struct RootCauseModel::Impl {
  ModelConfig config;
  Network network{nullptr};
  LossWeights weights;
};

RootCauseModel::RootCauseModel() = default;
RootCauseModel::~RootCauseModel() = default;
RootCauseModel::RootCauseModel(RootCauseModel&&) noexcept = default;
RootCauseModel& RootCauseModel::operator=(RootCauseModel&&) noexcept = default;

base::StatusOr<RootCauseModel> RootCauseModel::Create(const ModelConfig& config) {
  if (config.vocab_size <= 0) return base::InvalidArgument("model: vocab_size must be positive");
  if (config.dim <= 0 || config.heads <= 0 || config.dim % config.heads != 0) {
    return base::InvalidArgument("model: dim {} must be a positive multiple of heads {}",
                                 config.dim, config.heads);
  }
  if (!config.use_trace && !config.use_logs) {
    return base::InvalidArgument("model: at least one of trace and logs must be used");
  }
  if (!(config.modality_dropout >= 0 && config.modality_dropout < 1)) {
    return base::InvalidArgument("model: modality_dropout {} must be in [0, 1)",
                                 config.modality_dropout);
  }
  if (config.summary_bins < 0 || config.summary_bins > 64) {
    return base::InvalidArgument("model: summary_bins {} out of range [0, 64]",
                                 config.summary_bins);
  }
  if (config.summary_features < kSummaryFeatures || config.summary_features > 4096) {
    return base::InvalidArgument("model: summary_features {} out of range",
                                 config.summary_features);
  }
  RootCauseModel model;
  model.impl_ = std::make_unique<Impl>();
  model.impl_->config = config;
  torch::manual_seed(config.init_seed);
  model.impl_->network = Network(config);
  return model;
}

const ModelConfig& RootCauseModel::config() const { return impl_->config; }

int64_t RootCauseModel::parameter_count() const {
  int64_t count = 0;
  for (const Tensor& p : impl_->network->parameters()) count += p.numel();
  return count;
}

// The epoch's records: every abnormal one and each normal one with probability share.
std::vector<size_t> SampleNormals(const std::vector<ModelInput>& train,
                                  const std::vector<size_t>& order, double share,
                                  std::mt19937_64* rng) {
  if (share >= 1.0) return order;
  std::uniform_real_distribution<double> draw(0.0, 1.0);
  std::vector<size_t> kept;
  for (size_t row : order) {
    if (train[row].step_label > 0.5f || draw(*rng) < share) kept.push_back(row);
  }
  return kept;
}

base::Status RootCauseModel::Train(const std::vector<ModelInput>& train,
                                   const std::vector<ModelInput>& val, const TrainConfig& config,
                                   const std::function<void(const EpochReport&)>& on_epoch) {
  if (train.empty()) return base::InvalidArgument("train: no training records");
  torch::manual_seed(config.seed);
  torch::set_num_threads(std::max(config.threads, 1));
  Impl& m = *impl_;
  // Positive weights from the training labels, capped so rare labels do not dominate.
  double steps_positive = 0, tokens_positive = 0, tokens = 0;
  for (const ModelInput& in : train) {
    steps_positive += in.step_label;
    for (float t : in.token_label) tokens_positive += t;
    tokens += static_cast<double>(in.size());
  }
  m.weights.step = config.step_weight;
  m.weights.type = config.type_weight;
  m.weights.token = config.token_weight;
  m.weights.explain = config.explain_weight;
  const double normal_share = std::clamp(config.normal_share, 0.0, 1.0);
  m.weights.step_positive = std::clamp(
      (train.size() - steps_positive) * normal_share / std::max(steps_positive, 1.0), 1.0, 20.0);
  m.weights.token_positive =
      std::clamp((tokens - tokens_positive) / std::max(tokens_positive, 1.0), 1.0, 50.0);

  if (m.config.summary_bins > 0) FitSummaryEdges(train, m.network.get());
  torch::optim::AdamW optimizer(
      m.network->parameters(),
      torch::optim::AdamWOptions(config.learning_rate).weight_decay(config.weight_decay));
  std::mt19937_64 rng(config.seed);
  std::vector<size_t> order(train.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  double best_score = -1;
  int32_t since_best = 0;
  std::vector<Tensor> best_state;
  auto snapshot = [&] {
    best_state.clear();
    for (const Tensor& p : m.network->parameters()) best_state.push_back(p.detach().clone());
  };
  for (int32_t epoch = 1; epoch <= config.epochs; ++epoch) {
    const auto start = std::chrono::steady_clock::now();
    m.network->train();
    Shuffle(&order, &rng);
    const std::vector<size_t> epoch_order = SampleNormals(train, order, normal_share, &rng);
    double total = 0;
    int64_t batches = 0;
    for (size_t at = 0; at < epoch_order.size(); at += static_cast<size_t>(config.batch_size)) {
      base::ReportProgress(config.progress, "train", at, epoch_order.size());
      std::vector<size_t> rows(
          epoch_order.begin() + static_cast<ptrdiff_t>(at),
          epoch_order.begin() +
              static_cast<ptrdiff_t>(std::min(epoch_order.size(), at + config.batch_size)));
      Batch batch = MakeBatch(train, rows, m.config.summary_features);
      optimizer.zero_grad();
      Tensor loss =
          BatchLoss(*m.network, m.network->forward(batch), batch, m.weights, m.config.use_trace);
      loss.backward();
      torch::nn::utils::clip_grad_norm_(m.network->parameters(), 1.0);
      optimizer.step();
      total += loss.item<double>();
      ++batches;
    }
    if (config.progress) config.progress->Finish("train");
    EpochReport report;
    report.epoch = epoch;
    report.epochs = config.epochs;
    report.train_loss = total / std::max<int64_t>(batches, 1);
    const std::vector<ModelInput>& check = val.empty() ? train : val;
    report.val_loss = Loss(check);
    const std::vector<Prediction> predictions = Predict(check);
    int64_t tp = 0, fp = 0, fn = 0, ttp = 0, tfp = 0, tfn = 0;
    std::array<int64_t, kTypes> type_tp{}, type_fp{}, type_fn{};
    for (size_t i = 0; i < check.size(); ++i) {
      const bool truth = check[i].step_label > 0.5f, said = predictions[i].step_probability > 0.5f;
      tp += truth && said;
      fp += !truth && said;
      fn += truth && !said;
      const auto type = static_cast<int64_t>(DecideCategory(said, predictions[i].type_probability));
      const int64_t label = check[i].fault_label;
      if (type == label)
        ++type_tp[type];
      else {
        ++type_fp[type];
        ++type_fn[label];
      }
      for (size_t j = 0; j < check[i].size(); ++j) {
        const bool t = check[i].token_label[j] > 0.5f,
                   s = predictions[i].token_probability[j] > 0.5f;
        ttp += t && s;
        tfp += !t && s;
        tfn += t && !s;
      }
    }
    report.val_step_f1 = base::F1FromCounts(tp, fp, fn);
    report.val_token_f1 = base::F1FromCounts(ttp, tfp, tfn);
    std::array<base::ClassCounts, kTypes> type_counts;
    for (int64_t c = 0; c < kTypes; ++c) type_counts[c] = {type_tp[c], type_fp[c], type_fn[c]};
    report.val_type_macro_f1 = base::MacroF1FromCounts(type_counts);
    const double score = report.val_step_f1 + report.val_type_macro_f1 + report.val_token_f1;
    if (score > best_score) {
      best_score = score;
      since_best = 0;
      report.best = true;
      snapshot();
    } else {
      ++since_best;
    }
    report.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (on_epoch) on_epoch(report);
    if (since_best >= config.patience) break;
  }
  if (!best_state.empty()) {
    torch::NoGradGuard no_grad;
    auto parameters = m.network->parameters();
    for (size_t i = 0; i < parameters.size(); ++i) parameters[i].copy_(best_state[i]);
  }
  m.network->eval();
  return base::OkStatus();
}

std::vector<Prediction> RootCauseModel::Predict(const std::vector<ModelInput>& inputs) const {
  torch::NoGradGuard no_grad;
  Impl& m = *impl_;
  const bool was_training = m.network->is_training();
  m.network->eval();
  std::vector<Prediction> out(inputs.size());
  constexpr size_t kBatch = 16;
  for (size_t at = 0; at < inputs.size(); at += kBatch) {
    std::vector<size_t> rows;
    for (size_t r = at; r < std::min(inputs.size(), at + kBatch); ++r) rows.push_back(r);
    Batch batch = MakeBatch(inputs, rows, m.config.summary_features);
    NetworkImpl::Output o = m.network->forward(batch);
    Tensor step = torch::sigmoid(o.step_logit).contiguous();
    Tensor type = torch::softmax(o.type_logits, -1).contiguous();
    Tensor token = torch::sigmoid(o.token_logits).contiguous();
    for (size_t i = 0; i < rows.size(); ++i) {
      Prediction& p = out[rows[i]];
      p.step_probability = step[static_cast<int64_t>(i)].item<float>();
      for (int64_t c = 0; c < kTypes; ++c)
        p.type_probability[c] = type[static_cast<int64_t>(i)][c].item<float>();
      const int64_t n = static_cast<int64_t>(inputs[rows[i]].size());
      Tensor row = token[static_cast<int64_t>(i)].narrow(0, 0, n);
      p.token_probability.assign(row.data_ptr<float>(), row.data_ptr<float>() + n);
      if (!m.config.use_trace)
        std::fill(p.token_probability.begin(), p.token_probability.end(), 0.0f);
    }
  }
  if (was_training) m.network->train();
  return out;
}

std::vector<std::vector<int32_t>> RootCauseModel::Explain(
    const std::vector<ModelInput>& inputs) const {
  torch::NoGradGuard no_grad;
  Impl& m = *impl_;
  std::vector<std::vector<int32_t>> out(inputs.size());
  if (!m.network->explain_cell) return out;
  const bool was_training = m.network->is_training();
  m.network->eval();
  for (size_t r = 0; r < inputs.size(); ++r) {
    Batch batch = MakeBatch(inputs, {r}, m.config.summary_features);
    const NetworkImpl::Output o = m.network->forward(batch);
    // The type head's choice among the faults (DecideCategory of an abnormal record).
    const int64_t type = o.type_logits[0].narrow(0, 1, kTypes - 1).argmax().item<int64_t>() + 1;
    out[r] = m.network->Explain(o.pooled, type);
  }
  if (was_training) m.network->train();
  return out;
}

double RootCauseModel::Loss(const std::vector<ModelInput>& inputs) const {
  torch::NoGradGuard no_grad;
  Impl& m = *impl_;
  const bool was_training = m.network->is_training();
  m.network->eval();
  double total = 0;
  size_t batches = 0;
  constexpr size_t kBatch = 16;
  for (size_t at = 0; at < inputs.size(); at += kBatch) {
    std::vector<size_t> rows;
    for (size_t r = at; r < std::min(inputs.size(), at + kBatch); ++r) rows.push_back(r);
    Batch batch = MakeBatch(inputs, rows, m.config.summary_features);
    total += BatchLoss(*m.network, m.network->forward(batch), batch, m.weights, m.config.use_trace)
                 .item<double>();
    ++batches;
  }
  if (was_training) m.network->train();
  return batches ? total / batches : 0.0;
}

NamedTensors RootCauseModel::ExportWeights() const {
  NamedTensors out;
  auto add = [&](const std::string& name, const Tensor& tensor) {
    if (tensor.scalar_type() != torch::kFloat32) return;  // batch norm's step counter
    Tensor t = tensor.detach().contiguous().cpu();
    NamedTensor named;
    named.name = name;
    named.shape.assign(t.sizes().begin(), t.sizes().end());
    named.values.assign(t.data_ptr<float>(), t.data_ptr<float>() + t.numel());
    out.push_back(std::move(named));
  };
  for (const auto& item : impl_->network->named_parameters()) add(item.key(), item.value());
  for (const auto& item : impl_->network->named_buffers()) add(item.key(), item.value());
  return out;
}

base::Status RootCauseModel::ImportWeights(const NamedTensors& tensors) {
  std::map<std::string, const NamedTensor*> by_name;
  for (const NamedTensor& t : tensors) by_name[t.name] = &t;
  torch::NoGradGuard no_grad;
  auto copy = [&](const std::string& name, Tensor& target) -> base::Status {
    if (target.scalar_type() != torch::kFloat32) return base::OkStatus();
    const auto found = by_name.find(name);
    if (found == by_name.end()) return base::InvalidArgument("weights: no tensor {}", name);
    const NamedTensor& source = *found->second;
    if (std::vector<int64_t>(target.sizes().begin(), target.sizes().end()) != source.shape)
      return base::InvalidArgument("weights: tensor {} has another shape than the network's", name);
    target.copy_(torch::from_blob(const_cast<float*>(source.values.data()), target.sizes(),
                                  torch::kFloat32));
    return base::OkStatus();
  };
  for (auto& item : impl_->network->named_parameters())
    TELLER_RETURN_IF_ERROR(copy(item.key(), item.value()));
  for (auto& item : impl_->network->named_buffers())
    TELLER_RETURN_IF_ERROR(copy(item.key(), item.value()));
  impl_->network->eval();
  return base::OkStatus();
}

base::Status RootCauseModel::LoadTorchArchive(const std::string& path) {
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(path);
    impl_->network->load(archive);
  } catch (const std::exception& e) {
    std::string what = e.what();
    if (const size_t eol = what.find('\n'); eol != std::string::npos) what.resize(eol);
    return base::InvalidArgument("{}: not weights of this model configuration: {}", path, what);
  }
  impl_->network->eval();
  return base::OkStatus();
}

}  // namespace teller::learn
