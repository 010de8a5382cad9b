#include "cli/diagnose_command.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "base/file_util.h"
#include "diagnose/calibration.h"
#include "diagnose/dataset_evaluation.h"
#include "diagnose/diagnosis_json.h"
#include "diagnose/evaluation.h"
#include "explain/narrative.h"
#include "import/input_format.h"
#include "report/diagnosis_text.h"
#include "report/html_report.h"
#include "report/perfetto_export.h"
#ifdef TELLER_HAVE_LEARN
#include "learn/model_diagnosis.h"
#endif

namespace teller::cli {

DiagnoseCommand::DiagnoseCommand(CLI::App* app) {
  diagnose_ = app->add_subcommand(
      "diagnose",
      "Find abnormal steps, suspect operator families and a fault category in a trace: a "
      "baseline learned from the run's own steps, robust deviation per (step, family), a "
      "causal-context slice around each suspect, and transparent category rules over the "
      "evidence and the logs. Prints a summary; --json writes the full diagnosis.");
  AddCommonFlags(diagnose_, &common_, "bundle, store or raw inputs (Kineto JSON, nsys SQLite, logs)");
  diagnose_->add_option("--json", json_output_, "write the diagnosis as JSON to this file");
  diagnose_->add_option("--html", html_output_,
                        "write a self-contained HTML report (timelines, trees, logs) to this file");
  diagnose_->add_option("--learned-model", model_,
                        "learned root-cause model: auto (the shipped models/default; for log "
                        "lines without a trace models/logs-only), none (rules only), or a folder "
                        "from `teller train`; its checksums are verified")
      ->capture_default_str();
  diagnose_->add_option("--calibration", calibration_,
                        "probabilities for the findings and the run: auto (the shipped "
                        "models/diagnose-calibration.json), none, or a file from `teller "
                        "evaluate --fit-calibration`")
      ->capture_default_str();
  diagnose_->add_flag("--logs", logs_only_,
                      "the inputs are service logs alone (no trace): the log rules and the "
                      "logs-only model read them, and the summary says what a trace would add. "
                      "Inputs that are logs only are read this way without the flag too");
  diagnose_->add_option("--perfetto", perfetto_output_,
                        "write the Perfetto/Chrome-trace export of the trace to this file, "
                        "suspects and abnormal steps marked (ui.perfetto.dev opens it)");
  diagnose_->add_option("--format", format_, "stdout format: text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  diagnose_->add_option("--color", color_, "colour in the summary: auto (when a terminal), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->capture_default_str();
  diagnose_->add_option("--top", top_, "findings shown in the summary")->capture_default_str();
  diagnose_->add_option("--explainer", explainer_,
                        "grounded (default: nothing leaves the machine) or openai-compatible: "
                        "send the top findings' slice, evidence and log lines to --endpoint for "
                        "a narrative (docs/explain.md)")
      ->check(CLI::IsMember({"grounded", "openai-compatible"}))
      ->capture_default_str();
  diagnose_->add_option("--endpoint", explainer_endpoint_,
                        "chat-completions server for --explainer openai-compatible, e.g. "
                        "http://localhost:8000 (with or without /v1)");
  diagnose_->add_option("--model", explainer_model_, "model name the server serves");
  diagnose_->add_option("--api-key-env", explainer_api_key_env_,
                        "environment variable holding the server's API key (sent as a bearer "
                        "token, never written)");
  diagnose_->add_option("--explainer-timeout", explainer_timeout_s_,
                        "seconds before the explainer gives up and the grounded explanation "
                        "is shown")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  diagnose_->add_option("--threshold", options_.finding_threshold,
                        "robust z from which a (step, family) counts as abnormal")
      ->capture_default_str();
  diagnose_->add_option("--slice-kappa", options_.slice.kappa, "slice relevance threshold kappa")
      ->capture_default_str();
  diagnose_->add_option("--slice-tau0-ns", options_.slice.tau0_ns,
                        "slice temporal decay tau0 in ns")
      ->capture_default_str();
  diagnose_->add_option("--slice-depth", options_.slice.ancestor_depth,
                        "ancestors of each suspect kept in the slice (h)")
      ->capture_default_str();
  diagnose_->add_flag("--horizontal", options_.slice.horizontal,
                      "follow collectives to peer ranks in the slice (horizontal view)");

  evaluate_ = app->add_subcommand(
      "evaluate",
      "Diagnose every bundle of a simulated dataset (`teller synth dataset`) and score it "
      "against its labels.json: is the injected fault's step and operator family among the "
      "top findings, is the category right, how many fault-free runs are flagged.");
  evaluate_->add_option("dataset", dataset_, "dataset folder with manifest.json")->required();
  evaluate_->add_option("--json", eval_json_, "write per-case results and totals as JSON");
  evaluate_->add_option("--markdown", eval_markdown_, "write the results tables as Markdown");
  evaluate_->add_option("--calibration", eval_calibration_,
                        "also score the run probabilities of this calibration file (Brier "
                        "score against the labels)");
  evaluate_->add_option("--fit-calibration", fit_calibration_,
                        "fit the probabilities of findings and runs on this dataset's labels "
                        "and write them to this file (what `diagnose --calibration` reads)");
  evaluate_->add_option("--top-k", top_k_, "findings that count as a hit")->capture_default_str();
  evaluate_->add_option("--threshold", options_.finding_threshold,
                        "robust z from which a (step, family) counts as abnormal")
      ->capture_default_str();
  evaluate_->add_flag("-q,--quiet", eval_quiet_, "no progress on stderr");
  evaluate_->add_option("--feature-mask", options_.feature_mask, "features that may make a finding (bit mask)");
  evaluate_->add_option("--sustained", options_.sustained_steps, "steps averaged per finding");
  evaluate_->add_option("--step-z-cap", options_.step_z_cap,
                        "cap of a step's z in the sustained mean, in thresholds (0: none)");
  evaluate_->add_option("--flag-trim", options_.flag_trim_steps,
                        "largest step z's left out of each window's mean when flagging a run");
  evaluate_->add_option("--contiguous", options_.contiguous_steps,
                        "those steps are consecutive, not the top ones anywhere (0/1)");
  evaluate_->add_option("--peer-scores", options_.peer_scores, "score ranks against their peers (0/1)");
  evaluate_->add_option("--exclude-shifts", options_.exclude_shifts,
                        "leave sustained shifts out of the baseline (0/1)");
  evaluate_->add_option("--baseline-by-role", options_.baseline_by_role,
                        "shared baselines per rank role, not across all ranks (0/1)");
  evaluate_->add_option("--absent-as-zero", options_.absent_as_zero,
                        "a family absent from comparable steps counts there as zeros (0/1)");
  evaluate_->add_option("--score-idle-steps", options_.score_idle_steps,
                        "score steps without requests once serving has begun (0/1)");
  evaluate_->add_option("--baseline-mode", options_.baseline_mode, "0 shared, 1 per rank, 2 both");
  evaluate_->add_option("--min-samples", options_.min_baseline_samples, "smallest baseline scored");
}

bool DiagnoseCommand::selected() const { return *diagnose_ || *evaluate_; }

int DiagnoseCommand::Run() const { return *diagnose_ ? RunDiagnose() : RunEvaluate(); }

namespace {
std::string FindShippedFile(const std::string& name);
}  // namespace

int DiagnoseCommand::RunDiagnose() const {
  if (logs_only_) {
    for (const std::string& input : common_.inputs) {
      auto format = import::DetectFormat(input);
      if (!format.ok()) return Fail(format.status());
      if (*format != import::InputFormat::kLog) {
        return Fail(base::InvalidArgument(
            "{}: read as {}, not a service log; --logs reads logs alone (drop it to diagnose a "
            "trace with its logs)",
            input, import::InputFormatName(*format)));
      }
    }
  }
  ProgressPrinter progress(common_.quiet);
  auto trace = store::OpenTrace(common_.inputs, ToOpenOptions(common_, &progress, true));
  if (!trace.ok()) return Fail(trace.status());
  auto diagnosis = diagnose::Diagnose(*trace, options_);
  if (!diagnosis.ok()) return Fail(diagnosis.status());
  // Fitted on traced runs: a diagnosis that scored no step (logs alone, too few
  // comparable steps) has no run score to calibrate.
  if (calibration_ != "none" && diagnosis->steps_scored > 0) {
    const std::string path = calibration_ == "auto"
                                 ? FindShippedFile("diagnose-calibration.json")
                                 : calibration_;
    if (!path.empty()) {
      auto calibration = diagnose::LoadCalibration(path);
      if (!calibration.ok()) return Fail(calibration.status());
      diagnose::ApplyCalibration(*calibration, &*diagnosis);
      diagnosis->calibration = calibration_ == "auto" ? "models/diagnose-calibration.json" : path;
    }
  }
  auto verdict = LearnedVerdict(*trace);
  if (!verdict.ok()) return Fail(verdict.status());
  diagnosis->model = std::move(verdict).value();
  report::DiagnosisTextOptions text;
  text.max_findings = top_;
  const explain::Narrative narrative = Explain(*trace, *diagnosis);
  text.narrative = explain::TerminalSafe(narrative.text);
  text.narrative_status = narrative.status;
  if (!json_output_.empty()) {
    base::Status status =
        base::WriteFileAtomic(json_output_,
                              explain::DiagnosisJsonWithNarrative(*trace, *diagnosis, narrative));
    if (!status.ok()) return Fail(status);
    text.outputs.push_back(json_output_);
  }
  if (!perfetto_output_.empty()) {
    report::PerfettoOptions perfetto;
    report::MarkDiagnosis(*diagnosis, &perfetto);
    base::Status status = report::ExportPerfetto(*trace, perfetto_output_, perfetto);
    if (!status.ok()) return Fail(status);
    text.outputs.push_back(perfetto_output_);
  }
  if (!html_output_.empty()) {
    report::HtmlReportOptions html;
    if (!perfetto_output_.empty()) {
      // As the report's reader finds it: relative to the report's folder.
      namespace fs = std::filesystem;
      std::error_code error;
      const fs::path html_folder = fs::absolute(html_output_, error).parent_path();
      const fs::path relative =
          fs::absolute(perfetto_output_, error).lexically_relative(html_folder);
      html.perfetto_path = relative.empty() || error ? perfetto_output_ : relative.string();
    }
    for (const std::string& input : common_.inputs) {
      html.source += (html.source.empty() ? "" : " ") + input;
    }
    html.narrative = narrative.text;
    html.narrative_status = narrative.status;
    base::Status status =
        base::WriteFileAtomic(html_output_, report::RenderDiagnosisHtml(*trace, *diagnosis, html));
    if (!status.ok()) return Fail(status);
    text.outputs.push_back(html_output_);
  }
  if (format_ == "json") {
    Print(explain::DiagnosisJsonWithNarrative(*trace, *diagnosis, narrative));
    return kExitOk;
  }
  text.color = color_ == "always" || (color_ == "auto" && isatty(STDOUT_FILENO));
  Print(report::RenderDiagnosis(*trace, *diagnosis, text));
  return kExitOk;
}

namespace {

namespace fs = std::filesystem;

// The shipped models folder's candidates: next to the binary's build or install tree,
// or in the source tree it was built from.
std::vector<std::filesystem::path> ShippedModelsFolders() {
  std::vector<std::filesystem::path> candidates;
  std::error_code error;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) {
    candidates.push_back(exe.parent_path() / "models");
    candidates.push_back(exe.parent_path().parent_path() / "models");
    candidates.push_back(exe.parent_path().parent_path() / "share" / "teller" / "models");
  }
  candidates.push_back(std::filesystem::path(TELLER_DEFAULT_SOURCE_DIR) / "models");
  return candidates;
}

// A model shipped with teller (models/NAME).
std::string FindShippedModel(const std::string& name) {
  std::error_code error;
  for (const fs::path& folder : ShippedModelsFolders()) {
    if (fs::is_regular_file(folder / name / "model.json", error)) return (folder / name).string();
  }
  return "";
}

// A file shipped in models/ ("" when none).
std::string FindShippedFile(const std::string& name) {
  std::error_code error;
  for (const fs::path& folder : ShippedModelsFolders()) {
    if (fs::is_regular_file(folder / name, error)) return (folder / name).string();
  }
  return "";
}

}  // namespace

base::StatusOr<diagnose::ModelVerdict> DiagnoseCommand::LearnedVerdict(
    const model::Trace& trace) const {
  diagnose::ModelVerdict verdict;
  if (model_ == "none") return verdict;
#ifndef TELLER_HAVE_LEARN
  if (model_ != "auto") {
    return base::Unimplemented("--learned-model {}: this teller was built without libtorch "
                               "(install libtorch-dev and rebuild); use --learned-model none",
                               model_);
  }
  verdict.reason = "this teller was built without libtorch; rules only";
  return verdict;
#else
  // Log lines without a trace go to the logs-only variant.
  const bool logs_only = trace.events.size() == 0 && trace.logs.size() > 0;
  const std::string shipped = logs_only ? "logs-only" : "default";
  std::string folder = model_;
  if (model_ == "auto") {
    folder = FindShippedModel(shipped);
    if (folder.empty()) {
      verdict.reason = fmt::format("no shipped model found (models/{}; train it with "
                                   "scripts/train_default_model.sh); rules only",
                                   shipped);
      return verdict;
    }
  }
  auto trained = learn::LoadModel(folder);
  if (!trained.ok()) {
    if (model_ != "auto") return trained.status();
    verdict.reason = "the shipped model was not loaded: " + trained.status().message();
    return verdict;
  }
  if (logs_only) return learn::DiagnoseLogsWithModel(*trained, folder, trace);
  return learn::DiagnoseWithModel(*trained, folder, trace);
#endif
}

explain::Narrative DiagnoseCommand::Explain(const model::Trace& trace,
                                            const diagnose::Diagnosis& diagnosis) const {
  explain::ExplainerOptions options;
  options.kind = explainer_ == "openai-compatible" ? explain::ExplainerKind::kOpenAiCompatible
                                                   : explain::ExplainerKind::kGrounded;
  options.chat.endpoint = explainer_endpoint_;
  options.chat.model = explainer_model_;
  options.chat.timeout_s = explainer_timeout_s_;
  const bool remote = options.kind == explain::ExplainerKind::kOpenAiCompatible;
  if (remote && !explainer_api_key_env_.empty()) {
    const char* key = std::getenv(explainer_api_key_env_.c_str());
    if (key == nullptr || *key == '\0') {
      explain::Narrative narrative;
      narrative.kind = options.kind;
      narrative.status = fmt::format(
          "llm unavailable: environment variable {} (--api-key-env) is not set; grounded "
          "explanation shown",
          explainer_api_key_env_);
      return narrative;
    }
    options.chat.api_key = key;
  }
  if (remote && !common_.quiet) {
    std::fprintf(stderr, "explain: asking %s at %s (timeout %g s)\n", explainer_model_.c_str(),
                 explain::RedactEndpoint(explainer_endpoint_).c_str(), explainer_timeout_s_);
  }
  return explain::ExplainDiagnosis(trace, diagnosis, options);
}

int DiagnoseCommand::RunEvaluate() const {
  ProgressPrinter progress(eval_quiet_);
  diagnose::DatasetEvaluationOptions options;
  options.diagnose = options_;
  options.top_k = top_k_;
  options.calibration_path = eval_calibration_;
  options.progress = &progress;
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
  if (!eval_markdown_.empty()) {
    base::Status status = base::WriteFileAtomic(eval_markdown_, evaluation->markdown);
    if (!status.ok()) return Fail(status);
  }
  if (!eval_json_.empty()) {
    base::Status status =
        base::WriteFileAtomic(eval_json_, diagnose::EvaluationJson(evaluation->results, top_k_));
    if (!status.ok()) return Fail(status);
  }
  if (!fit_calibration_.empty()) {
    base::Status status = base::WriteFileAtomic(
        fit_calibration_,
        diagnose::CalibrationJson(diagnose::FitDatasetCalibration(*evaluation)));
    if (!status.ok()) return Fail(status);
  }
  Print(evaluation->markdown);
  return kExitOk;
}

}  // namespace teller::cli
