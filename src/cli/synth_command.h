// `teller synth run` (one simulated bundle), `teller synth perturb` (a real trace
// replayed with an injected fault) and `teller synth dataset` (the benchmark dataset,
// simulated or, with --preset real, from the real traces). Register before parsing, run after:
//   cli::SynthCommand synth(&app);
//   ... app.parse(argc, argv) ...
//   if (synth.selected()) return synth.Run();
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace teller::cli {

class SynthCommand {
 public:
  explicit SynthCommand(CLI::App* app);
  // True when `teller synth run` or `teller synth dataset` was given.
  bool selected() const;
  // Runs the chosen subcommand; returns the exit code (0 ok, 1 failure).
  int Run() const;

 private:
  int RunOne() const;
  int RunDataset() const;
  int RunRealDataset() const;
  int RunPerturb() const;

  CLI::App* synth_ = nullptr;
  CLI::App* run_ = nullptr;
  CLI::App* dataset_ = nullptr;
  CLI::App* perturb_ = nullptr;
  // run
  std::string engine_ = "vllm-v1-online";
  std::string faults_;
  uint64_t seed_ = 1;
  std::string output_;
  int32_t requests_ = 12;
  int32_t nodes_ = -1;
  int32_t gpus_per_node_ = -1;
  int32_t tp_ = -1;
  int32_t pp_ = -1;
  int32_t dp_ = -1;
  int32_t ranks_ = -1;
  int32_t layers_ = -1;
  int32_t mamba_period_ = 0;
  double rate_ = -1;
  int32_t output_median_ = -1;
  int32_t modern_bundle_ = -1;
  // dataset
  std::string preset_ = "small";
  uint64_t dataset_seed_ = 0;
  int32_t dataset_scale_ = 1;
  std::string dataset_output_;
  std::string traces_ = "../shared/real-traces";
  bool quiet_ = false;
  // perturb
  std::vector<std::string> perturb_inputs_;
  std::string perturb_fault_;
  std::string perturb_output_;
  int32_t perturb_steps_ = 32;
  int32_t perturb_ranks_ = 1;
  int32_t dataset_ranks_ = -1;
  uint64_t perturb_seed_ = 1;
  bool perturb_quiet_ = false;
};

}  // namespace teller::cli
