// Probabilities for the rule diagnosis. Platt scaling (base::PlattScaler, Newton solver,
// on CalibrationInput(score)) of a finding's score (does it name an affected rank, step
// and operator family?) and of a run's score, its best cause's score (is the run
// faulty?), fitted on labelled runs by `teller score-diagnosis DATASET --fit-calibration FILE`.
// Later stages and the low-prior evaluation threshold these instead of raw robust z's.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/platt_scaling.h"
#include "base/status.h"
#include "diagnose/diagnosis.h"
#include "diagnose/evaluation.h"

namespace teller::diagnose {

// What the scalers read: log(1 + score), scores below 0 as 0.
double CalibrationInput(double score);

struct DiagnoseCalibration {
  base::PlattScaler finding;  // of CalibrationInput(finding score)
  base::PlattScaler run;      // of CalibrationInput(RunScore)
  int64_t findings = 0;       // samples each was fitted on
  int64_t runs = 0;
  std::string fitted_on;  // the dataset, for the record
};

// Labelled scores collected over evaluated runs.
struct CalibrationSamples {
  std::vector<double> finding_scores;
  std::vector<bool> finding_hits;
  std::vector<double> run_scores;
  std::vector<bool> run_faulty;
};

// A run's score: its best cause's score (0 without one).
double RunScore(const Diagnosis& diagnosis);
// Every finding of the diagnosis (hit: its rank, step and family are those of an
// affected operator instance) and the run.
void AddCalibrationSamples(const CaseTruth& truth, const Diagnosis& diagnosis,
                           CalibrationSamples* samples);
DiagnoseCalibration FitCalibration(const CalibrationSamples& samples, std::string fitted_on);

// JSON (schema teller-diagnose-calibration/1) and back; errors name the source.
std::string CalibrationJson(const DiagnoseCalibration& calibration);
base::StatusOr<DiagnoseCalibration> ParseCalibration(std::string_view text,
                                                     std::string_view source);
// Reads and parses a calibration file.
base::StatusOr<DiagnoseCalibration> LoadCalibration(const std::string& path);

// Sets every finding's probability and the run's abnormal_probability.
void ApplyCalibration(const DiagnoseCalibration& calibration, Diagnosis* diagnosis);

}  // namespace teller::diagnose
