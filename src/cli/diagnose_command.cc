#include "cli/diagnose_command.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "base/file_util.h"
#include "base/tuning.h"
#include "diagnose/calibration.h"
#include "diagnose/dataset_evaluation.h"
#include "diagnose/diagnose_tuning.h"
#include "diagnose/diagnosis_json.h"
#include "diagnose/evaluation.h"
#include "explain/narrative.h"
#include "import/input_format.h"
#include "learn/model_diagnosis.h"
#include "report/diagnosis_text.h"
#include "report/html_report.h"
#include "report/perfetto_export.h"

namespace teller::cli {

namespace {

// --distributed, --store-dir and --fleet-timeout (fleet/, docs/fleet.md).
void AddFleetFlags(CLI::App* command, bool* distributed, std::string* store_dir,
                   double* timeout_s) {
  command->add_flag(
      "--distributed", *distributed,
      "run under mpirun or srun: each MPI process resolves the inputs on its own disks (a "
      "quoted pattern such as 'traces/*_rank*.json' names files on every node's local disk) "
      "and imports the trace files and bundle process folders it can read; the first one "
      "joins them and writes the diagnosis, the same as without the flag; a rank whose files "
      "no process can read is left out and named (docs/fleet.md)");
  command
      ->add_option("--store-dir", *store_dir,
                   "with --distributed: each process also writes the store of every unit it "
                   "imports to this folder, and the first the set's manifest (set.json), so "
                   "`teller show`, `stats` and `diagnose` read the folder as one trace "
                   "(docs/fleet.md)")
      ->needs("--distributed");
  command
      ->add_option("--fleet-timeout", *timeout_s,
                   "with --distributed: the seconds the first process waits for another's "
                   "message (a unit, a 1 GiB piece of one, or its analysis of its units); a process that does not answer "
                   "in time is left out: the diagnosis names it and its ranks, then the job "
                   "is aborted with exit status 3 (docs/fleet.md)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str()
      ->needs("--distributed");
}

}  // namespace

DiagnoseCommand::DiagnoseCommand(CLI::App* app) {
  diagnose_ = app->add_subcommand(
      "diagnose",
      "One verdict (healthy, degraded, failed) and its root cause: the run's steps measured "
      "against their own baseline per rank and channel, causes (slow GPU, kernel family, "
      "host, launches, copies, syncs, allocator, straggler, link, engine pause, reorder) "
      "fitted to what moved, with their window, effect, cost and the ranks that waited; "
      "the per-family deviations and their causal-context slices as evidence, and the "
      "logs. Prints a summary; --json writes the full diagnosis.");
  AddCommonFlags(diagnose_, &common_,
                 "bundle, store or raw inputs (Kineto JSON, nsys SQLite, logs)");
  diagnose_->add_option("--json", json_output_,
                        "write the diagnosis as JSON to this file ('-' for stdout, as --format "
                        "json)");
  diagnose_->add_option("--html", html_output_,
                        "write a self-contained HTML report (timelines, trees, logs) to this file");
  diagnose_
      ->add_option("--learned-model", model_,
                   "learned root-cause model: auto (the shipped models/default; for log "
                   "lines without a trace models/logs-only), none (rules only), or a folder "
                   "from `teller train`; its checksums are verified")
      ->capture_default_str();
  diagnose_
      ->add_option("--calibration", calibration_,
                   "probabilities for the findings and the run: auto (the shipped "
                   "models/diagnose-calibration.json), none, or a file from `teller "
                   "score-diagnosis --fit-calibration`")
      ->capture_default_str();
  diagnose_
      ->add_option("--decider", decider_,
                   "what chooses the verdict's cause among the candidates: auto (the shipped "
                   "models/decider.json when its held-out table chose it, else the rules), "
                   "rules (the hypotheses' score against the cause threshold), or a file "
                   "from `teller score-diagnosis --fit-decider` (docs/diagnose.md, "
                   "\"Decider\")")
      ->capture_default_str();
  AddFleetFlags(diagnose_, &distributed_, &store_dir_, &fleet_timeout_s_);
  diagnose_->add_flag("--logs", logs_only_,
                      "the inputs are service logs alone (no trace): the signature catalog and the "
                      "logs-only model read them, and the summary says what a trace would add. "
                      "Inputs that are logs only are read this way without the flag too");
  diagnose_
      ->add_option("--signatures", signature_files_,
                   "a signature catalog of your own (teller-signatures/1, docs/signatures.md) "
                   "read after the built-in one; its entries override built-in ones of the "
                   "same id. Repeatable")
      ->check(CLI::ExistingFile);
  diagnose_->add_option("--perfetto", perfetto_output_,
                        "write the Perfetto/Chrome-trace export of the trace to this file, "
                        "suspects and abnormal steps marked (ui.perfetto.dev opens it)");
  diagnose_->add_option("--format", format_, "stdout format: text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  diagnose_
      ->add_option("--color", color_,
                   "colour in the summary: auto (when a terminal), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->capture_default_str();
  diagnose_->add_option("--top", top_, "findings shown in the summary")->capture_default_str();
  diagnose_->add_flag("--rebuild", rebuild_,
                      "import the raw files again instead of reusing their snapshot (raw "
                      "inputs that took 0.05 s or more to open are kept in $TELLER_CACHE_DIR, "
                      "else ~/.cache/teller; TELLER_CACHE_DIR=none keeps nothing)");
  diagnose_->add_flag("--timings", timings_,
                      "print the wall time of each phase (import, reconstruct, diagnose, "
                      "learned model, report) on stderr as one JSON line");
  diagnose_
      ->add_option("--explainer", explainer_,
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
  diagnose_
      ->add_option("--explainer-timeout", explainer_timeout_s_,
                   "seconds before the explainer gives up and the grounded explanation "
                   "is shown")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  diagnose_
      ->add_option("--threshold", options_.finding_threshold,
                   "robust z from which a (step, family) counts as abnormal")
      ->capture_default_str();
  AddCauseOptions(diagnose_);
  diagnose_->add_option("--slice-kappa", options_.slice.kappa, "slice relevance threshold kappa")
      ->capture_default_str();
  diagnose_
      ->add_option("--slice-tau0-ns", options_.slice.tau0_ns, "slice temporal decay tau0 in ns")
      ->capture_default_str();
  diagnose_
      ->add_option("--slice-depth", options_.slice.ancestor_depth,
                   "ancestors of each suspect kept in the slice (h)")
      ->capture_default_str();
  diagnose_->add_flag("--horizontal", options_.slice.horizontal,
                      "follow collectives to peer ranks in the slice (horizontal view)");
  AddScoreDiagnosisVerb(app);
  tuning_ = app->add_subcommand(
      "tuning",
      "Every tuned value of the diagnosis (thresholds, discounts, floors): name, default, "
      "meaning; --markdown adds where each was chosen. `diagnose --tune NAME=VALUE` sets one");
  tuning_->add_flag("--markdown", tuning_markdown_, "as docs/tuning.md");
}

void DiagnoseCommand::AddCauseOptions(CLI::App* verb) {
  verb->add_option("--tune", tune_,
                   "override a tuned value for this run, NAME=VALUE (repeatable): every "
                   "threshold, discount and floor of the diagnosis, listed with its meaning and "
                   "origin by `teller tuning` (docs/tuning.md); the JSON records the values "
                   "used (`tuning`)")
      ->check(CLI::Validator(
          [](std::string& text) {
            auto parsed = base::ParseTuningOverride(text);
            return parsed.ok() ? std::string() : parsed.status().message();
          },
          "NAME=VALUE"));
  verb->add_option("--cause-threshold", options_.causes.min_score,
                   "score from which the best root-cause hypothesis makes the run degraded")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  verb->add_option("--alternatives", options_.causes.max_alternatives,
                   "other hypotheses listed beside the cause")
      ->capture_default_str();
}

diagnose::DiagnoseOptions DiagnoseCommand::TunedOptions() const {
  diagnose::DiagnoseOptions options = options_;
  for (const std::string& text : tune_) {
    // Checked by the option's validator; a value that no longer parses is skipped.
    auto parsed = base::ParseTuningOverride(text);
    if (parsed.ok()) (void)diagnose::ApplyTuning(*parsed, &options);
  }
  return options;
}

bool DiagnoseCommand::selected() const { return *diagnose_ || *score_diagnosis_ || *tuning_; }

int DiagnoseCommand::Run() const {
  if (*tuning_) {
    Print(base::RenderTunedValues(tuning_markdown_));
    return kExitOk;
  }
  return *diagnose_ ? RunDiagnose() : RunScoreDiagnosis();
}

}  // namespace teller::cli
