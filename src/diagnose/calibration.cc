#include "diagnose/calibration.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include <nlohmann/json.hpp>

#include "base/file_util.h"

namespace teller::diagnose {

double RunScore(const Diagnosis& diagnosis) {
  if (!diagnosis.causes.empty()) return diagnosis.causes.front().hypothesis.score;
  return diagnosis.alternatives.empty() ? 0.0 : diagnosis.alternatives.front().score;
}

void AddCalibrationSamples(const CaseTruth& truth, const Diagnosis& diagnosis,
                           CalibrationSamples* samples) {
  for (const Finding& finding : diagnosis.findings) {
    samples->finding_scores.push_back(finding.score);
    samples->finding_hits.push_back(
        truth.operators.count({finding.rank, finding.step_number, finding.family}) > 0);
  }
  samples->run_scores.push_back(RunScore(diagnosis));
  samples->run_faulty.push_back(truth.faulty);
}

double CalibrationInput(double score) { return std::log1p(std::max(0.0, score)); }

namespace {

base::PlattScaler FitScores(const std::vector<double>& scores, const std::vector<bool>& labels) {
  std::vector<double> inputs(scores.size());
  for (size_t i = 0; i < scores.size(); ++i) inputs[i] = CalibrationInput(scores[i]);
  return base::PlattScaler::Fit(inputs, labels, base::PlattScaler::Solver::kNewton);
}

}  // namespace

DiagnoseCalibration FitCalibration(const CalibrationSamples& samples, std::string fitted_on) {
  DiagnoseCalibration out;
  out.finding = FitScores(samples.finding_scores, samples.finding_hits);
  out.run = FitScores(samples.run_scores, samples.run_faulty);
  out.findings = static_cast<int64_t>(samples.finding_scores.size());
  out.runs = static_cast<int64_t>(samples.run_scores.size());
  out.fitted_on = std::move(fitted_on);
  return out;
}

std::string CalibrationJson(const DiagnoseCalibration& calibration) {
  const nlohmann::json doc{{"schema", "teller-diagnose-calibration/1"},
                           {"model", "p = 1 / (1 + exp(-(a * log1p(score) + b)))"},
                           {"finding",
                            {{"a", calibration.finding.a()},
                             {"b", calibration.finding.b()},
                             {"samples", calibration.findings},
                             {"score", "Finding::score; label: an affected (rank, step, family)"}}},
                           {"run",
                            {{"a", calibration.run.a()},
                             {"b", calibration.run.b()},
                             {"samples", calibration.runs},
                             {"score", "largest Finding::flag_score; label: the run is faulty"}}},
                           {"fitted_on", calibration.fitted_on}};
  return doc.dump(1) + "\n";
}

base::StatusOr<DiagnoseCalibration> ParseCalibration(std::string_view text,
                                                     std::string_view source) {
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    return base::InvalidArgument(
        "{}: not JSON (expected a teller-diagnose-calibration/1 "
        "object from `teller score-diagnosis --fit-calibration`)",
        source);
  }
  const auto schema = doc.find("schema");
  if (schema == doc.end() || !schema->is_string() ||
      schema->get<std::string>() != "teller-diagnose-calibration/1") {
    return base::InvalidArgument("{}: schema is not teller-diagnose-calibration/1", source);
  }
  DiagnoseCalibration out;
  const std::tuple<const char*, base::PlattScaler*, int64_t*> parts[] = {
      {"finding", &out.finding, &out.findings}, {"run", &out.run, &out.runs}};
  for (const auto& [name, calibrator, samples] : parts) {
    const auto part = doc.find(name);
    // find(), not operator[]: a missing key must not be looked up in a const object.
    if (part == doc.end() || !part->is_object()) {
      return base::InvalidArgument("{}: \"{}\" needs numbers \"a\" and \"b\"", source, name);
    }
    const auto a_value = part->find("a");
    const auto b_value = part->find("b");
    if (a_value == part->end() || b_value == part->end() || !a_value->is_number() ||
        !b_value->is_number()) {
      return base::InvalidArgument("{}: \"{}\" needs numbers \"a\" and \"b\"", source, name);
    }
    const double a = a_value->get<double>();
    const double b = b_value->get<double>();
    if (!std::isfinite(a) || !std::isfinite(b)) {
      return base::InvalidArgument("{}: \"{}\" has a non-finite parameter", source, name);
    }
    *calibrator = base::PlattScaler::FromParameters(a, b);
    const auto count = part->find("samples");
    *samples = count != part->end() && count->is_number_integer() ? count->get<int64_t>() : 0;
  }
  const auto fitted_on = doc.find("fitted_on");
  if (fitted_on != doc.end() && fitted_on->is_string()) {
    out.fitted_on = fitted_on->get<std::string>();
  }
  return out;
}

base::StatusOr<DiagnoseCalibration> LoadCalibration(const std::string& path) {
  auto text = base::ReadFile(path);
  if (!text.ok()) return text.status();
  return ParseCalibration(*text, path);
}

void ApplyCalibration(const DiagnoseCalibration& calibration, Diagnosis* diagnosis) {
  for (Finding& finding : diagnosis->findings) {
    finding.probability = calibration.finding.Probability(CalibrationInput(finding.score));
  }
  diagnosis->degraded_probability =
      calibration.run.Probability(CalibrationInput(RunScore(*diagnosis)));
}

}  // namespace teller::diagnose
