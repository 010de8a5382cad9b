#include "step_records/record_features.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace teller::step_records {
namespace {

constexpr int kPhases = 4;
constexpr int kLevels = 6;

// FNV-1a, so hashed columns are the same on every platform.
uint64_t Hash(std::string_view text, uint64_t seed = 1469598103934665603ull) {
  uint64_t h = seed;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

float LogMicros(int64_t ns) {
  return static_cast<float>(std::log1p(std::max<int64_t>(ns, 0) / 1e3));
}

}  // namespace

FeatureRows StatisticalFeatures(const std::vector<StepRecord>& records) {
  FeatureRows out;
  out.names = {"log_step_us", "log_nodes", "ranks", "log_max_queue_us", "log_mean_queue_us"};
  for (int p = 0; p < kPhases; ++p) {
    out.names.push_back(
        fmt::format("phase_{}", model::StepPhaseName(static_cast<model::StepPhase>(p))));
  }
  for (int l = 0; l < model::kLayerCount; ++l) {
    const auto name = model::LayerName(static_cast<model::Layer>(l));
    out.names.push_back(fmt::format("count_{}", name));
    out.names.push_back(fmt::format("time_{}", name));
  }
  for (int f = 0; f < localize::kOperatorFamilyCount; ++f) {
    const auto name = localize::OperatorFamilyName(static_cast<localize::OperatorFamily>(f));
    out.names.push_back(fmt::format("count_{}", name));
    out.names.push_back(fmt::format("time_{}", name));
  }
  for (int v = 0; v < kLevels; ++v) {
    out.names.push_back(
        fmt::format("logs_{}", model::LogLevelName(static_cast<model::LogLevel>(v))));
  }
  out.cols = static_cast<int64_t>(out.names.size());
  out.rows = static_cast<int64_t>(records.size());
  out.values.assign(static_cast<size_t>(out.rows * out.cols), 0.0f);
  for (size_t r = 0; r < records.size(); ++r) {
    const StepRecord& record = records[r];
    float* row = out.values.data() + r * static_cast<size_t>(out.cols);
    const size_t nodes = record.node_count();
    row[0] = LogMicros(record.duration_ns);
    row[1] = static_cast<float>(std::log1p(static_cast<double>(nodes)));
    row[2] = static_cast<float>(record.ranks.size());
    int64_t max_queue = 0, sum_queue = 0, queued = 0;
    std::vector<int64_t> layer_count(model::kLayerCount), layer_time(model::kLayerCount);
    std::vector<int64_t> family_count(localize::kOperatorFamilyCount),
        family_time(localize::kOperatorFamilyCount);
    for (size_t k = 0; k < nodes; ++k) {
      const int64_t dur = record.serialization.dur_ns[2 * k];
      const auto layer = static_cast<size_t>(record.node_layer[k]);
      const auto family = static_cast<size_t>(record.node_family[k]);
      ++layer_count[layer];
      layer_time[layer] += dur;
      ++family_count[family];
      family_time[family] += dur;
      if (record.node_queue_ns[k] > 0) {
        max_queue = std::max(max_queue, record.node_queue_ns[k]);
        sum_queue += record.node_queue_ns[k];
        ++queued;
      }
    }
    row[3] = LogMicros(max_queue);
    row[4] = LogMicros(queued ? sum_queue / queued : 0);
    size_t c = 5;
    row[c + static_cast<size_t>(record.phase)] = 1.0f;
    c += kPhases;
    for (int l = 0; l < model::kLayerCount; ++l) {
      row[c++] = static_cast<float>(std::log1p(static_cast<double>(layer_count[l])));
      row[c++] = LogMicros(layer_time[l]);
    }
    for (int f = 0; f < localize::kOperatorFamilyCount; ++f) {
      row[c++] = static_cast<float>(std::log1p(static_cast<double>(family_count[f])));
      row[c++] = LogMicros(family_time[f]);
    }
    for (const RecordLog& log : record.logs) {
      const auto level = static_cast<size_t>(log.level);
      if (level < kLevels) row[c + level] += 1.0f;
    }
  }
  return out;
}

FeatureRows StructuralFeatures(const std::vector<StepRecord>& records,
                               const tpe::SymbolTable& symbols, int32_t buckets) {
  FeatureRows stats = StatisticalFeatures(records);
  const auto width = static_cast<size_t>(buckets);
  FeatureRows out;
  out.rows = stats.rows;
  out.cols = stats.cols + 2 * buckets;
  out.names = stats.names;
  for (int32_t b = 0; b < buckets; ++b) out.names.push_back(fmt::format("op_{}", b));
  for (int32_t b = 0; b < buckets; ++b) out.names.push_back(fmt::format("edge_{}", b));
  out.values.assign(static_cast<size_t>(out.rows * out.cols), 0.0f);
  std::vector<float> counts(2 * width);
  for (size_t r = 0; r < records.size(); ++r) {
    const StepRecord& record = records[r];
    float* row = out.values.data() + r * static_cast<size_t>(out.cols);
    std::copy_n(stats.values.data() + r * static_cast<size_t>(stats.cols), stats.cols, row);
    std::fill(counts.begin(), counts.end(), 0.0f);
    const tpe::Serialization& s = record.serialization;
    for (size_t k = 0; k < record.node_count(); ++k) {
      const std::string_view name = symbols.Get(s.symbol[2 * k + 1]);
      const uint64_t h = Hash(name);
      counts[h % width] += 1.0f;
      const int32_t parent = s.parent[2 * k];
      if (parent >= 0) {
        const std::string_view parent_name = symbols.Get(s.symbol[static_cast<size_t>(parent) + 1]);
        counts[width + Hash(name, Hash(parent_name)) % width] += 1.0f;
      }
    }
    for (size_t b = 0; b < 2 * width; ++b) {
      row[stats.cols + static_cast<int64_t>(b)] = std::log1p(counts[b]);
    }
  }
  return out;
}

}  // namespace teller::step_records
