#include "learn/model_inputs.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <unordered_map>

#include "step_records/record_features.h"

namespace teller::learn {
namespace {

constexpr double kBundleQuantile = 0.5;

double Quantile(std::vector<int64_t>* values, double q) {
  if (values->empty()) return 0.0;
  auto at = values->begin() + static_cast<ptrdiff_t>(q * static_cast<double>(values->size() - 1));
  std::nth_element(values->begin(), at, values->end());
  return static_cast<double>(*at);
}

float LogRatio(int64_t value, double median) {
  return static_cast<float>(std::log((value + 1000.0) / (median + 1000.0)));
}

// A quantile of the duration per token id over a group of encoded steps.
std::unordered_map<uint32_t, double> TokenQuantiles(
    const std::vector<const tpe::EncodedStep*>& steps, double q) {
  std::unordered_map<uint32_t, std::vector<int64_t>> durations;
  for (const tpe::EncodedStep* step : steps) {
    for (size_t j = 0; j < step->size(); ++j)
      durations[step->input_ids[j]].push_back(step->duration_ns[j]);
  }
  std::unordered_map<uint32_t, double> medians;
  for (auto& [id, values] : durations) medians[id] = Quantile(&values, q);
  return medians;
}

// Tokens to keep when a step has more than `budget`: the most deviant ones
// (|log ratio to the bundle median|, then to the record median), each with its
// ancestors, in the original order.
std::vector<uint32_t> KeptTokens(const tpe::EncodedStep& step, const std::vector<float>& score,
                                 size_t budget) {
  const size_t n = step.size();
  std::vector<uint32_t> all(n);
  std::iota(all.begin(), all.end(), 0u);
  if (n <= budget) return all;
  std::vector<uint32_t> order = all;
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return score[a] > score[b]; });
  std::vector<uint8_t> keep(n, 0);
  size_t kept = 0;
  std::vector<uint32_t> chain;
  for (uint32_t j : order) {
    chain.clear();
    for (int64_t t = j; t >= 0 && !keep[static_cast<size_t>(t)];
         t = step.parent_idx[static_cast<size_t>(t)]) {
      chain.push_back(static_cast<uint32_t>(t));
    }
    if (kept + chain.size() > budget) continue;
    for (uint32_t t : chain) keep[t] = 1;
    kept += chain.size();
    if (kept == budget) break;
  }
  std::vector<uint32_t> out;
  for (uint32_t j = 0; j < n; ++j) {
    if (keep[j]) out.push_back(j);
  }
  return out;
}

}  // namespace

int SummaryWidth(const InputConfig& config) {
  if (!config.record_statistics) return kSummaryFeatures;
  return kSummaryFeatures + 2 * static_cast<int>(step_records::StatisticalFeatures({}).cols);
}

base::StatusOr<std::vector<ModelInput>> MakeInputs(
    const step_records::RecordSet& set, const tpe::TpeVocabulary& vocab,
    const step_records::TemplateVocabulary& templates, const InputConfig& config) {
  tpe::TpeEncoder encoder(vocab, set.symbols);
  std::vector<tpe::EncodedStep> encoded;
  encoded.reserve(set.records.size());
  std::map<std::string, std::vector<const tpe::EncodedStep*>> by_bundle;
  for (const step_records::StepRecord& record : set.records) {
    auto step = encoder.Encode(record.serialization);
    if (!step.ok()) {
      return step.status().WithContext(record.key() + " step " + std::to_string(record.step));
    }
    encoded.push_back(std::move(step).value());
  }
  // Grouped by bundle and phase: prefill and decode steps of one token differ by
  // far more than a mild fault does.
  auto group_of = [&](const step_records::StepRecord& record) {
    return record.bundle + "\n" + std::string(model::StepPhaseName(record.phase));
  };
  for (size_t r = 0; r < encoded.size(); ++r)
    by_bundle[group_of(set.records[r])].push_back(&encoded[r]);
  std::map<std::string, std::unordered_map<uint32_t, double>> bundle_medians;
  // The bundle's median (its lower quartile was tried: batch-size spread within a
  // phase moves it more than a mild fault moves the median; learn_test).
  for (const auto& [bundle, steps] : by_bundle)
    bundle_medians[bundle] = TokenQuantiles(steps, kBundleQuantile);

  // Record statistics and their medians per bundle and phase.
  step_records::FeatureRows stats;
  std::map<std::string, std::vector<float>> stat_medians;
  if (config.record_statistics) {
    stats = step_records::StatisticalFeatures(set.records);
    std::map<std::string, std::vector<size_t>> rows_of_group;
    for (size_t r = 0; r < set.records.size(); ++r)
      rows_of_group[group_of(set.records[r])].push_back(r);
    const auto cols = static_cast<size_t>(stats.cols);
    for (const auto& [group, rows] : rows_of_group) {
      std::vector<float>& medians = stat_medians[group];
      medians.resize(cols);
      std::vector<float> column(rows.size());
      for (size_t c = 0; c < cols; ++c) {
        for (size_t i = 0; i < rows.size(); ++i) column[i] = stats.values[rows[i] * cols + c];
        auto mid = column.begin() + static_cast<ptrdiff_t>(column.size() / 2);
        std::nth_element(column.begin(), mid, column.end());
        medians[c] = *mid;
      }
    }
  }

  std::vector<int32_t> template_map(set.templates.size());
  for (size_t t = 0; t < set.templates.size(); ++t) {
    template_map[t] = templates.Find(set.templates.Get(static_cast<int32_t>(t)));
  }

  std::vector<ModelInput> inputs(set.records.size());
  for (size_t r = 0; r < set.records.size(); ++r) {
    const step_records::StepRecord& record = set.records[r];
    const tpe::EncodedStep& step = encoded[r];
    const size_t n = step.size();
    const auto record_medians = TokenQuantiles({&step}, 0.5);
    const auto& medians = bundle_medians[group_of(record)];
    std::vector<float> features(n * kTimeFeatures);
    std::vector<float> deviation(n);
    for (size_t j = 0; j < n; ++j) {
      const int64_t dur = step.duration_ns[j];
      features[j * kTimeFeatures] =
          static_cast<float>(std::log1p(config.lambda_per_us * std::max<int64_t>(dur, 0) / 1e3));
      features[j * kTimeFeatures + 1] = LogRatio(dur, record_medians.at(step.input_ids[j]));
      features[j * kTimeFeatures + 2] = LogRatio(dur, medians.at(step.input_ids[j]));
      deviation[j] = std::abs(features[j * kTimeFeatures + 2]) +
                     0.5f * std::abs(features[j * kTimeFeatures + 1]);
    }
    const std::vector<uint32_t> kept =
        KeptTokens(step, deviation, static_cast<size_t>(std::max(config.max_tokens, 1)));
    std::vector<int64_t> new_index(n, -1);
    for (size_t i = 0; i < kept.size(); ++i) new_index[kept[i]] = static_cast<int64_t>(i);

    ModelInput& input = inputs[r];
    input.dropped_tokens = static_cast<int32_t>(n - kept.size());
    const size_t base_tokens = record.serialization.size();
    for (uint32_t j : kept) {
      input.token.push_back(step.input_ids[j]);
      input.depth.push_back(std::min<int64_t>(step.depth[j], config.max_depth));
      int64_t parent = step.parent_idx[j];
      while (parent >= 0 && new_index[static_cast<size_t>(parent)] < 0) {
        parent = step.parent_idx[static_cast<size_t>(parent)];
      }
      input.parent.push_back(parent < 0 ? -1 : new_index[static_cast<size_t>(parent)]);
      for (int f = 0; f < kTimeFeatures; ++f) input.time.push_back(features[j * kTimeFeatures + f]);
      const uint32_t first = step.base_begin[j];
      const uint32_t last = j + 1 < n ? step.base_begin[j + 1] : static_cast<uint32_t>(base_tokens);
      input.node_begin.push_back(first / 2);
      input.node_end.push_back((last + 1) / 2);
      float affected = 0;
      for (uint32_t k = first / 2; k < (last + 1) / 2; ++k) {
        if (record.node_affected[k]) affected = 1;
      }
      input.token_label.push_back(affected);
    }
    // Layer summaries over all tokens (kept or not).
    input.summary.assign(kSummaryFeatures, 0.0f);
    std::vector<int> layer_tokens(model::kLayerCount, 0);
    for (size_t j = 0; j < n; ++j) {
      const auto layer = static_cast<size_t>(record.node_layer[step.base_begin[j] / 2]);
      const float value = features[j * kTimeFeatures + 2];
      input.summary[2 * layer] += value;
      input.summary[2 * layer + 1] =
          layer_tokens[layer] == 0 ? value : std::max(input.summary[2 * layer + 1], value);
      ++layer_tokens[layer];
    }
    for (size_t l = 0; l < layer_tokens.size(); ++l) {
      if (layer_tokens[l] > 0) input.summary[2 * l] /= static_cast<float>(layer_tokens[l]);
    }
    if (config.record_statistics) {
      const auto cols = static_cast<size_t>(stats.cols);
      const float* row = stats.values.data() + r * cols;
      const std::vector<float>& medians = stat_medians[group_of(record)];
      input.summary.insert(input.summary.end(), row, row + cols);
      for (size_t c = 0; c < cols; ++c) input.summary.push_back(row[c] - medians[c]);
    }
    const size_t logs =
        std::min(record.logs.size(), static_cast<size_t>(std::max(config.max_logs, 0)));
    for (size_t l = record.logs.size() - logs; l < record.logs.size(); ++l) {
      const int32_t id = record.logs[l].template_id;
      input.log_template.push_back(id >= 0 && static_cast<size_t>(id) < template_map.size()
                                       ? template_map[static_cast<size_t>(id)]
                                       : step_records::TemplateVocabulary::kUnknown);
      input.log_level.push_back(static_cast<int64_t>(record.logs[l].level));
    }
    input.step_label = record.is_anomaly ? 1.0f : 0.0f;
    input.fault_label = static_cast<int64_t>(record.fault_type);
  }
  return inputs;
}

}  // namespace teller::learn
