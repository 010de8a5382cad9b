// `teller score-diagnosis`: diagnose every bundle of a simulated dataset (manifest.json, read
// by wire/dataset_files) and score each against its labels.json; optionally score a
// calibration's run probabilities (Brier score) and collect the samples to fit one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/progress.h"
#include "base/status.h"
#include "diagnose/calibration.h"
#include "diagnose/decider.h"
#include "diagnose/diagnosis.h"
#include "diagnose/evaluation.h"

namespace teller::diagnose {

struct DatasetEvaluationOptions {
  DiagnoseOptions diagnose;
  size_t top_k = 3;  // findings that count as a hit
  // A calibration file (`score-diagnosis --calibration`) whose run probabilities are scored
  // against the labels; "" none.
  std::string calibration_path;
  // Called on each diagnosis before it is scored (the CLI runs the learned model and
  // the decider here); null: the rules' diagnosis as it is.
  std::function<base::Status(const model::Trace& trace, Diagnosis* diagnosis)> annotate;
  base::ProgressSink* progress = nullptr;  // stage "evaluate: bundles", one unit per bundle
  // After each bundle: its result, the bundles done (this one included) and the total.
  std::function<void(const CaseResult& result, size_t done, size_t total)> on_case;
};

struct DatasetEvaluation {
  std::string preset = "?";  // manifest.json's preset and seed, for the record
  int64_t seed = -1;
  std::vector<CaseResult> results;        // in manifest order
  std::vector<double> run_probabilities;  // per result, with a calibration only
  CalibrationSamples samples;             // what FitDatasetCalibration fits
  DeciderSamples decider_samples;         // what FitDecider fits (diagnose/decider.h)
  // EvaluationMarkdown, then the Brier line when a calibration was scored.
  std::string markdown;
};

// Errors: folder is not a dataset, a manifest, bundle or labels.json that does not
// read, a diagnosis that fails.
base::StatusOr<DatasetEvaluation> EvaluateDataset(const std::string& folder,
                                                  const DatasetEvaluationOptions& options);

// Brier score of run probabilities (one per result) against the labels, beside the
// score of always saying the base rate.
struct RunProbabilityScore {
  double brier = 0.0;
  double base_rate_brier = 0.0;
  double mean_faulty = 0.0;  // mean probability over faulty runs (0 without any)
  double mean_normal = 0.0;  // over fault-free runs
};
RunProbabilityScore ScoreRunProbabilities(const std::vector<CaseResult>& results,
                                          const std::vector<double>& probabilities);

// Finding and run probabilities fitted on the evaluation's samples, labelled with the
// dataset's preset and seed.
DiagnoseCalibration FitDatasetCalibration(const DatasetEvaluation& evaluation);

}  // namespace teller::diagnose
