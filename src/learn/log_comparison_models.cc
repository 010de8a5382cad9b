#include "learn/log_comparison_models.h"

#include "learn/log_comparison_nets.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

namespace teller::learn {
namespace log_comparisons {

std::vector<size_t> NormalRecords(const LogComparisonData& data) {
  std::vector<size_t> rows;
  for (size_t r = 0; r < data.records.size(); ++r) {
    if (!data.records[r].anomaly) rows.push_back(r);
  }
  return rows;
}

void Shuffle(std::vector<size_t>* order, std::mt19937_64* rng) {
  for (size_t i = order->size(); i > 1; --i) {
    std::swap((*order)[i - 1], (*order)[(*rng)() % i]);
  }
}

int64_t ParameterCount(const torch::nn::Module& module) {
  int64_t count = 0;
  for (const torch::Tensor& p : module.parameters()) count += p.numel();
  return count;
}

torch::Tensor TemplateTable(const LogComparisonData& data) {
  const int64_t rows = std::max<int64_t>(data.template_count(), 1);
  torch::Tensor table = torch::zeros({rows, std::max(data.template_dims, 1)});
  if (data.template_count() > 0) {
    table.copy_(torch::tensor(data.template_vectors).reshape({rows, data.template_dims}));
  }
  return table;
}

std::vector<float> ToFloats(const torch::Tensor& values) {
  const torch::Tensor flat = values.detach().to(torch::kFloat32).contiguous().reshape({-1});
  return std::vector<float>(flat.data_ptr<float>(), flat.data_ptr<float>() + flat.numel());
}

std::vector<std::vector<size_t>> Batches(const std::vector<size_t>& order, size_t size) {
  std::vector<std::vector<size_t>> batches;
  for (size_t at = 0; at < order.size(); at += size) {
    batches.emplace_back(
        order.begin() + static_cast<std::ptrdiff_t>(at),
        order.begin() + static_cast<std::ptrdiff_t>(std::min(at + size, order.size())));
  }
  return batches;
}

}  // namespace log_comparisons

namespace {

base::Status CheckInputs(LogComparisonId id, const LogComparisonData& train,
                         const LogComparisonData& test) {
  const std::string_view name = LogComparisonName(id);
  if (train.records.empty() || test.records.empty())
    return base::InvalidArgument("{}: no train or no test records", name);
  if (ReadsLogs(id) && !train.has_logs()) {
    return base::NotFound("{}: the train part's step records have no log lines", name);
  }
  if (!ReadsLogs(id) && (train.series_features < 1 || train.series_window < 1 ||
                         train.series_features != test.series_features ||
                         train.series_window != test.series_window)) {
    return base::InvalidArgument("{}: no step series, or train and test series differ", name);
  }
  if (ReadsLogs(id) && train.template_dims != test.template_dims)
    return base::InvalidArgument("{}: train and test template vectors differ in width", name);
  return base::OkStatus();
}

// The classical unsupervised comparison methods' rule: the train scores' quantile at the train
// part's share of anomalies (comparisons/method.h).
float QuantileThreshold(const LogComparisonData& train, std::vector<float> train_scores) {
  double anomalies = 0;
  for (const LogComparisonRecord& r : train.records) anomalies += r.anomaly;
  double share = anomalies / static_cast<double>(train.records.size());
  share = anomalies > 0 ? std::clamp(share, 0.001, 0.5) : 0.1;
  std::sort(train_scores.begin(), train_scores.end());
  const double at = (1 - share) * static_cast<double>(train_scores.size() - 1);
  const auto low = static_cast<size_t>(std::floor(at));
  const size_t high = std::min(low + 1, train_scores.size() - 1);
  const double part = at - static_cast<double>(low);
  return static_cast<float>(train_scores[low] * (1 - part) + train_scores[high] * part);
}

base::StatusOr<log_comparisons::Fitted> Fit(LogComparisonId id, const LogComparisonData& train,
                                            const LogComparisonData& test,
                                            const LogComparisonOptions& options) {
  switch (id) {
    case LogComparisonId::kRobustLog:
      return log_comparisons::FitRobustLog(train, test, options);
    case LogComparisonId::kLanoBert:
      return log_comparisons::FitLanoBert(train, test, options);
    case LogComparisonId::kLogs2Graphs:
      return log_comparisons::FitLogs2Graphs(train, test, options);
    case LogComparisonId::kMadGan:
      return log_comparisons::FitMadGan(train, test, options);
  }
  return base::InvalidArgument("log comparison method {} unknown", static_cast<int>(id));
}

}  // namespace

base::StatusOr<LogComparisonScores> FitLogComparison(LogComparisonId id,
                                                     const LogComparisonData& train,
                                                     const LogComparisonData& test,
                                                     const LogComparisonOptions& options) {
  TELLER_RETURN_IF_ERROR(CheckInputs(id, train, test));
  if (options.dim < 1 || options.epochs < 0)
    return base::InvalidArgument("{}: dim and epochs must be positive", LogComparisonName(id));
  const auto start = std::chrono::steady_clock::now();
  torch::manual_seed(options.seed);
  torch::set_num_threads(std::max(options.threads, 1));
  base::StatusOr<log_comparisons::Fitted> fitted = base::Unimplemented("not fitted");
  try {
    fitted = Fit(id, train, test, options);
  } catch (const std::exception& e) {
    std::string what = e.what();
    if (const size_t eol = what.find('\n'); eol != std::string::npos) what.resize(eol);
    return base::Internal("{}: torch: {}", LogComparisonName(id), what);
  }
  if (!fitted.ok()) return fitted.status();
  LogComparisonScores scores;
  scores.scores = std::move(fitted->test_scores);
  scores.threshold = id == LogComparisonId::kRobustLog
                         ? 0.5f
                         : QuantileThreshold(train, std::move(fitted->train_scores));
  scores.parameters = fitted->parameters;
  scores.epochs = fitted->epochs;
  scores.train_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return scores;
}

}  // namespace teller::learn
