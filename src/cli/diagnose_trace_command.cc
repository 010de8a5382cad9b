// `teller diagnose`: open the inputs, diagnose, add the calibrated probabilities,
// the learned model's verdict and the explanation, then print or write the outputs
// (the verb's flags are registered in diagnose_command.cc).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>

#include <fmt/format.h>

#include "base/file_util.h"
#include "cli/diagnose_command.h"
#include "diagnose/calibration.h"
#include "diagnose/decider.h"
#include "diagnose/diagnosis_json.h"
#include "explain/narrative.h"
#include "fleet/fleet_open.h"
#include "import/input_format.h"
#include "learn/model_diagnosis.h"
#include "learn/model_folder.h"
#include "report/diagnosis_text.h"
#include "report/html_report.h"
#include "report/perfetto_export.h"
#include "signatures/built_in_catalog.h"

namespace teller::cli {

int DiagnoseCommand::RunDiagnose() const {
  if (distributed_) return RunDistributed();
  if (logs_only_) {
    for (const std::string& input : common_.inputs) {
      auto format = import::DetectFormat(input);
      if (!format.ok()) return Fail(format.status());
      if (*format != import::InputFormat::kLog && *format != import::InputFormat::kFlightRecorder) {
        return Fail(base::InvalidArgument(
            "{}: read as {}, not a service log; --logs reads logs alone (drop it to diagnose a "
            "trace with its logs)",
            input, import::InputFormatName(*format)));
      }
    }
  }
  ProgressPrinter progress(common_.quiet);
  base::PhaseTimer timer(&progress);
  store::OpenOptions open = ToOpenOptions(common_, &timer, true);
  open.cache_dir = store::DefaultCacheDir();
  open.rebuild = rebuild_;
  auto trace = store::OpenTrace(common_.inputs, open);
  if (!trace.ok()) return Fail(trace.status());
  const int code = DiagnoseTrace(*trace, &timer);
  if (timings_) PrintTimings(timer);
  return code;
}

int DiagnoseCommand::RunDistributed() const {
  auto session = fleet::Session::Start();
  if (!session.ok()) return Fail(session.status());
  const bool root = (*session)->root();
  ProgressPrinter progress(common_.quiet || !root);
  base::PhaseTimer timer(&progress);
  store::OpenOptions open = ToOpenOptions(common_, &timer, true);
  const fleet::DistributedOptions distributed{store_dir_, fleet_timeout_s_,
                                              TunedOptions().deviation, TunedOptions().hang,
                                              TunedOptions().oom, TunedOptions().causes};
  auto fleet = fleet::OpenTraceDistributed(**session, common_.inputs, open, distributed);
  if (!fleet.ok()) {
    if (!root) return kExitFailure;
    const int code = Fail(fleet.status());
    (*session)->Abort(code);
  }
  if (!root) return kExitOk;
  // The results of the analysis in parts, where they stand for the joined trace.
  const auto from_parts = [&](diagnose::DiagnoseOptions* options) {
    const auto given = [](const auto& result) { return result ? &*result : nullptr; };
    options->deviation_map = given(fleet->deviation_map);
    options->cause_analysis = given(fleet->cause_analysis);
    options->cause_operators = given(fleet->cause_operators);
    options->feature_rows = given(fleet->feature_rows);
    options->request_rows = given(fleet->request_rows);
    options->crash = given(fleet->crash);
    options->oom_report = given(fleet->oom);
    options->request_causes = given(fleet->request_causes);
    options->hang_report = given(fleet->hang);
    options->replay_graph = given(fleet->replay_graph);
  };
  const int code = DiagnoseTrace(fleet->trace, &timer,
                                 fleet::MissingNotes(fleet->missing, fleet->lost), from_parts);
  if (timings_) {
    PrintTimings(timer);
    std::fprintf(stderr, "%s\n",
                 fleet::FiguresJson(fleet->figures, fleet::PartsSources(*fleet)).c_str());
  }
  if (fleet->lost.empty()) return code;
  // A lost process never finishes: the job ends here, its diagnosis written.
  std::fflush(nullptr);
  (*session)->Abort(code == kExitOk ? kExitProcessLost : code);
}

int DiagnoseCommand::DiagnoseTrace(
    const model::Trace& opened, base::PhaseTimer* timer, const std::vector<std::string>& notes,
    const std::function<void(diagnose::DiagnoseOptions*)>& given) const {
  const model::Trace* trace = &opened;
  // The learned model reads the trace on its own thread while the rules diagnose.
  base::PhaseTimer model_timer(nullptr);
  std::future<base::StatusOr<diagnose::ModelOpinion>> learned = std::async(std::launch::async, [&] {
    auto verdict = LearnedVerdict(*trace, model_, &model_timer);
    model_timer.End("model apply");
    return verdict;
  });
  timer->Begin("signatures");
  auto catalog = signatures::LoadCatalog(signature_files_);
  timer->End("signatures");
  if (!catalog.ok()) return Fail(catalog.status());
  diagnose::DiagnoseOptions options = TunedOptions();
  options.signatures = &*catalog;
  options.progress = timer;
  if (given) given(&options);
  timer->Begin("diagnose");
  auto diagnosis = diagnose::Diagnose(*trace, options);
  timer->End("diagnose");
  if (!diagnosis.ok()) return Fail(diagnosis.status());
  diagnosis->notes.insert(diagnosis->notes.end(), notes.begin(), notes.end());
  // Fitted on traced runs: a diagnosis that scored no step (logs alone, too few
  // comparable steps) has no run score to calibrate.
  timer->Begin("calibration");
  if (calibration_ != "none" && diagnosis->steps_scored > 0) {
    const std::string path =
        calibration_ == "auto" ? learn::FindShippedFile("diagnose-calibration.json") : calibration_;
    if (!path.empty()) {
      auto calibration = diagnose::LoadCalibration(path);
      if (!calibration.ok()) return Fail(calibration.status());
      diagnose::ApplyCalibration(*calibration, &*diagnosis);
      diagnosis->calibration = calibration_ == "auto" ? "models/diagnose-calibration.json" : path;
    }
  }
  timer->End("calibration");
  auto verdict = learned.get();
  timer->Merge(model_timer);
  if (!verdict.ok()) return Fail(verdict.status());
  diagnosis->model = std::move(verdict).value();
  timer->Begin("decider");
  auto decider = LoadDeciderOption(decider_);
  if (!decider.ok()) return Fail(decider.status());
  if (*decider) diagnose::ApplyDecider(**decider, &*diagnosis);
  timer->End("decider");
  report::DiagnosisTextOptions text;
  text.max_findings = top_;
  timer->Begin("explain");
  const explain::Narrative narrative = Explain(*trace, *diagnosis);
  timer->End("explain");
  timer->Begin("report");
  text.narrative = explain::TerminalSafe(narrative.text);
  text.narrative_status = narrative.status;
  if (!json_output_.empty() && !IsStdout(json_output_)) {
    base::Status status = base::WriteFileAtomic(
        json_output_, explain::DiagnosisJsonWithNarrative(*trace, *diagnosis, narrative));
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
  if (format_ == "json" || IsStdout(json_output_)) {
    Print(explain::DiagnosisJsonWithNarrative(*trace, *diagnosis, narrative));
    return kExitOk;
  }
  text.color = color_ == "always" || (color_ == "auto" && isatty(STDOUT_FILENO));
  Print(report::RenderDiagnosis(*trace, *diagnosis, text));
  return kExitOk;
}

base::StatusOr<diagnose::ModelOpinion> DiagnoseCommand::LearnedVerdict(
    const model::Trace& trace, const std::string& model_option, base::PhaseTimer* timer) const {
  diagnose::ModelOpinion verdict;
  if (model_option == "none") return verdict;
  // Log lines without a trace go to the logs-only variant.
  const bool logs_only = trace.events.size() == 0 && trace.logs.size() > 0;
  const std::string shipped =
      logs_only ? learn::kShippedLogsOnlyModel : learn::kShippedDefaultModel;
  std::string folder = model_option;
  if (model_option == "auto") {
    folder = learn::FindShippedModel(shipped);
    if (folder.empty()) {
      verdict.reason = fmt::format(
          "no shipped model found (models/{}; train it with "
          "scripts/train_default_model.sh); rules only",
          shipped);
      return verdict;
    }
  }
  timer->Begin("model load");
  auto trained = learn::LoadModel(folder);
  timer->End("model load");
  timer->Begin("model apply");  // runs until the report begins
  if (!trained.ok()) {
    if (model_option != "auto") return trained.status();
    verdict.reason = "the shipped model was not loaded: " + trained.status().message();
    return verdict;
  }
  if (logs_only) return learn::DiagnoseLogsWithModel(*trained, folder, trace);
  diagnose::ModelOpinion opinion = learn::DiagnoseWithModel(*trained, folder, trace);
  // Names of another GPU, library or engine: the shipped model that reads operator tokens.
  if (model_option != "auto" || opinion.used ||
      opinion.unknown_name_share <= learn::kMaxUnknownNameShare) {
    return opinion;
  }
  if (trace.events.size() > learn::kOperatorTokenModelMaxEvents) {
    opinion.reason += fmt::format(
        "; models/{} was not run: {} events exceed the {} it reads in about 2 s",
        learn::kShippedOperatorTokenModel, trace.events.size(),
        learn::kOperatorTokenModelMaxEvents);
    return opinion;
  }
  const std::string tokens = learn::FindShippedModel(learn::kShippedOperatorTokenModel);
  auto token_model = tokens.empty() ? base::StatusOr<learn::TrainedModel>(base::NotFound(""))
                                    : learn::LoadModel(tokens);
  if (!token_model.ok()) return opinion;
  diagnose::ModelOpinion by_tokens = learn::DiagnoseWithModel(*token_model, tokens, trace);
  by_tokens.reason = fmt::format(
      "models/{} read it: {:.0f}% of its operator names are unknown to models/{}{}",
      learn::kShippedOperatorTokenModel, 100 * opinion.unknown_name_share,
      learn::kShippedDefaultModel, by_tokens.reason.empty() ? "" : "; " + by_tokens.reason);
  return by_tokens;
}

base::StatusOr<std::optional<diagnose::Decider>> DiagnoseCommand::LoadDeciderOption(
    const std::string& decider) const {
  std::optional<diagnose::Decider> none;
  if (decider == "rules") return none;
  const std::string path = decider == "auto" ? learn::FindShippedFile("decider.json") : decider;
  if (path.empty()) return none;  // auto, none shipped: the rules decide
  TELLER_ASSIGN_OR_RETURN(diagnose::Decider loaded, diagnose::LoadDecider(path));
  if (decider == "auto") loaded.source = "models/decider.json";
  return std::optional<diagnose::Decider>(std::move(loaded));
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

}  // namespace teller::cli
