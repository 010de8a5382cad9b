#include "diagnose/dataset_evaluation.h"

#include <chrono>
#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "cause/cause_text.h"
#include "store/open_trace.h"
#include "wire/dataset_files.h"

namespace teller::diagnose {
namespace {

std::string CauseSummary(const Diagnosis& diagnosis) {
  const cause::Hypothesis* h = !diagnosis.causes.empty() ? &diagnosis.causes.front().hypothesis
                               : !diagnosis.alternatives.empty() ? &diagnosis.alternatives.front()
                                                                 : nullptr;
  if (h == nullptr) return "";
  return fmt::format("{}{} {} steps {}-{} score {:.1f}", diagnosis.causes.empty() ? "(below) " : "",
                     cause::CauseKindName(h->kind), cause::CauseLocation(*h), h->first_group,
                     h->last_group, h->score);
}

namespace fs = std::filesystem;

constexpr char kStage[] = "evaluate: bundles";

// Diagnoses one bundle and scores it; with a calibration, appends its run probability.
base::StatusOr<CaseResult> EvaluateBundle(const std::string& folder,
                                          const wire::ManifestBundle& entry,
                                          const DatasetEvaluationOptions& options,
                                          const std::optional<DiagnoseCalibration>& calibration,
                                          DatasetEvaluation* evaluation) {
  const std::string path = (fs::path(folder) / entry.bundle).string();
  TELLER_ASSIGN_OR_RETURN(model::Trace trace, store::OpenTrace({path}, {}));
  auto truth = ParseTruth(trace.meta.labels_json);
  if (!truth.ok()) return base::InvalidArgument("{}: {}", path, truth.status().message());
  const auto start = std::chrono::steady_clock::now();
  TELLER_ASSIGN_OR_RETURN(Diagnosis diagnosis, Diagnose(trace, options.diagnose));
  if (options.annotate) TELLER_RETURN_IF_ERROR(options.annotate(trace, &diagnosis));
  CaseResult result;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.bundle = entry.bundle;
  result.engine = entry.engine;
  result.truth = std::move(*truth);
  result.score = ScoreDiagnosis(result.truth, diagnosis, options.top_k);
  result.cause = CauseSummary(diagnosis);
  AddCalibrationSamples(result.truth, diagnosis, &evaluation->samples);
  AddDeciderSamples(result.truth, diagnosis, &evaluation->decider_samples);
  if (calibration) {
    ApplyCalibration(*calibration, &diagnosis);
    evaluation->run_probabilities.push_back(diagnosis.degraded_probability);
  }
  return result;
}

}  // namespace

base::StatusOr<DatasetEvaluation> EvaluateDataset(const std::string& folder,
                                                  const DatasetEvaluationOptions& options) {
  const std::string manifest_path = (fs::path(folder) / wire::kManifestFileName).string();
  if (!fs::is_regular_file(manifest_path)) {
    return base::InvalidArgument(
        "{} is not a dataset folder: expected {} (write one with `teller synth dataset`)", folder,
        manifest_path);
  }
  TELLER_ASSIGN_OR_RETURN(const wire::DatasetManifest manifest, wire::ReadManifest(folder));
  DatasetEvaluation evaluation;
  evaluation.preset = manifest.preset.value_or("?");
  evaluation.seed = manifest.seed ? static_cast<int64_t>(*manifest.seed) : -1;
  std::optional<DiagnoseCalibration> calibration;
  if (!options.calibration_path.empty()) {
    TELLER_ASSIGN_OR_RETURN(calibration, LoadCalibration(options.calibration_path));
  }
  const size_t total = manifest.bundles.size();
  base::ReportProgress(options.progress, kStage, 0, total);
  for (const wire::ManifestBundle& entry : manifest.bundles) {
    TELLER_ASSIGN_OR_RETURN(CaseResult result,
                            EvaluateBundle(folder, entry, options, calibration, &evaluation));
    evaluation.results.push_back(std::move(result));
    if (options.on_case) {
      options.on_case(evaluation.results.back(), evaluation.results.size(), total);
    }
    base::ReportProgress(options.progress, kStage, evaluation.results.size(), total);
  }
  evaluation.markdown = EvaluationMarkdown(evaluation.results, options.top_k);
  if (calibration && !evaluation.run_probabilities.empty()) {
    const RunProbabilityScore score =
        ScoreRunProbabilities(evaluation.results, evaluation.run_probabilities);
    evaluation.markdown += fmt::format(
        "\nCalibrated run probability ({}): Brier score {:.3f} (the base rate alone: {:.3f}); "
        "mean probability {:.2f} over faulty runs, {:.2f} over fault-free runs.\n",
        options.calibration_path, score.brier, score.base_rate_brier, score.mean_faulty,
        score.mean_normal);
  }
  return evaluation;
}

RunProbabilityScore ScoreRunProbabilities(const std::vector<CaseResult>& results,
                                          const std::vector<double>& probabilities) {
  RunProbabilityScore score;
  if (results.empty()) return score;
  double brier = 0.0, base_brier = 0.0, faulty_p = 0.0, normal_p = 0.0;
  size_t faulty = 0;
  for (size_t i = 0; i < results.size(); ++i) faulty += results[i].truth.faulty;
  const double base = static_cast<double>(faulty) / static_cast<double>(results.size());
  for (size_t i = 0; i < results.size(); ++i) {
    const double y = results[i].truth.faulty ? 1.0 : 0.0;
    brier += (probabilities[i] - y) * (probabilities[i] - y);
    base_brier += (base - y) * (base - y);
    (results[i].truth.faulty ? faulty_p : normal_p) += probabilities[i];
  }
  const double n = static_cast<double>(results.size());
  score.brier = brier / n;
  score.base_rate_brier = base_brier / n;
  score.mean_faulty = faulty ? faulty_p / static_cast<double>(faulty) : 0.0;
  score.mean_normal =
      results.size() > faulty ? normal_p / static_cast<double>(results.size() - faulty) : 0.0;
  return score;
}

DiagnoseCalibration FitDatasetCalibration(const DatasetEvaluation& evaluation) {
  return FitCalibration(
      evaluation.samples,
      fmt::format("dataset preset {} seed {} ({} runs, {} findings)", evaluation.preset,
                  evaluation.seed, evaluation.samples.run_scores.size(),
                  evaluation.samples.finding_scores.size()));
}

}  // namespace teller::diagnose
