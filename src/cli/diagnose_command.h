// `teller diagnose` (localization -> slices -> findings, category rules; terminal
// summary and JSON), `teller score-diagnosis` (diagnose every bundle of a simulated
// dataset and score it against its labels) and `teller tuning` (the tuned values
// `--tune` sets). Register before parsing, run after:
//   cli::DiagnoseCommand diagnose(&app);
//   ... app.parse(argc, argv) ...
//   if (diagnose.selected()) return diagnose.Run();
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/phase_timer.h"
#include "cli/common_flags.h"
#include "diagnose/decider.h"
#include "diagnose/diagnosis.h"
#include "explain/narrative.h"

namespace teller::cli {

class DiagnoseCommand {
 public:
  explicit DiagnoseCommand(CLI::App* app);
  bool selected() const;
  int Run() const;

 private:
  int RunDiagnose() const;
  // --distributed: the inputs imported on the processes of an MPI job (fleet/).
  int RunDistributed() const;
  // Diagnoses an opened trace and writes the outputs; the phases go to timer.
  // Notes join the diagnosis's own (ranks a distributed open left out); `given` sets what
  // was made elsewhere (a distributed open's results from its units' rows and scans: the
  // deviation map, findings' rows, request rows, crash, out-of-memory report, request
  // causes, hang and replay graph) in place of the trace's.
  int DiagnoseTrace(const model::Trace& trace, base::PhaseTimer* timer,
                    const std::vector<std::string>& notes = {},
                    const std::function<void(diagnose::DiagnoseOptions*)>& given = nullptr) const;
  int RunScoreDiagnosis() const;
  // Registers `teller score-diagnosis` (and its old name, `evaluate`); the constructor calls it.
  void AddScoreDiagnosisVerb(CLI::App* app);
  // --cause-threshold, --alternatives and --tune, shared by both verbs.
  void AddCauseOptions(CLI::App* verb);
  // options_ with each --tune applied (checked while parsing).
  diagnose::DiagnoseOptions TunedOptions() const;
  // The narrative asked by --explainer; a fallback status when it cannot be had.
  explain::Narrative Explain(const model::Trace& trace, const diagnose::Diagnosis& diagnosis) const;

  // The learned model's verdict as --learned-model asks; used = false with a reason when
  // the shipped model is missing or does not fit the trace.
  base::StatusOr<diagnose::ModelOpinion> LearnedVerdict(const model::Trace& trace,
                                                        const std::string& model,
                                                        base::PhaseTimer* timer) const;
  // The decider --decider names: null for "rules", or when "auto" finds none shipped.
  base::StatusOr<std::optional<diagnose::Decider>> LoadDeciderOption(
      const std::string& decider) const;

  CLI::App* diagnose_ = nullptr;
  CLI::App* score_diagnosis_ = nullptr;
  CLI::App* tuning_ = nullptr;
  bool tuning_markdown_ = false;
  CommonFlags common_;
  diagnose::DiagnoseOptions options_;
  std::vector<std::string> tune_;  // --tune NAME=VALUE
  std::string json_output_;
  std::string html_output_;
  std::string perfetto_output_;
  // --learned-model: "auto" (the shipped models/default when this build has the learned
  // model), "none", or a model folder from `teller train`.
  std::string model_ = "auto";
  // --calibration: "auto" (the shipped models/diagnose-calibration.json), "none", or a
  // file from `teller score-diagnosis --fit-calibration`.
  std::string calibration_ = "auto";
  std::string decider_ = "auto";
  std::string score_model_ = "none";
  std::string score_decider_ = "rules";
  std::string fit_decider_;
  bool logs_only_ = false;
  std::vector<std::string> signature_files_;
  std::string format_ = "text";
  std::string color_ = "auto";
  // --explainer (src/explain/): grounded keeps everything on the machine.
  std::string explainer_ = "grounded";
  std::string explainer_endpoint_;
  std::string explainer_model_;
  std::string explainer_api_key_env_;
  double explainer_timeout_s_ = 60.0;
  size_t top_ = 5;
  // --timings: the wall time of each phase on stderr, one JSON line.
  bool timings_ = false;
  bool rebuild_ = false;
  bool distributed_ = false;
  std::string store_dir_;
  double fleet_timeout_s_ = 600;  // --fleet-timeout
  // score-diagnosis
  std::string dataset_;
  std::string score_json_;
  std::string score_markdown_;
  std::string fit_calibration_;
  std::string score_calibration_;
  size_t top_k_ = 3;
  bool score_quiet_ = false;
};

}  // namespace teller::cli
