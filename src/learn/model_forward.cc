#include "learn/model_forward.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <map>
#include <thread>

#include <fmt/format.h>

#include "learn/explanation_text.h"

namespace teller::learn {
namespace {

constexpr int64_t kTypes = diagnose::kFaultCategoryCount;
constexpr int64_t kLevels = 6;
constexpr int64_t kDepths = 64;
constexpr float kNormEpsilon = 1e-5f;

float Gelu(float x) { return 0.5f * x * (1.0f + std::erf(x * static_cast<float>(M_SQRT1_2))); }
void GeluInPlace(std::vector<float>* x) {
  for (float& v : *x) v = Gelu(v);
}
float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// The two hot loops, built for AVX2/FMA too where the CPU has them (the binary stays
// portable: the loader picks the clone).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TELLER_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define TELLER_VECTOR_CLONES
#endif

// y [rows, out] += x [rows, in] * weight_t [in, out].
TELLER_VECTOR_CLONES void MultiplyAdd(const float* x, int64_t rows, int64_t in,
                                      const float* weight_t, int64_t out, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = y + r * out;
    for (int64_t i = 0; i < in; ++i) {
      const float scale = x[r * in + i];
      const float* weights = weight_t + i * out;
      for (int64_t o = 0; o < out; ++o) row[o] += scale * weights[o];
    }
  }
}

// One head of attention for one query: scores over the keys (key_t [size, keys],
// transposed so each query element scales a contiguous row), softmax, then the
// weighted sum of the value rows (values at stride `value_stride`) into out [size].
TELLER_VECTOR_CLONES void AttendOneQuery(const float* query, const float* key_t, int64_t keys,
                                         int64_t size, const float* values,
                                         const int64_t* value_rows, int64_t value_stride,
                                         float* scores, float* out) {
  std::fill(scores, scores + keys, 0.0f);
  for (int64_t e = 0; e < size; ++e) {
    const float q = query[e];
    const float* column = key_t + e * keys;
    for (int64_t c = 0; c < keys; ++c) scores[c] += q * column[c];
  }
  const float top = *std::max_element(scores, scores + keys);
  float total = 0;
  for (int64_t c = 0; c < keys; ++c) total += (scores[c] = std::exp(scores[c] - top));
  for (int64_t c = 0; c < keys; ++c) {
    const float p = scores[c] / total;
    const float* value = values + value_rows[c] * value_stride;
    for (int64_t e = 0; e < size; ++e) out[e] += p * value[e];
  }
}

// Tensors by name, with the first missing or misshapen one kept as the error.
class WeightSource {
 public:
  explicit WeightSource(const NamedTensors& tensors) {
    for (const NamedTensor& t : tensors) by_name_[t.name] = &t;
  }
  const std::vector<float>& Get(const std::string& name, std::vector<int64_t> shape) {
    static const std::vector<float> kNone;
    const auto found = by_name_.find(name);
    if (found == by_name_.end()) {
      Fail(fmt::format("weights: no tensor {}", name));
      return kNone;
    }
    if (found->second->shape != shape) {
      Fail(fmt::format("weights: tensor {} has shape [{}], the configuration needs [{}]", name,
                       fmt::join(found->second->shape, ", "), fmt::join(shape, ", ")));
      return kNone;
    }
    return found->second->values;
  }
  const base::Status& status() const { return status_; }

 private:
  void Fail(std::string message) {
    if (status_.ok()) status_ = base::InvalidArgument("{}", message);
  }
  std::map<std::string, const NamedTensor*> by_name_;
  base::Status status_;
};

struct Linear {
  int64_t in = 0, out = 0;
  std::vector<float> weight_t;  // [in, out]: each input scales one contiguous row
  std::vector<float> bias;

  void Load(WeightSource* w, const std::string& name, int64_t in_size, int64_t out_size) {
    Load(w, name + ".weight", name + ".bias", in_size, out_size);
  }
  void Load(WeightSource* w, const std::string& weight_name, const std::string& bias_name,
            int64_t in_size, int64_t out_size) {
    in = in_size;
    out = out_size;
    const std::vector<float>& weight = w->Get(weight_name, {out, in});
    bias = w->Get(bias_name, {out});
    if (weight.empty() || bias.empty()) return;
    weight_t.resize(static_cast<size_t>(in * out));
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i) weight_t[i * out + o] = weight[o * in + i];
  }
  // y [rows, out] = x [rows, in] W^T + b.
  std::vector<float> Apply(const float* x, int64_t rows) const {
    std::vector<float> y(static_cast<size_t>(rows * out));
    for (int64_t r = 0; r < rows; ++r) std::copy(bias.begin(), bias.end(), y.begin() + r * out);
    MultiplyAdd(x, rows, in, weight_t.data(), out, y.data());
    return y;
  }
  std::vector<float> Apply(const std::vector<float>& x) const {
    return Apply(x.data(), static_cast<int64_t>(x.size()) / in);
  }
};

struct LayerNorm {
  std::vector<float> weight, bias;
  void Load(WeightSource* w, const std::string& name, int64_t dim) {
    weight = w->Get(name + ".weight", {dim});
    bias = w->Get(name + ".bias", {dim});
  }
  void Apply(const float* x, float* y) const {
    const size_t dim = weight.size();
    float mean = 0, variance = 0;
    for (size_t i = 0; i < dim; ++i) mean += x[i];
    mean /= static_cast<float>(dim);
    for (size_t i = 0; i < dim; ++i) variance += (x[i] - mean) * (x[i] - mean);
    const float scale = 1.0f / std::sqrt(variance / static_cast<float>(dim) + kNormEpsilon);
    for (size_t i = 0; i < dim; ++i) y[i] = (x[i] - mean) * scale * weight[i] + bias[i];
  }
};

struct Embedding {
  int64_t rows = 0, dim = 0;
  std::vector<float> table;
  void Load(WeightSource* w, const std::string& name, int64_t row_count, int64_t width) {
    rows = row_count;
    dim = width;
    table = w->Get(name + ".weight", {rows, dim});
  }
  // Ids out of range (never made by MakeInputs with the model's vocabularies) read row 0.
  void AddTo(int64_t id, float* out) const {
    if (id < 0 || id >= rows) id = 0;
    const float* row = table.data() + id * dim;
    for (int64_t i = 0; i < dim; ++i) out[i] += row[i];
  }
};

struct FeedForward {
  Linear expand, project;
  void Load(WeightSource* w, const std::string& name, int64_t dim) {
    expand.Load(w, name + ".expand", dim, 2 * dim);
    project.Load(w, name + ".project", 2 * dim, dim);
  }
};

// torch::nn::MultiheadAttention without dropout: packed q/k/v projection, q scaled by
// 1/sqrt(head size), softmax over the keys not masked, output projection.
struct Attention {
  int64_t dim = 0, heads = 0;
  Linear in_proj, out_proj;

  void Load(WeightSource* w, const std::string& name, int64_t d, int64_t head_count) {
    dim = d;
    heads = head_count;
    in_proj.Load(w, name + ".in_proj_weight", name + ".in_proj_bias", d, 3 * d);
    out_proj.Load(w, name + ".out_proj", d, d);
  }

  std::vector<float> Apply(const std::vector<float>& x, const std::vector<uint8_t>& valid) const {
    const int64_t rows = static_cast<int64_t>(valid.size()), size = dim / heads;
    const std::vector<float> qkv = in_proj.Apply(x.data(), rows);
    const float scale = 1.0f / std::sqrt(static_cast<float>(size));
    std::vector<int64_t> keys;
    for (int64_t c = 0; c < rows; ++c)
      if (valid[c]) keys.push_back(c);
    const int64_t key_count = static_cast<int64_t>(keys.size());
    std::vector<float> key_t(static_cast<size_t>(size * key_count)), scores(keys.size());
    std::vector<float> query(static_cast<size_t>(size));
    std::vector<float> attended(static_cast<size_t>(rows * dim), 0.0f);
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t q_at = h * size, k_at = dim + h * size, v_at = 2 * dim + h * size;
      for (int64_t c = 0; c < key_count; ++c)
        for (int64_t e = 0; e < size; ++e)
          key_t[e * key_count + c] = qkv[keys[c] * 3 * dim + k_at + e];
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t e = 0; e < size; ++e) query[e] = qkv[r * 3 * dim + q_at + e] * scale;
        AttendOneQuery(query.data(), key_t.data(), key_count, size, qkv.data() + v_at, keys.data(),
                       3 * dim, scores.data(), attended.data() + r * dim + h * size);
      }
    }
    return out_proj.Apply(attended.data(), rows);
  }
};

// Mixture-of-transformers layer (JointLayerImpl): rows before `logs` are log tokens.
struct JointLayer {
  Attention attention;
  LayerNorm norm_log, norm_trace, norm_log2, norm_trace2;
  FeedForward ffn_log, ffn_trace;

  void Load(WeightSource* w, const std::string& name, int64_t dim, int64_t heads) {
    attention.Load(w, name + ".attention", dim, heads);
    norm_log.Load(w, name + ".norm_log", dim);
    norm_trace.Load(w, name + ".norm_trace", dim);
    norm_log2.Load(w, name + ".norm_log2", dim);
    norm_trace2.Load(w, name + ".norm_trace2", dim);
    ffn_log.Load(w, name + ".ffn_log", dim);
    ffn_trace.Load(w, name + ".ffn_trace", dim);
  }

  void Apply(std::vector<float>* x, int64_t logs, const std::vector<uint8_t>& valid) const {
    const int64_t rows = static_cast<int64_t>(valid.size()), dim = attention.dim;
    std::vector<float> normed(x->size());
    for (int64_t r = 0; r < rows; ++r)
      (r < logs ? norm_log : norm_trace).Apply(x->data() + r * dim, normed.data() + r * dim);
    const std::vector<float> attended = attention.Apply(normed, valid);
    for (size_t i = 0; i < x->size(); ++i) (*x)[i] += attended[i];
    ApplyFeedForward(x->data(), logs, norm_log2, ffn_log);
    ApplyFeedForward(x->data() + logs * dim, rows - logs, norm_trace2, ffn_trace);
  }

  static void ApplyFeedForward(float* x, int64_t rows, const LayerNorm& norm,
                               const FeedForward& ffn) {
    if (rows == 0) return;
    const int64_t dim = ffn.project.out;
    std::vector<float> normed(static_cast<size_t>(rows * dim));
    for (int64_t r = 0; r < rows; ++r) norm.Apply(x + r * dim, normed.data() + r * dim);
    std::vector<float> hidden = ffn.expand.Apply(normed);
    GeluInPlace(&hidden);
    const std::vector<float> y = ffn.project.Apply(hidden);
    for (size_t i = 0; i < y.size(); ++i) x[i] += y[i];
  }
};

}  // namespace

struct ModelForward::Network {
  ModelConfig config;
  int64_t dim = 0, summary_width = 0;
  Embedding token, depth, log_template, log_level;
  Linear time_in, time_out;
  std::vector<Linear> gcn;
  std::vector<LayerNorm> gcn_norm;
  std::vector<float> log_cls;
  std::vector<JointLayer> log_layers, joint;
  bool has_summary_norm = false;
  std::vector<float> norm_weight, norm_bias, norm_mean, norm_variance;
  std::vector<float> summary_edges;  // [features, bins + 1]
  Linear summary_in, statistics_step, statistics_type;
  Linear step_hidden, step_out, type_hidden, type_out, token_hidden, token_out;
  // The explanation decoder (config.explain_vocab > 0): torch's GRUCell, gates r, z, n.
  Linear explain_context, explain_input_gates, explain_hidden_gates, explain_out;
  Embedding explain_embed, explain_type;

  base::Status Load(const ModelConfig& c, const NamedTensors& tensors);
  // `pooled`, when given, receives the pooled record state (4 x dim).
  Prediction Predict(const ModelInput& in, std::vector<float>* pooled = nullptr) const;
  std::vector<int32_t> Explain(const std::vector<float>& pooled, int64_t type) const;
  std::vector<float> TraceTokens(const ModelInput& in, int64_t length) const;
  std::vector<float> LogTokens(const ModelInput& in, std::vector<uint8_t>* valid) const;
  std::vector<float> SummaryFeatures(const ModelInput& in) const;
};

base::Status ModelForward::Network::Load(const ModelConfig& c, const NamedTensors& tensors) {
  config = c;
  const int64_t d = dim = c.dim;
  WeightSource w(tensors);
  token.Load(&w, "token", std::max<int64_t>(c.vocab_size, 1), d);
  depth.Load(&w, "depth", kDepths, d);
  time_in.Load(&w, "time_in", kTimeFeatures, d);
  time_out.Load(&w, "time_out", d, d);
  gcn.resize(static_cast<size_t>(c.gcn_layers));
  gcn_norm.resize(gcn.size());
  for (size_t i = 0; i < gcn.size(); ++i) {
    gcn[i].Load(&w, fmt::format("gcn{}", i), d, d);
    gcn_norm[i].Load(&w, fmt::format("gcn_norm{}", i), d);
  }
  log_template.Load(&w, "log_template", std::max<int64_t>(c.template_count, 2), d);
  log_level.Load(&w, "log_level", kLevels, d);
  log_cls = w.Get("log_cls", {1, 1, d});
  log_layers.resize(static_cast<size_t>(c.log_layers));
  for (size_t i = 0; i < log_layers.size(); ++i)
    log_layers[i].Load(&w, fmt::format("log{}", i), d, c.heads);
  joint.resize(static_cast<size_t>(c.joint_layers));
  for (size_t i = 0; i < joint.size(); ++i)
    joint[i].Load(&w, fmt::format("joint{}", i), d, c.heads);
  const int64_t features = c.summary_features;
  has_summary_norm = features > kSummaryFeatures;
  if (has_summary_norm) {
    norm_weight = w.Get("summary_norm.weight", {features});
    norm_bias = w.Get("summary_norm.bias", {features});
    norm_mean = w.Get("summary_norm.running_mean", {features});
    norm_variance = w.Get("summary_norm.running_var", {features});
  }
  if (c.summary_bins > 0) summary_edges = w.Get("summary_edges", {features, c.summary_bins + 1});
  summary_width = features * (1 + std::max(c.summary_bins, 0));
  summary_in.Load(&w, "summary_in", summary_width, d);
  if (c.statistics_head) {
    statistics_step.Load(&w, "statistics_step", summary_width, 1);
    statistics_type.Load(&w, "statistics_type", summary_width, kTypes);
  }
  step_hidden.Load(&w, "step_hidden", 4 * d, d);
  step_out.Load(&w, "step_out", d, 1);
  type_hidden.Load(&w, "type_hidden", 4 * d, d);
  type_out.Load(&w, "type_out", d, kTypes);
  token_hidden.Load(&w, "token_hidden", 2 * d, d);
  token_out.Load(&w, "token_out", d, 1);
  if (c.explain_vocab > 0) {
    explain_context.Load(&w, "explain_context", 4 * d, d);
    explain_embed.Load(&w, "explain_embed", c.explain_vocab, d);
    explain_input_gates.Load(&w, "explain_cell.weight_ih", "explain_cell.bias_ih", 2 * d, 3 * d);
    explain_hidden_gates.Load(&w, "explain_cell.weight_hh", "explain_cell.bias_hh", d, 3 * d);
    explain_out.Load(&w, "explain_out", d, c.explain_vocab);
    if (c.explain_by_type) explain_type.Load(&w, "explain_type", kTypes, d);
  }
  return w.status();
}

// The trace encoder: embeddings and time MLP, then GCN layers over the parent/child
// graph (symmetric normalization with self loops). `length` rows; rows past the
// record's tokens are padding (token 0, depth 0, no time, no edges).
std::vector<float> ModelForward::Network::TraceTokens(const ModelInput& in, int64_t length) const {
  const int64_t n = static_cast<int64_t>(in.size()), d = dim;
  std::vector<float> time(static_cast<size_t>(length * kTimeFeatures), 0.0f);
  std::copy(in.time.begin(), in.time.begin() + n * kTimeFeatures, time.begin());
  std::vector<float> hidden = time_in.Apply(time.data(), length);
  GeluInPlace(&hidden);
  std::vector<float> h = time_out.Apply(hidden);
  for (int64_t j = 0; j < length; ++j) {
    token.AddTo(j < n ? in.token[j] : 0, h.data() + j * d);
    depth.AddTo(j < n ? std::clamp<int64_t>(in.depth[j], 0, kDepths - 1) : 0, h.data() + j * d);
  }
  if (!config.use_trace) std::fill(h.begin(), h.end(), 0.0f);
  std::vector<float> degree(static_cast<size_t>(length), 1.0f);
  for (int64_t j = 0; j < n; ++j) {
    if (in.parent[j] < 0 || in.parent[j] >= n) continue;
    degree[j] += 1;
    degree[in.parent[j]] += 1;
  }
  std::vector<float> mixed(h.size());
  for (size_t layer = 0; layer < gcn.size(); ++layer) {
    for (int64_t v = 0; v < length; ++v)
      for (int64_t e = 0; e < d; ++e) mixed[v * d + e] = h[v * d + e] / degree[v];
    for (int64_t j = 0; j < n; ++j) {
      const int64_t p = in.parent[j];
      if (p < 0 || p >= n) continue;
      const float weight = 1.0f / std::sqrt(degree[j] * degree[p]);
      for (int64_t e = 0; e < d; ++e) {
        mixed[p * d + e] += h[j * d + e] * weight;
        mixed[j * d + e] += h[p * d + e] * weight;
      }
    }
    std::vector<float> update = gcn[layer].Apply(mixed);
    for (size_t i = 0; i < h.size(); ++i) update[i] = h[i] + Gelu(update[i]);
    for (int64_t v = 0; v < length; ++v)
      gcn_norm[layer].Apply(update.data() + v * d, h.data() + v * d);
  }
  return h;
}

// The log encoder: a learned summary token, then one row per log line (at least one,
// masked when there is none), through the log-only layers.
std::vector<float> ModelForward::Network::LogTokens(const ModelInput& in,
                                                    std::vector<uint8_t>* valid) const {
  const int64_t m = static_cast<int64_t>(in.log_template.size()), d = dim;
  const int64_t rows = 1 + std::max<int64_t>(m, 1);
  std::vector<float> g(static_cast<size_t>(rows * d), 0.0f);
  std::copy(log_cls.begin(), log_cls.end(), g.begin());
  valid->assign(static_cast<size_t>(rows), 0);
  (*valid)[0] = 1;
  for (int64_t l = 0; l + 1 < rows; ++l) {
    const bool real = l < m;
    log_template.AddTo(real ? in.log_template[l] : 0, g.data() + (l + 1) * d);
    log_level.AddTo(real ? std::clamp<int64_t>(in.log_level[l], 0, kLevels - 1) : 0,
                    g.data() + (l + 1) * d);
    (*valid)[l + 1] = real && config.use_logs;
  }
  for (const JointLayer& layer : log_layers) layer.Apply(&g, rows, *valid);
  return g;
}

// The record summary as the heads read it: normalized features (batch norm with the
// running statistics), then their piecewise-linear encoding over the quantile bins.
std::vector<float> ModelForward::Network::SummaryFeatures(const ModelInput& in) const {
  const int64_t features = config.summary_features, bins = config.summary_bins;
  std::vector<float> raw(static_cast<size_t>(features), 0.0f);
  for (int64_t f = 0; f < features && static_cast<size_t>(f) < in.summary.size(); ++f)
    raw[f] = in.summary[f];
  std::vector<float> out = raw;
  if (has_summary_norm) {
    for (int64_t f = 0; f < features; ++f) {
      out[f] =
          (raw[f] - norm_mean[f]) / std::sqrt(norm_variance[f] + kNormEpsilon) * norm_weight[f] +
          norm_bias[f];
    }
  }
  for (int64_t f = 0; f < features && bins > 0; ++f) {
    for (int64_t k = 0; k < bins; ++k) {
      const float low = summary_edges[f * (bins + 1) + k];
      const float width = summary_edges[f * (bins + 1) + k + 1] - low;
      out.push_back(width > 1e-6f ? std::clamp((raw[f] - low) / width, 0.0f, 1.0f)
                                  : (raw[f] >= low ? 1.0f : 0.0f));
    }
  }
  if (!config.use_trace) std::fill(out.begin(), out.end(), 0.0f);
  return out;
}

Prediction ModelForward::Network::Predict(const ModelInput& in,
                                          std::vector<float>* pooled_out) const {
  const int64_t n = static_cast<int64_t>(in.size()), d = dim;
  const int64_t length = std::max<int64_t>(n, 1);
  std::vector<uint8_t> valid;
  std::vector<float> x = LogTokens(in, &valid);
  const int64_t logs = static_cast<int64_t>(valid.size());
  const std::vector<float> h = TraceTokens(in, length);
  x.insert(x.end(), h.begin(), h.end());
  for (int64_t j = 0; j < length; ++j) valid.push_back(j == 0 || (config.use_trace && j < n));
  for (const JointLayer& layer : joint) layer.Apply(&x, logs, valid);

  // Pooling: mean and max over the visible trace rows, the log summary token.
  std::vector<float> pooled(static_cast<size_t>(4 * d), 0.0f);
  float* mean = pooled.data();
  float* max = pooled.data() + d;
  std::fill(max, max + d, -std::numeric_limits<float>::infinity());
  float visible = 0;
  for (int64_t j = 0; j < length; ++j) {
    const float* row = x.data() + (logs + j) * d;
    const bool shown = valid[logs + j] != 0;
    visible += shown;
    for (int64_t e = 0; e < d; ++e) {
      if (shown) mean[e] += row[e];
      max[e] = std::max(max[e], shown ? row[e] : -1e4f);
    }
  }
  for (int64_t e = 0; e < d; ++e) mean[e] /= std::max(visible, 1.0f);
  std::copy(x.begin(), x.begin() + d, pooled.begin() + 2 * d);
  const std::vector<float> features = SummaryFeatures(in);
  std::vector<float> summary = summary_in.Apply(features);
  GeluInPlace(&summary);
  std::copy(summary.begin(), summary.end(), pooled.begin() + 3 * d);

  auto head = [&](const Linear& hidden_layer, const Linear& out_layer) {
    std::vector<float> hidden = hidden_layer.Apply(pooled);
    GeluInPlace(&hidden);
    return out_layer.Apply(hidden);
  };
  std::vector<float> step = head(step_hidden, step_out), type = head(type_hidden, type_out);
  if (config.statistics_head) {
    step[0] += statistics_step.Apply(features)[0];
    const std::vector<float> linear = statistics_type.Apply(features);
    for (int64_t c = 0; c < kTypes; ++c) type[c] += linear[c];
  }
  if (pooled_out) *pooled_out = pooled;
  Prediction p;
  p.step_probability = Sigmoid(step[0]);
  const float top = *std::max_element(type.begin(), type.end());
  float total = 0;
  for (int64_t c = 0; c < kTypes; ++c) total += (p.type_probability[c] = std::exp(type[c] - top));
  for (float& v : p.type_probability) v /= total;

  p.token_probability.assign(static_cast<size_t>(n), 0.0f);
  if (!config.use_trace || n == 0) return p;
  std::vector<float> paired(static_cast<size_t>(n * 2 * d));
  for (int64_t j = 0; j < n; ++j) {
    std::copy(x.begin() + (logs + j) * d, x.begin() + (logs + j + 1) * d,
              paired.begin() + j * 2 * d);
    std::copy(mean, mean + d, paired.begin() + j * 2 * d + d);
  }
  std::vector<float> hidden = token_hidden.Apply(paired);
  GeluInPlace(&hidden);
  const std::vector<float> logits = token_out.Apply(hidden);
  for (int64_t j = 0; j < n; ++j) p.token_probability[j] = Sigmoid(logits[j]);
  return p;
}

// Greedy decoding, as RootCauseModel::Explain: h0 = c = tanh(W pooled); each step
// feeds [embedding of the last word; c] through the GRU cell and takes the likeliest word.
std::vector<int32_t> ModelForward::Network::Explain(const std::vector<float>& pooled,
                                                    int64_t type) const {
  std::vector<int32_t> words;
  if (config.explain_vocab <= 0) return words;
  const int64_t d = dim;
  std::vector<float> context = explain_context.Apply(pooled);
  if (config.explain_by_type) explain_type.AddTo(type, context.data());
  for (float& v : context) v = std::tanh(v);
  std::vector<float> h = context, x(static_cast<size_t>(2 * d));
  int64_t previous = kExplainBegin;
  while (words.size() + 2 < kMaxExplanationTokens) {
    std::fill(x.begin(), x.begin() + d, 0.0f);
    explain_embed.AddTo(previous, x.data());
    std::copy(context.begin(), context.end(), x.begin() + d);
    const std::vector<float> in = explain_input_gates.Apply(x);
    const std::vector<float> hidden = explain_hidden_gates.Apply(h);
    for (int64_t e = 0; e < d; ++e) {
      const float r = Sigmoid(in[e] + hidden[e]);
      const float z = Sigmoid(in[d + e] + hidden[d + e]);
      const float n = std::tanh(in[2 * d + e] + r * hidden[2 * d + e]);
      h[e] = (1.0f - z) * n + z * h[e];
    }
    const std::vector<float> logits = explain_out.Apply(h);
    previous = std::max_element(logits.begin(), logits.end()) - logits.begin();
    if (previous == kExplainEnd) break;
    words.push_back(static_cast<int32_t>(previous));
  }
  return words;
}

ModelForward::ModelForward() = default;
ModelForward::~ModelForward() = default;
ModelForward::ModelForward(ModelForward&&) noexcept = default;
ModelForward& ModelForward::operator=(ModelForward&&) noexcept = default;

base::StatusOr<ModelForward> ModelForward::Create(const ModelConfig& config, NamedTensors weights) {
  if (config.dim <= 0 || config.heads <= 0 || config.dim % config.heads != 0) {
    return base::InvalidArgument("model: dim {} must be a positive multiple of heads {}",
                                 config.dim, config.heads);
  }
  ModelForward forward;
  forward.config_ = config;
  forward.network_ = std::make_unique<Network>();
  TELLER_RETURN_IF_ERROR(forward.network_->Load(config, weights));
  forward.weights_ = std::move(weights);
  return forward;
}

const ModelConfig& ModelForward::config() const { return config_; }
const NamedTensors& ModelForward::weights() const { return weights_; }

int64_t ModelForward::parameter_count() const {
  int64_t count = 0;
  for (const NamedTensor& t : weights_) {
    const std::string_view name = t.name;
    const bool buffer = name == "summary_edges" || name.ends_with(".running_mean") ||
                        name.ends_with(".running_var");
    if (!buffer) count += static_cast<int64_t>(t.values.size());
  }
  return count;
}

Prediction ModelForward::Predict(const ModelInput& input) const { return network_->Predict(input); }

std::vector<int32_t> ModelForward::Explain(const ModelInput& input) const {
  std::vector<float> pooled;
  const Prediction p = network_->Predict(input, &pooled);
  return network_->Explain(pooled, static_cast<int64_t>(DecideCategory(true, p.type_probability)));
}

std::vector<Prediction> ModelForward::Predict(const std::vector<ModelInput>& inputs,
                                              int threads) const {
  std::vector<Prediction> out(inputs.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t r = next++; r < inputs.size(); r = next++) out[r] = network_->Predict(inputs[r]);
  };
  const size_t helpers =
      std::min<size_t>(static_cast<size_t>(std::max(threads, 1)) - 1, inputs.size() / 4);
  std::vector<std::thread> pool;
  for (size_t t = 0; t < helpers; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  return out;
}

}  // namespace teller::learn
