#include "cli/synth_command.h"

#include <fmt/format.h>

#include <cstdio>

#include "cli/cli_status.h"
#include "cli/progress_printer.h"
#include "sim/dataset.h"
#include "sim/simulator.h"

namespace teller::cli {
SynthCommand::SynthCommand(CLI::App* app) {
  synth_ = app->add_subcommand(
      "synth", "Simulate LLM serving engines with injected faults: raw bundles with ground truth");
  synth_->require_subcommand(1);
  run_ =
      synth_->add_subcommand("run", "Simulate one run and write it as a bundle with labels.json");
  run_->add_option("--engine", engine_,
                   "vllm-v0, vllm-v1-offline, vllm-v1-online, sglang or torch-fsdp")
      ->capture_default_str();
  run_->add_option("--faults", faults_,
                   "faults to inject: mech[:key=value,...][;mech...], keys magnitude, onset, "
                   "duration, rank, node, family, request (docs/benchmark.md lists mechanisms)");
  run_->add_option("--seed", seed_, "random seed; the same seed gives the same bytes")
      ->capture_default_str();
  run_->add_option("-o,--output", output_, "bundle directory to write")->required();
  run_->add_option("--requests", requests_, "number of requests")->capture_default_str();
  run_->add_option("--nodes", nodes_, "nodes (default 2)");
  run_->add_option("--gpus-per-node", gpus_per_node_, "GPUs per node (default 3)");
  run_->add_option("--tp", tp_, "tensor-parallel size (default 3; FSDP: 1)");
  run_->add_option("--pp", pp_, "pipeline stages (default 2; FSDP: 1)");
  run_->add_option("--layers", layers_, "decoder layers of the model (default 36, Qwen3-8B)");
  run_->add_option("--mamba-period", mamba_period_,
                   "every Nth layer is a Mamba2 mixer (hybrid model; 0: none)");
  run_->add_option("--rate", rate_, "online arrival rate, requests per second (default 6)");
  run_->add_option("--output-median", output_median_, "median output tokens per request");
  run_->add_option("--modern-bundle", modern_bundle_,
                   "the layout of the modern preset's bundle N (GPU, nodes, model, budgets; "
                   "docs/benchmark.md); --requests, --layers (default 8), --faults still apply");

  dataset_ = synth_->add_subcommand(
      "dataset", "Build the benchmark dataset: bundles, manifest.json, splits.json, stats.md");
  dataset_
      ->add_option("--preset", preset_,
                   "small (seconds, for tests), paper (Table 1 shape) or modern "
                   "(H100/H200/B200 nodes, TP 8, DP/EP across 2-8 nodes, dense FP8 and MoE)")
      ->capture_default_str();
  dataset_->add_option("--seed", dataset_seed_,
                       "seed of the whole dataset (default: the preset's; another seed gives a "
                       "development set that shares nothing with the reported one)");
  dataset_
      ->add_option("--scale", dataset_scale_,
                   "runs per engine times this, same fault shares (preset name gets -xN; "
                   "paper -x4 is what the shipped models train on: docs/benchmark.md)")
      ->capture_default_str();
  dataset_->add_option("-o,--output", dataset_output_, "dataset directory to write")->required();
  dataset_->add_flag("-q,--quiet", quiet_, "no progress on stderr");
}

bool SynthCommand::selected() const { return synth_ != nullptr && synth_->parsed(); }

int SynthCommand::Run() const {
  if (run_->parsed()) return RunOne();
  if (dataset_->parsed()) return RunDataset();
  return kExitUsage;
}

int SynthCommand::RunOne() const {
  auto engine = sim::ParseEngineKind(engine_);
  if (!engine.ok()) return Fail(engine.status());
  sim::SimConfig config = sim::DefaultConfig(*engine);
  auto faults = sim::ParseFaults(faults_);
  if (!faults.ok()) return Fail(faults.status());
  config.faults = *faults;
  config.seed = seed_;
  config.workload.num_requests = requests_;
  if (nodes_ > 0) config.cluster.nodes = nodes_;
  if (gpus_per_node_ > 0) config.cluster.gpus_per_node = gpus_per_node_;
  if (tp_ > 0) config.cluster.tp = tp_;
  if (pp_ > 0) config.cluster.pp = pp_;
  if (layers_ > 0) config.model.layers = layers_;
  config.model.mamba_period = mamba_period_;
  if (rate_ > 0) config.workload.arrival_rate_per_s = rate_;
  if (output_median_ > 0) config.workload.output_median = output_median_;
  if (modern_bundle_ >= 0) {
    sim::ModernBundleConfig(modern_bundle_, layers_ > 0 ? layers_ : 8, &config);
    if (output_median_ > 0) config.workload.output_median = output_median_;
    if (rate_ > 0) config.workload.arrival_rate_per_s = rate_;
  }
  config.run_id = std::string(sim::EngineName(*engine));
  auto run = sim::RunSimulation(config, output_);
  if (!run.ok()) return Fail(run.status());
  int faulty = 0;
  for (const sim::RequestSummary& r : run->requests) faulty += r.is_fault;
  std::fprintf(stderr,
               "teller: wrote %s: %s, %d steps, %lld events, %lld log lines, %zu requests (%d "
               "faulty)%s\n",
               output_.c_str(), std::string(sim::EngineName(*engine)).c_str(), run->steps,
               static_cast<long long>(run->events), static_cast<long long>(run->log_lines),
               run->requests.size(), faulty, run->crashed ? ", the engine crashed" : "");
  return kExitOk;
}

int SynthCommand::RunDataset() const {
  auto preset = sim::GetPreset(preset_);
  if (preset.ok() && dataset_seed_ != 0) preset->seed = dataset_seed_;
  if (!preset.ok()) return Fail(preset.status());
  if (auto scaled = sim::ScalePreset(dataset_scale_, &*preset); !scaled.ok()) return Fail(scaled);
  sim::DatasetOptions options;
  options.output = dataset_output_;
  ProgressPrinter progress(quiet_);
  progress.Update("synth dataset: bundles", 0, 0);  // the clock starts before the first bundle
  options.on_bundle = [&progress](const std::string& name, int done, int total) {
    progress.Update("synth dataset: bundles", static_cast<uint64_t>(done),
                    static_cast<uint64_t>(total));
  };
  auto summary = sim::BuildDataset(*preset, options);
  progress.Finish("synth dataset: bundles");
  if (!summary.ok()) return Fail(summary.status());
  const std::string table = sim::FormatDatasetSummary(*preset, *summary);
  Print(table);
  return kExitOk;
}

}  // namespace teller::cli
