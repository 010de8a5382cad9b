#include "perturb/real_dataset.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <system_error>

#include "base/file_util.h"
#include "perturb/perturb.h"
#include "perturb/step_templates.h"
#include "sim/fault_spec.h"
#include "sim/rng.h"
#include "wire/dataset_files.h"

namespace teller::perturb {
namespace {

namespace fs = std::filesystem;
using sim::Mechanism;

// Held out of training in the injection-disjoint split, with the SGLang trace.
constexpr Mechanism kHeldOut[] = {Mechanism::kKernelContention, Mechanism::kSyncLatency,
                                  Mechanism::kEnginePause};
constexpr std::string_view kHeldOutEngine = "sglang";

constexpr Mechanism kMechanisms[] = {
    Mechanism::kGpuThrottle,        Mechanism::kKernelSlowdown, Mechanism::kLaunchLatency,
    Mechanism::kHostMemoryPressure, Mechanism::kMemcpyLatency,  Mechanism::kAllocatorSlowPath,
    Mechanism::kKernelContention,   Mechanism::kSyncLatency,    Mechanism::kEnginePause};

bool IsTraceFile(const fs::path& path) {
  const std::string name = path.filename().string();
  auto ends = [&](std::string_view tail) {
    return name.size() >= tail.size() &&
           name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
  };
  return ends(".json") || ends(".json.gz") || ends(".sqlite");
}

std::string Stem(const std::string& file) {
  std::string stem = file;
  for (std::string_view tail : {".gz", ".json", ".sqlite", ".pt.trace"}) {
    if (stem.size() > tail.size() &&
        stem.compare(stem.size() - tail.size(), tail.size(), tail) == 0)
      stem.resize(stem.size() - tail.size());
  }
  return stem;
}

// Whether the templates hold what the mechanism acts on.
bool Applicable(Mechanism m, const TraceTemplates& t) {
  bool launch = false, copy = false, sync = false, range = false, kernel = false;
  for (const StepTemplate& s : t.steps) {
    for (const TemplateEvent& e : s.events) {
      launch |= e.kind == EventKind::kApi && e.name.find("Launch") != std::string_view::npos;
      copy |= e.kind == EventKind::kMemcpy;
      sync |= e.kind == EventKind::kSync ||
              (e.kind == EventKind::kApi && e.name.find("Synchronize") != std::string_view::npos);
      range |= e.kind == EventKind::kRange && e.tid == s.main_tid;
      kernel |= e.kind == EventKind::kKernel;
    }
  }
  switch (m) {
    case Mechanism::kLaunchLatency:
      return launch;
    case Mechanism::kMemcpyLatency:
      return copy;
    case Mechanism::kSyncLatency:
      return sync;
    case Mechanism::kAllocatorSlowPath:
      return range;
    default:
      return kernel;
  }
}

struct Build {
  wire::DatasetManifest manifest;
  std::vector<std::string> held_out, other;  // bundle keys
  RealDatasetSummary summary;
  sim::CeilingCounter ceiling;
};

// The runs of one trace's templates.
base::Status AddTrace(const RealDatasetOptions& options, const std::string& file, size_t index,
                      const TraceTemplates& templates, Build* build) {
  RealTraceStats stats;
  stats.file = file;
  stats.engine = EngineOfTemplates(templates);
  stats.templates = static_cast<int32_t>(templates.steps.size());
  int64_t events = 0;
  for (const StepTemplate& s : templates.steps) events += static_cast<int64_t>(s.events.size());
  stats.template_events = events / std::max<int64_t>(1, stats.templates);
  stats.step_source = templates.step_source;
  stats.device_sigma = templates.device_sigma;
  stats.sigma_method = templates.sigma_method;
  stats.steps_per_run = static_cast<int32_t>(std::clamp<int64_t>(
      options.max_run_events / std::max<int64_t>(1, stats.template_events), 6, options.max_steps));
  std::vector<Mechanism> mechanisms;
  for (Mechanism m : kMechanisms) {
    if (Applicable(m, templates)) mechanisms.push_back(m);
  }
  const int32_t runs = options.fault_free_runs + (mechanisms.empty() ? 0 : options.faulty_runs);
  for (int32_t r = 0; r < runs; ++r) {
    PerturbOptions run;
    run.steps = stats.steps_per_run;
    run.seed = sim::MixSeed(options.seed, index * 64 + static_cast<uint64_t>(r));
    run.run_id = fmt::format("{}-r{}", Stem(file), r);
    std::string mechanism = "none";
    bool held = stats.engine == kHeldOutEngine;
    if (r >= options.fault_free_runs) {
      const size_t k = (index * static_cast<size_t>(options.faulty_runs) +
                        static_cast<size_t>(r - options.fault_free_runs)) %
                       mechanisms.size();
      sim::FaultSpec spec;
      spec.mechanism = mechanisms[k];
      run.fault = spec;
      mechanism = std::string(sim::InfoOf(spec.mechanism).name);
      for (Mechanism m : kHeldOut) held |= m == spec.mechanism;
    }
    const std::string dir = options.output + "/" + run.run_id;
    std::error_code ec;
    fs::remove_all(dir, ec);
    TELLER_ASSIGN_OR_RETURN(PerturbSummary done, RunPerturb(templates, run, dir));
    wire::ManifestBundle entry;
    entry.bundle = run.run_id;
    entry.engine = stats.engine;
    entry.seed = run.seed;
    entry.model = file;
    entry.fault = mechanism;
    if (run.fault) {
      entry.category = std::string(sim::CategoryName(sim::InfoOf(run.fault->mechanism).category));
    }
    build->ceiling.AddRun(done.step_truth, mechanism, 0);
    entry.engine_steps = done.steps;
    entry.events = done.events;
    build->manifest.bundles.push_back(entry);
    (held ? build->held_out : build->other).push_back(run.run_id + "/");
    ++stats.bundles;
    stats.events += done.events;
    ++build->summary.bundles;
    if (options.on_bundle) options.on_bundle(run.run_id, build->summary.bundles);
  }
  build->summary.traces.push_back(std::move(stats));
  return base::OkStatus();
}

void Shuffle(std::vector<std::string>* keys, uint64_t seed) {
  sim::Rng rng(seed);
  for (size_t i = keys->size(); i > 1; --i) {
    std::swap((*keys)[i - 1],
              (*keys)[static_cast<size_t>(rng.UniformInt(0, static_cast<int64_t>(i) - 1))]);
  }
}

wire::DatasetSplit Parts(std::string name, const std::vector<std::string>& keys, size_t n_test,
                         size_t n_val) {
  wire::DatasetSplit split;
  split.name = std::move(name);
  const auto val_end = keys.begin() + static_cast<ptrdiff_t>(n_test + n_val);
  split.parts = {
      {"train", std::vector<std::string>(val_end, keys.end())},
      {"val", std::vector<std::string>(keys.begin() + static_cast<ptrdiff_t>(n_test), val_end)},
      {"test",
       std::vector<std::string>(keys.begin(), keys.begin() + static_cast<ptrdiff_t>(n_test))}};
  return split;
}

// Keys are "bundle/": real captures carry no request ids, so a key names a whole bundle.
wire::DatasetSplits Splits(uint64_t seed, const Build& build) {
  wire::DatasetSplits splits;
  splits.seed = seed;
  splits.splits.push_back(Parts("request_disjoint", {}, 0, 0));
  std::vector<std::string> all;
  for (const wire::ManifestBundle& b : build.manifest.bundles) all.push_back(b.bundle + "/");
  Shuffle(&all, sim::MixSeed(seed, 82));
  const size_t n = all.size();
  splits.splits.push_back(Parts("bundle_disjoint", all, n < 2 ? 0 : std::max<size_t>(1, n / 5),
                                n < 3 ? 0 : std::max<size_t>(1, n / 10)));
  std::vector<std::string> other = build.other;
  Shuffle(&other, sim::MixSeed(seed, 81));
  std::vector<std::string> keys = build.held_out;
  keys.insert(keys.end(), other.begin(), other.end());
  wire::DatasetSplit injection =
      Parts("injection_disjoint", keys, build.held_out.size(), other.size() / 9);
  injection.held_out_engines = std::vector<std::string>{std::string(kHeldOutEngine)};
  injection.held_out_mechanisms.emplace();
  for (Mechanism m : kHeldOut) injection.held_out_mechanisms->emplace_back(sim::InfoOf(m).name);
  splits.splits.push_back(std::move(injection));
  return splits;
}

}  // namespace

base::StatusOr<RealDatasetSummary> BuildRealDataset(const RealDatasetOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  std::error_code ec;
  if (!fs::is_directory(options.traces, ec)) {
    return base::NotFound("{}: not a folder of real traces", options.traces);
  }
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(options.traces, ec)) {
    if (entry.is_regular_file() && IsTraceFile(entry.path())) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  if (files.empty())
    return base::NotFound("{}: no Kineto JSON or nsys SQLite file", options.traces);
  fs::create_directories(options.output, ec);
  if (ec) return base::IoError("cannot create {}: {}", options.output, ec.message());
  Build build;
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string file = files[i].filename().string();
    auto templates = LoadTemplates({files[i].string()});
    if (!templates.ok()) {
      build.summary.skipped[file] = templates.status().message();
      continue;
    }
    TELLER_RETURN_IF_ERROR(AddTrace(options, file, i, *templates, &build));
  }
  if (build.manifest.bundles.empty()) {
    return base::InvalidArgument("{}: no trace has a usable step", options.traces);
  }
  build.summary.ceiling = build.ceiling.Result();
  build.summary.effects = build.ceiling.effects();
  build.manifest.preset = "real";
  build.manifest.seed = options.seed;
  TELLER_RETURN_IF_ERROR(
      wire::WriteDatasetFiles(options.output, build.manifest, Splits(options.seed, build)));
  build.summary.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  TELLER_RETURN_IF_ERROR(base::WriteFileAtomic(options.output + "/stats.md",
                                               FormatRealDatasetSummary(options, build.summary)));
  return std::move(build.summary);
}

std::string FormatRealDatasetSummary(const RealDatasetOptions& options,
                                     const RealDatasetSummary& summary) {
  std::string out = fmt::format(
      "# Dataset `real` (seed {})\n\nPerturbed replays of the real traces of `{}` (`teller synth "
      "perturb`): per trace {} fault-free run(s) and {} with one mechanism each. No request "
      "ids: split keys name whole bundles (`bundle/`), request_disjoint is empty.\n\n",
      options.seed, options.traces, options.fault_free_runs, options.faulty_runs);
  out +=
      "| trace | engine | steps from | templates | events/template | jitter sigma | bundles | "
      "steps/run | events |\n|---|---|---|---:|---:|---:|---:|---:|---:|\n";
  for (const RealTraceStats& t : summary.traces) {
    out += fmt::format("| {} | {} | {} | {} | {} | {:.4f} ({}) | {} | {} | {} |\n", t.file,
                       t.engine, t.step_source, t.templates, t.template_events, t.device_sigma,
                       t.sigma_method, t.bundles, t.steps_per_run, t.events);
  }
  out += sim::FormatCeiling(summary.ceiling, summary.effects);
  if (!summary.skipped.empty()) {
    out += "\n## Skipped traces\n\n";
    for (const auto& [file, why] : summary.skipped) out += fmt::format("- {}: {}\n", file, why);
  }
  out += fmt::format("\n{} bundles.\n", summary.bundles);
  return out;
}

}  // namespace teller::perturb
