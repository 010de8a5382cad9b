// `teller score-diagnosis`: the diagnosis of every bundle of a simulated dataset scored
// against its labels; fits the calibration and the decider (diagnose/decider.h).
#include <fmt/format.h>

#include "base/file_util.h"
#include "cli/diagnose_command.h"
#include "diagnose/calibration.h"
#include "diagnose/dataset_evaluation.h"
#include "diagnose/decider.h"
#include "diagnose/evaluation.h"

namespace teller::cli {

void DiagnoseCommand::AddScoreDiagnosisVerb(CLI::App* app) {
  score_diagnosis_ = app->add_subcommand(
      "score-diagnosis",
      "Diagnose every bundle of a simulated dataset (`teller synth dataset`) and score it "
      "against its labels.json: is the injected fault's step and operator family among the "
      "top findings, is the category right, how many fault-free runs are flagged. (Was "
      "`evaluate`; the old name works until teller 0.2.)");
  score_diagnosis_->alias("evaluate");
  score_diagnosis_->add_option("dataset", dataset_, "dataset folder with manifest.json")
      ->required();
  score_diagnosis_->add_option(
      "--json", score_json_,
      "write per-case results and totals as JSON ('-' for stdout, instead of "
      "the tables)");
  score_diagnosis_->add_option("--markdown", score_markdown_,
                               "write the results tables as Markdown");
  score_diagnosis_->add_option("--calibration", score_calibration_,
                               "also score the run probabilities of this calibration file (Brier "
                               "score against the labels)");
  score_diagnosis_->add_option(
      "--fit-calibration", fit_calibration_,
      "fit the probabilities of findings and runs on this dataset's labels "
      "and write them to this file (what `diagnose --calibration` reads)");
  score_diagnosis_
      ->add_option("--learned-model", score_model_,
                   "run the learned model on each bundle too (auto: the shipped one, or a "
                   "folder), so that a decider reads its step probabilities; default none")
      ->capture_default_str();
  score_diagnosis_
      ->add_option("--decider", score_decider_,
                   "rules, auto or a decider file (as `diagnose --decider`), applied to each "
                   "diagnosis before it is scored")
      ->capture_default_str();
  score_diagnosis_->add_option(
      "--fit-decider", fit_decider_,
      "fit the decider (a logistic regression over each cause candidate's evidence and the "
      "learned model's steps, and its threshold) on this dataset's labels and write it to "
      "this file (what `diagnose --decider` reads)");
  score_diagnosis_->add_option("--top-k", top_k_, "findings that count as a hit")
      ->capture_default_str();
  score_diagnosis_
      ->add_option("--threshold", options_.finding_threshold,
                   "robust z from which a (step, family) counts as abnormal")
      ->capture_default_str();
  AddCauseOptions(score_diagnosis_);
  score_diagnosis_->add_flag("-q,--quiet", score_quiet_, "no progress on stderr");
  score_diagnosis_->add_option("--feature-mask", options_.feature_mask,
                               "features that may make a finding (bit mask)");
  score_diagnosis_->add_option("--sustained", options_.sustained_steps,
                               "steps averaged per finding");
  score_diagnosis_->add_option("--step-z-cap", options_.step_z_cap,
                               "cap of a step's z in the sustained mean, in thresholds (0: none)");
  score_diagnosis_->add_option(
      "--flag-trim", options_.flag_trim_steps,
      "largest step z's left out of each window's mean when flagging a run");
  score_diagnosis_->add_option("--contiguous", options_.contiguous_steps,
                               "those steps are consecutive, not the top ones anywhere (0/1)");
  score_diagnosis_->add_option("--peer-scores", options_.peer_scores,
                               "score ranks against their peers (0/1)");
  score_diagnosis_->add_option("--exclude-shifts", options_.exclude_shifts,
                               "leave sustained shifts out of the baseline (0/1)");
  score_diagnosis_->add_option("--baseline-by-role", options_.baseline_by_role,
                               "shared baselines per rank role, not across all ranks (0/1)");
  score_diagnosis_->add_option("--absent-as-zero", options_.absent_as_zero,
                               "a family absent from comparable steps counts there as zeros (0/1)");
  score_diagnosis_->add_option("--score-idle-steps", options_.score_idle_steps,
                               "score steps without requests once serving has begun (0/1)");
  score_diagnosis_->add_option("--baseline-mode", options_.baseline_mode,
                               "0 shared, 1 per rank, 2 both");
  score_diagnosis_->add_option("--min-samples", options_.min_baseline_samples,
                               "smallest baseline scored");
}

int DiagnoseCommand::RunScoreDiagnosis() const {
  ProgressPrinter progress(score_quiet_);
  diagnose::DatasetEvaluationOptions options;
  options.diagnose = TunedOptions();
  options.top_k = top_k_;
  options.calibration_path = score_calibration_;
  options.progress = &progress;
  auto decider = LoadDeciderOption(score_decider_);
  if (!decider.ok()) return Fail(decider.status());
  if (score_model_ != "none" || *decider) {
    options.annotate = [&](const model::Trace& trace, diagnose::Diagnosis* diagnosis) {
      base::PhaseTimer timer(nullptr);
      auto opinion = LearnedVerdict(trace, score_model_, &timer);
      if (!opinion.ok()) return opinion.status();
      diagnosis->model = std::move(opinion).value();
      if (*decider) diagnose::ApplyDecider(**decider, diagnosis);
      return base::OkStatus();
    };
  }
  options.on_case = [&progress](const diagnose::CaseResult& result, size_t done, size_t total) {
    const char* outcome = !result.truth.faulty ? (result.score.flagged ? "false alarm" : "quiet")
                          : result.score.operator_hit ? "hit"
                                                      : "miss";
    progress.Note(fmt::format("[{}/{}] {:<22} {:<22} predicted {:<21} {}", done, total,
                              result.bundle, result.truth.mechanism,
                              diagnose::FaultCategoryName(result.score.predicted), outcome));
  };
  auto evaluation = diagnose::EvaluateDataset(dataset_, options);
  if (!evaluation.ok()) return Fail(evaluation.status());
  if (!score_markdown_.empty()) {
    base::Status status = base::WriteFileAtomic(score_markdown_, evaluation->markdown);
    if (!status.ok()) return Fail(status);
  }
  if (!score_json_.empty()) {
    base::Status status =
        WriteOutput(score_json_, diagnose::EvaluationJson(evaluation->results, top_k_));
    if (!status.ok()) return Fail(status);
  }
  if (!fit_decider_.empty()) {
    const std::string fitted_on = fmt::format("{} (preset {}, seed {}; learned model {})", dataset_,
                                              evaluation->preset, evaluation->seed, score_model_);
    base::Status status = base::WriteFileAtomic(
        fit_decider_,
        diagnose::DeciderJson(diagnose::FitDecider(evaluation->decider_samples, fitted_on)));
    if (!status.ok()) return Fail(status);
  }
  if (!fit_calibration_.empty()) {
    base::Status status = base::WriteFileAtomic(
        fit_calibration_, diagnose::CalibrationJson(diagnose::FitDatasetCalibration(*evaluation)));
    if (!status.ok()) return Fail(status);
  }
  if (!IsStdout(score_json_)) Print(evaluation->markdown);  // `--json -`: the JSON instead
  return kExitOk;
}

}  // namespace teller::cli
