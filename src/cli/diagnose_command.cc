#include "cli/diagnose_command.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/file_util.h"
#include "diagnose/diagnosis_json.h"
#include "diagnose/evaluation.h"
#include "report/diagnosis_text.h"
#include "report/html_report.h"

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
  diagnose_->add_option("--format", format_, "stdout format: text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  diagnose_->add_option("--color", color_, "colour in the summary: auto (when a terminal), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->capture_default_str();
  diagnose_->add_option("--top", top_, "findings shown in the summary")->capture_default_str();
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
  evaluate_->add_option("--top-k", top_k_, "findings that count as a hit")->capture_default_str();
  evaluate_->add_option("--threshold", options_.finding_threshold,
                        "robust z from which a (step, family) counts as abnormal")
      ->capture_default_str();
  evaluate_->add_flag("-q,--quiet", eval_quiet_, "no progress on stderr");
  evaluate_->add_option("--feature-mask", options_.feature_mask, "features that may make a finding (bit mask)");
  evaluate_->add_option("--sustained", options_.sustained_steps, "steps averaged per finding");
  evaluate_->add_option("--peer-scores", options_.peer_scores, "score ranks against their peers (0/1)");
  evaluate_->add_option("--baseline-mode", options_.baseline_mode, "0 shared, 1 per rank, 2 both");
  evaluate_->add_option("--min-samples", options_.min_baseline_samples, "smallest baseline scored");
}

bool DiagnoseCommand::selected() const { return *diagnose_ || *evaluate_; }

int DiagnoseCommand::Run() const { return *diagnose_ ? RunDiagnose() : RunEvaluate(); }

int DiagnoseCommand::RunDiagnose() const {
  ProgressPrinter progress(common_.quiet);
  auto trace = store::OpenTrace(common_.inputs, ToOpenOptions(common_, &progress, true));
  if (!trace.ok()) return Fail(trace.status());
  auto diagnosis = diagnose::Diagnose(*trace, options_);
  if (!diagnosis.ok()) return Fail(diagnosis.status());
  report::DiagnosisTextOptions text;
  text.max_findings = top_;
  if (!json_output_.empty()) {
    base::Status status =
        base::WriteFileAtomic(json_output_, diagnose::DiagnosisToJson(*trace, *diagnosis));
    if (!status.ok()) return Fail(status);
    text.outputs.push_back(json_output_);
  }
  if (!html_output_.empty()) {
    report::HtmlReportOptions html;
    for (const std::string& input : common_.inputs) {
      html.source += (html.source.empty() ? "" : " ") + input;
    }
    base::Status status =
        base::WriteFileAtomic(html_output_, report::RenderDiagnosisHtml(*trace, *diagnosis, html));
    if (!status.ok()) return Fail(status);
    text.outputs.push_back(html_output_);
  }
  if (format_ == "json") {
    Print(diagnose::DiagnosisToJson(*trace, *diagnosis));
    return kExitOk;
  }
  text.color = color_ == "always" || (color_ == "auto" && isatty(STDOUT_FILENO));
  Print(report::RenderDiagnosis(*trace, *diagnosis, text));
  return kExitOk;
}

int DiagnoseCommand::RunEvaluate() const {
  namespace fs = std::filesystem;
  const std::string manifest_path = (fs::path(dataset_) / "manifest.json").string();
  if (!fs::is_regular_file(manifest_path)) {
    return Fail(base::InvalidArgument(
        "{} is not a dataset folder: expected {} (write one with `teller synth dataset`)",
        dataset_, manifest_path));
  }
  auto manifest_text = base::ReadFile(manifest_path);
  if (!manifest_text.ok()) return Fail(manifest_text.status());
  nlohmann::json manifest = nlohmann::json::parse(*manifest_text, nullptr, false);
  if (manifest.is_discarded() || !manifest["bundles"].is_array()) {
    return Fail(base::InvalidArgument("{}/manifest.json: expected an object with \"bundles\"",
                                      dataset_));
  }
  std::vector<diagnose::CaseResult> results;
  const size_t total = manifest["bundles"].size();
  for (const nlohmann::json& entry : manifest["bundles"]) {
    const std::string bundle = entry.value("bundle", "");
    const std::string path = (fs::path(dataset_) / bundle).string();
    auto trace = store::OpenTrace({path}, {});
    if (!trace.ok()) return Fail(trace.status());
    auto truth = diagnose::ParseTruth(trace->meta.labels_json);
    if (!truth.ok()) return Fail(base::InvalidArgument("{}: {}", path, truth.status().message()));
    const auto start = std::chrono::steady_clock::now();
    auto diagnosis = diagnose::Diagnose(*trace, options_);
    if (!diagnosis.ok()) return Fail(diagnosis.status());
    diagnose::CaseResult result;
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    result.bundle = bundle;
    result.engine = entry.value("engine", "");
    result.truth = std::move(*truth);
    result.score = diagnose::ScoreDiagnosis(result.truth, *diagnosis, top_k_);
    if (!eval_quiet_) {
      std::fprintf(stderr, "[%zu/%zu] %-22s %-22s predicted %-21s %s\n", results.size() + 1, total,
                   bundle.c_str(), result.truth.mechanism.c_str(),
                   std::string(diagnose::FaultCategoryName(result.score.predicted)).c_str(),
                   !result.truth.faulty ? (result.score.flagged ? "false alarm" : "quiet")
                   : result.score.operator_hit ? "hit"
                                               : "miss");
    }
    results.push_back(std::move(result));
  }
  const std::string markdown = diagnose::EvaluationMarkdown(results, top_k_);
  if (!eval_markdown_.empty()) {
    base::Status status = base::WriteFileAtomic(eval_markdown_, markdown);
    if (!status.ok()) return Fail(status);
  }
  if (!eval_json_.empty()) {
    base::Status status =
        base::WriteFileAtomic(eval_json_, diagnose::EvaluationJson(results, top_k_));
    if (!status.ok()) return Fail(status);
  }
  Print(markdown);
  return kExitOk;
}

}  // namespace teller::cli
