#include "cli/synth_command.h"

#include <fmt/format.h>

#include <cstdio>

#include "cli/cli_status.h"
#include "cli/progress_printer.h"
#include "perturb/perturb.h"
#include "perturb/real_dataset.h"
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
  run_->add_option("--dp", dp_,
                   "data-parallel replicas of the serving engine, each tp x pp GPUs, stepping in "
                   "lock step (default 1; needs pp 1)");
  run_->add_option("--ranks", ranks_,
                   "a fleet of this many H100s (a multiple of 8): 8 GPUs a node on NVSwitch, TP 8 "
                   "inside each node and one data-parallel replica per node (--layers defaults to "
                   "8); faults may name any rank or node; a link_degradation run serves an MoE "
                   "model with its experts over every GPU, so traffic crosses nodes");
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
                   "small (seconds, for tests), paper (Table 1 shape), modern "
                   "(H100/H200/B200 nodes, TP 8, DP/EP across 2-8 nodes, dense FP8 and MoE), "
                   "fleet (64 H100s a run as synth run --ranks, the fault on any rank or node) "
                   "or real (perturbed replays of the real traces of --traces)")
      ->capture_default_str();
  dataset_->add_option("--traces", traces_, "folder of real traces for --preset real")
      ->capture_default_str();
  dataset_->add_option("--seed", dataset_seed_,
                       "seed of the whole dataset (default: the preset's; another seed gives a "
                       "development set that shares nothing with the reported one)");
  dataset_
      ->add_option("--scale", dataset_scale_,
                   "runs per engine times this, same fault shares (preset name gets -xN; "
                   "paper -x4 is what the shipped models train on: docs/benchmark.md)")
      ->capture_default_str();
  dataset_->add_option("--ranks", dataset_ranks_,
                       "with --preset fleet: the ranks of each run (a multiple of 8; default 64)");
  dataset_->add_option("-o,--output", dataset_output_, "dataset directory to write")->required();
  dataset_->add_flag("-q,--quiet", quiet_, "no progress on stderr");

  perturb_ = synth_->add_subcommand(
      "perturb",
      "Replay a real Kineto or nsys trace's steps with measured jitter and one injected fault; "
      "writes a raw bundle with labels.json (teller-labels/2) from the run's fault-free twin");
  perturb_->add_option("trace", perturb_inputs_, "Kineto JSON (.json/.json.gz) or nsys SQLite")
      ->required();
  perturb_->add_option(
      "--fault", perturb_fault_,
      "mech[:key=value,...] with keys magnitude, onset, duration, family, rank; "
      "gpu_throttle, kernel_slowdown, kernel_contention, launch_latency, "
      "memcpy_latency, sync_latency, host_memory_pressure, allocator_slow_path, "
      "engine_pause, and with --ranks 2 or more straggler_rank (the rank's host "
      "reaches each collective late) and link_degradation (every collective's "
      "transfer slower on every rank); on several ranks the per-rank faults act on "
      "rank= (default: picked from the seed); no --fault: a fault-free replay");
  perturb_->add_option("--steps", perturb_steps_, "steps to replay, cycling over the trace's")
      ->capture_default_str();
  perturb_
      ->add_option("--ranks", perturb_ranks_,
                   "ranks to replay the trace's steps on, one process each with its own jitter; "
                   "collective kernels end together on every rank (1: the trace's rank alone)")
      ->capture_default_str();
  perturb_->add_option("--seed", perturb_seed_, "random seed; the same seed gives the same bytes")
      ->capture_default_str();
  perturb_->add_option("-o,--output", perturb_output_, "bundle directory to write")->required();
  perturb_->add_flag("-q,--quiet", perturb_quiet_, "no summary line on stderr");
}

bool SynthCommand::selected() const { return synth_ != nullptr && synth_->parsed(); }

int SynthCommand::Run() const {
  if (run_->parsed()) return RunOne();
  if (dataset_->parsed()) return preset_ == "real" ? RunRealDataset() : RunDataset();
  if (perturb_->parsed()) return RunPerturb();
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
  if (ranks_ > 0) {
    if (auto fleet = sim::FleetConfig(ranks_, 8, &config); !fleet.ok()) {
      return Fail(base::InvalidArgument("--ranks: {}", fleet.message()));
    }
  }
  if (nodes_ > 0) config.cluster.nodes = nodes_;
  if (gpus_per_node_ > 0) config.cluster.gpus_per_node = gpus_per_node_;
  if (tp_ > 0) config.cluster.tp = tp_;
  if (pp_ > 0) config.cluster.pp = pp_;
  if (dp_ > 0) config.cluster.dp = dp_;
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
  if (dataset_ranks_ > 0) {
    if (auto sized = sim::SizeFleetPreset(dataset_ranks_, &*preset); !sized.ok()) {
      return Fail(base::InvalidArgument("--ranks: {}", sized.message()));
    }
  }
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

int SynthCommand::RunPerturb() const {
  std::optional<sim::FaultSpec> fault;
  if (!perturb_fault_.empty()) {
    auto faults = sim::ParseFaults(perturb_fault_);
    if (!faults.ok()) return Fail(faults.status());
    if (faults->size() != 1) return Usage("--fault: give exactly one mechanism");
    fault = faults->front();
  }
  auto templates = perturb::LoadTemplates(perturb_inputs_);
  if (!templates.ok()) return Fail(templates.status());
  perturb::PerturbOptions options;
  options.fault = fault;
  options.steps = perturb_steps_;
  options.ranks = perturb_ranks_;
  options.seed = perturb_seed_;
  auto run = perturb::RunPerturb(*templates, options, perturb_output_);
  if (!run.ok()) return Fail(run.status());
  if (perturb_quiet_) return kExitOk;
  std::string window = "no fault";
  if (run->fault) {
    window = fmt::format("{} (steps {}-{})", sim::FormatFault(*run->fault), run->fault->onset_step,
                         run->fault->onset_step + run->fault->duration_steps - 1);
  }
  std::fprintf(stderr,
               "teller: wrote %s: %s, %d steps from %d template(s), %lld events, %s, %zu abnormal "
               "steps, %lld labelled instances, jitter sigma %.4f (%s)\n",
               perturb_output_.c_str(), run->engine.c_str(), run->steps, run->templates,
               static_cast<long long>(run->events), window.c_str(), run->abnormal_steps.size(),
               static_cast<long long>(run->labelled_instances), run->device_sigma,
               run->sigma_method.c_str());
  return kExitOk;
}

int SynthCommand::RunRealDataset() const {
  perturb::RealDatasetOptions options;
  options.traces = traces_;
  options.output = dataset_output_;
  if (dataset_seed_ != 0) options.seed = dataset_seed_;
  ProgressPrinter progress(quiet_);
  progress.Update("synth dataset real: bundles", 0, 0);
  options.on_bundle = [&progress](const std::string&, int done) {
    progress.Update("synth dataset real: bundles", static_cast<uint64_t>(done), 0);
  };
  auto summary = perturb::BuildRealDataset(options);
  progress.Finish("synth dataset real: bundles");
  if (!summary.ok()) return Fail(summary.status());
  Print(perturb::FormatRealDatasetSummary(options, *summary));
  return kExitOk;
}

}  // namespace teller::cli
