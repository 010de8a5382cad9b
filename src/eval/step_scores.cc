#include "eval/step_scores.h"

#include <map>

namespace teller::eval {

base::Status ScoreSteps(const std::vector<double>& scores, const std::vector<int>& labels,
                        const std::vector<std::string>& engines, double threshold,
                        const EvalOptions& options, MethodResult* out) {
  const std::vector<int> said = base::ThresholdScores(scores, threshold);
  TELLER_ASSIGN_OR_RETURN(out->step, base::ComputeBinaryMetrics(said, labels));
  std::map<std::string, std::pair<std::vector<int>, std::vector<int>>> by_engine;
  for (size_t i = 0; i < said.size(); ++i) {
    by_engine[engines[i]].first.push_back(said[i]);
    by_engine[engines[i]].second.push_back(labels[i]);
  }
  for (const auto& [engine, pair] : by_engine) {
    auto metrics = base::ComputeBinaryMetrics(pair.first, pair.second);
    if (metrics.ok()) out->per_engine.emplace_back(engine, *metrics);
  }
  auto auroc = base::ComputeAuroc(scores, labels);
  auto auprc = base::ComputeAveragePrecision(scores, labels);
  out->auroc = auroc.ok() ? *auroc : 0;
  out->auprc = auprc.ok() ? *auprc : 0;
  for (double prior : options.priors) {
    LowPriorOptions low;
    low.prior = prior;
    low.repeats = options.repeats;
    low.seed = options.seed;
    low.threshold = threshold;
    auto result = EvaluateAtPrior(scores, labels, low);
    if (result.ok()) out->priors.emplace_back(prior, *result);
  }
  return base::OkStatus();
}

}  // namespace teller::eval
