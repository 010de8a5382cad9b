// teller: the command line. Parses arguments, calls the stages, prints what they
// return, and turns a Status into an exit code (0 ok, 1 failure, 2 usage).
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "base/file_util.h"
#include "cli/common_flags.h"
#include "cli/diagnose_command.h"
#include "cli/learn_command.h"
#include "cli/progress_printer.h"
#include "cli/synth_command.h"
#include "cli/tpe_command.h"
#include "model/stats.h"
#include "record/record_command.h"
#include "report/perfetto_export.h"
#include "report/text_report.h"
#include "store/open_trace.h"
#include "store/trace_store.h"
#include "store/windowed_build.h"

namespace teller::cli {
namespace {

// Builds one big Kineto file window by window; reconstruct false only imports.
int RunWindowed(const CommonFlags& flags, int64_t window_events, bool reconstruct,
                const std::string& store_path) {
  ProgressPrinter progress(flags.quiet);
  store::WindowedBuildOptions options;
  options.window_events = window_events;
  options.reconstruct = reconstruct;
  options.import = ToOpenOptions(flags, &progress, reconstruct).import;
  auto summary = store::BuildStoreWindowed(flags.inputs[0], store_path, options);
  if (!summary.ok()) return Fail(summary.status());
  std::fprintf(stderr,
               "teller: %lld events in %lld windows of about %lld (largest %lld); %lld steps, "
               "%lld requests, %lld call-chain nodes written to %s\n",
               static_cast<long long>(summary->events), static_cast<long long>(summary->windows),
               static_cast<long long>(window_events),
               static_cast<long long>(summary->largest_window_events),
               static_cast<long long>(summary->steps), static_cast<long long>(summary->requests),
               static_cast<long long>(summary->nodes), store_path.c_str());
  if (summary->windows_over_budget > 0) {
    std::fprintf(stderr,
                 "teller: %lld window(s) grew past twice --window-events: the trace had no "
                 "moment without a running event there, so memory grew with them\n",
                 static_cast<long long>(summary->windows_over_budget));
  }
  return kExitOk;
}

int RunImport(const CommonFlags& flags, const std::string& output, int64_t window_flag,
              bool timings) {
  auto window_events = store::ChooseWindowEvents(flags.inputs, window_flag);
  if (!window_events.ok()) return Fail(window_events.status());
  if (*window_events > 0) {
    std::error_code ec;
    std::filesystem::create_directories(output, ec);
    if (ec) return Fail(base::IoError("{}: cannot create directory: {}", output, ec.message()));
    std::string store_path = (std::filesystem::path(output) / store::kBundleStoreName).string();
    int code = RunWindowed(flags, *window_events, false, store_path);
    if (code != kExitOk) return code;
    base::Status status =
        store::WriteImportedBundleMeta(model::TraceFormat::kKineto, flags.inputs, output);
    return status.ok() ? kExitOk : Fail(status);
  }
  ProgressPrinter progress(flags.quiet);
  base::PhaseTimer timer(&progress);
  auto trace = store::OpenTrace(flags.inputs, ToOpenOptions(flags, &timer, false));
  if (!trace.ok()) return Fail(trace.status());
  timer.Begin("store write");
  base::Status status = store::WriteImportedBundle(*trace, output);
  timer.End("store write");
  if (!status.ok()) return Fail(status);
  if (timings) PrintTimings(timer);
  std::fprintf(stderr, "teller: imported %zu events and %zu log lines from %zu input(s) into %s\n",
               trace->events.size(), trace->logs.size(), trace->meta.sources.size(),
               output.c_str());
  return kExitOk;
}

int RunBuild(const CommonFlags& flags, std::string output, int64_t window_flag, bool timings) {
  if (output.empty()) {
    auto default_output = store::DefaultStorePath(flags.inputs);
    if (!default_output.ok()) return Fail(default_output.status());
    output = *default_output;
  }
  auto window_events = store::ChooseWindowEvents(flags.inputs, window_flag);
  if (!window_events.ok()) return Fail(window_events.status());
  if (*window_events > 0) return RunWindowed(flags, *window_events, true, output);
  ProgressPrinter progress(flags.quiet);
  base::PhaseTimer timer(&progress);
  auto trace = store::OpenTrace(flags.inputs, ToOpenOptions(flags, &timer, true));
  if (!trace.ok()) return Fail(trace.status());
  timer.Begin("store write");
  base::Status status = store::SaveTrace(*trace, output);
  timer.End("store write");
  if (!status.ok()) return Fail(status);
  if (timings) PrintTimings(timer);
  std::fprintf(stderr, "teller: %zu steps, %zu requests, %zu call-chain nodes written to %s\n",
               trace->steps.size(), trace->requests.size(), trace->nodes.size(), output.c_str());
  return kExitOk;
}

struct ShowFlags {
  std::string request;
  int64_t step = -1;
  int32_t step_rank = -1;
  std::string columns;
  size_t max_nodes = 60;
  int max_depth = 64;
  size_t max_steps = 20;
};

int RunShow(const CommonFlags& flags, const ShowFlags& show) {
  ProgressPrinter progress(flags.quiet);
  auto trace = store::OpenTrace(flags.inputs, ToOpenOptions(flags, &progress, true));
  if (!trace.ok()) return Fail(trace.status());
  report::TreeOptions tree;
  tree.max_nodes = show.max_nodes;
  tree.max_depth = show.max_depth;
  if (!show.columns.empty()) {
    auto columns = report::ParseTreeColumns(show.columns);
    if (!columns.ok()) return Fail(columns.status());
    tree.columns = *columns;
  }
  if (!show.request.empty()) {
    auto text = report::RenderRequestTrees(*trace, show.request, tree);
    if (!text.ok()) return Fail(text.status());
    Print(*text);
    return kExitOk;
  }
  if (show.step >= 0) {
    auto step = report::FindStep(*trace, show.step, show.step_rank);
    if (!step.ok()) return Fail(step.status());
    Print(report::RenderStepTree(*trace, *step, tree));
    return kExitOk;
  }
  Print(report::RenderSummary(*trace, show.max_steps));
  if (trace->steps.size() > 0) {
    // The step serving the most requests, else the longest: the one worth a look.
    size_t best = 0;
    for (size_t s = 1; s < trace->steps.size(); ++s) {
      auto key = [&](size_t i) {
        return std::make_pair(trace->steps.requests_count[i],
                              trace->steps.end_ns[i] - trace->steps.start_ns[i]);
      };
      if (key(s) > key(best)) best = s;
    }
    Print("\n");
    Print(report::RenderStepTree(*trace, model::StepIndex(static_cast<uint32_t>(best)), tree));
  }
  return kExitOk;
}

int RunStats(const CommonFlags& flags, bool describe) {
  ProgressPrinter progress(flags.quiet);
  auto trace = store::OpenTrace(flags.inputs, ToOpenOptions(flags, &progress, true));
  if (!trace.ok()) return Fail(trace.status());
  Print(report::RenderStats(*trace, describe));
  return kExitOk;
}

int RunExportPerfetto(const CommonFlags& flags, const std::string& output, int64_t step_number) {
  ProgressPrinter progress(flags.quiet);
  auto trace = store::OpenTrace(flags.inputs, ToOpenOptions(flags, &progress, true));
  if (!trace.ok()) return Fail(trace.status());
  report::PerfettoOptions options;
  if (step_number >= 0) {
    auto step = report::FindStep(*trace, step_number, -1);
    if (!step.ok()) return Fail(step.status());
    options.window_start_ns = trace->steps.start_ns[step->value()];
    options.window_end_ns = trace->steps.end_ns[step->value()];
  }
  base::Status status = report::ExportPerfetto(*trace, output, options);
  if (!status.ok()) return Fail(status);
  std::fprintf(stderr, "teller: wrote %s (open it in ui.perfetto.dev or chrome://tracing)\n",
               output.c_str());
  return kExitOk;
}

int Main(int argc, char** argv) {
  CLI::App app{
      "teller finds the root cause of failures and slowdowns in LLM inference services from GPU "
      "traces and service logs.\n\nInputs: a teller bundle directory (from `teller record`, "
      "`teller synth` or `teller import`), a store file from `teller build`, or raw files: "
      "PyTorch-profiler/Kineto JSON (.json, .json.gz), Nsight Systems SQLite exports, service "
      "logs; a directory of such files (one per rank) or a quoted glob pattern of them works too. "
      "Formats are told from content."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "teller 0.1.0");
  CommonFlags common;

  CLI::App* import_cmd = app.add_subcommand(
      "import", "Import traces and logs into one bundle directory (meta.json + trace.db)");
  std::string import_output;
  AddCommonFlags(import_cmd, &common, "files or directories to import");
  import_cmd->add_option("-o,--output", import_output, "bundle directory to write")->required();
  const std::string window_help =
      "events per time window: a Kineto JSON file is then imported, reconstructed and written "
      "one window at a time, in memory that does not grow with the file (-1: windows for one "
      "Kineto file of 1 GB or more, 0: never)";
  int64_t window_events = -1;
  import_cmd->add_option("--window-events", window_events, window_help)->capture_default_str();
  bool timings = false;
  AddTimingsFlag(import_cmd, &timings);

  CLI::App* build_cmd = app.add_subcommand(
      "build",
      "Reconstruct call chains, steps, requests and log alignment; write the SQLite store");
  std::string build_output;
  AddCommonFlags(build_cmd, &common, "bundle, store or raw inputs");
  build_cmd->add_option("-o,--output", build_output,
                        "store file (default: BUNDLE/trace.db, or INPUT.teller.db for files)");
  build_cmd->add_option("--window-events", window_events, window_help)->capture_default_str();
  AddTimingsFlag(build_cmd, &timings);

  CLI::App* show_cmd = app.add_subcommand(
      "show", "Print the request/step summary and a call-chain tree (of a request or a step)");
  ShowFlags show;
  AddCommonFlags(show_cmd, &common, "bundle, store or raw inputs");
  auto* request_opt = show_cmd->add_option("--request", show.request, "request id to show");
  show_cmd->add_option("--step", show.step, "step number to show")->excludes(request_opt);
  show_cmd->add_option("--step-rank", show.step_rank, "rank of --step (default: lowest)");
  show_cmd->add_option("--columns", show.columns,
                       "print a table with these columns: layer,name,start_ns,dur_ns,depth,rank,"
                       "correlation (start_ns relative to the step)");
  show_cmd->add_option("--max-nodes", show.max_nodes, "nodes per tree, 0 for all")
      ->capture_default_str();
  show_cmd->add_option("--max-depth", show.max_depth, "deepest level shown")->capture_default_str();
  show_cmd->add_option("--max-steps", show.max_steps, "steps listed in the summary")
      ->capture_default_str();

  CLI::App* stats_cmd = app.add_subcommand(
      "stats", "Counts per layer, binding, steps, requests, log alignment and every error counter");
  AddCommonFlags(stats_cmd, &common, "bundle, store or raw inputs");
  bool stats_describe = false;
  stats_cmd->add_flag("--describe", stats_describe,
                      "each counter's description under it (every declared one: teller counters)");

  CLI::App* counters_cmd = app.add_subcommand(
      "counters", "Every named counter teller declares: name, severity, what it counts");
  bool counters_markdown = false;
  counters_cmd->add_flag("--markdown", counters_markdown, "as docs/counters.md");

  CLI::App* export_cmd = app.add_subcommand("export", "Export the reconstructed trace");
  export_cmd->require_subcommand(1);
  CLI::App* perfetto_cmd = export_cmd->add_subcommand(
      "perfetto",
      "Chrome-trace JSON for ui.perfetto.dev: tracks per thread and GPU stream, "
      "launch->kernel flows, request ids in step args");
  std::string perfetto_output;
  int64_t perfetto_step = -1;
  AddCommonFlags(perfetto_cmd, &common, "bundle, store or raw inputs");
  perfetto_cmd->add_option("-o,--output", perfetto_output, "JSON file to write")->required();
  perfetto_cmd->add_option("--step", perfetto_step, "only the time window of this step");

  SynthCommand synth(&app);
  DiagnoseCommand diagnose(&app);
  TpeCommand tpe(&app);
  LearnCommand learn(&app);
  record::RecordFlags record_flags;
  std::error_code self_error;
  record_flags.diagnose_exe = std::filesystem::read_symlink("/proc/self/exe", self_error).string();
  CLI::App* record_cmd = record::AddRecordCommand(&app, &record_flags);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    int code = app.exit(error);
    return code == 0 ? kExitOk : kExitUsage;
  }
  if (synth.selected()) return synth.Run();
  if (diagnose.selected()) return diagnose.Run();
  if (tpe.selected()) return tpe.Run();
  if (learn.selected()) return learn.Run();
  if (*record_cmd) return record::RunRecordCommand(record_flags);
  if (*import_cmd) return RunImport(common, import_output, window_events, timings);
  if (*build_cmd) return RunBuild(common, build_output, window_events, timings);
  if (*show_cmd) return RunShow(common, show);
  if (*stats_cmd) return RunStats(common, stats_describe);
  if (*counters_cmd) {
    Print(model::RenderDeclaredStats(counters_markdown));
    return kExitOk;
  }
  if (*perfetto_cmd) return RunExportPerfetto(common, perfetto_output, perfetto_step);
  return kExitUsage;
}

}  // namespace
}  // namespace teller::cli

int main(int argc, char** argv) { return teller::cli::Main(argc, argv); }
