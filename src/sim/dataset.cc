#include "sim/dataset.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <set>

#include "base/file_util.h"
#include "base/robust.h"
#include "sim/engine_profile.h"
#include "sim/simulator.h"
#include "wire/dataset_files.h"

namespace teller::sim {
namespace {

// Category shares of the paper's faulty requests (section 4.2).
constexpr double kCategoryShare[] = {0.205, 0.213, 0.205, 0.181, 0.197};

// Held out of training in the injection-disjoint split: one mechanism per
// category and one engine.
constexpr Mechanism kHeldOutMechanisms[] = {Mechanism::kMemoryFragmentation,
                                            Mechanism::kKernelContention, Mechanism::kSyncLatency,
                                            Mechanism::kStragglerRank, Mechanism::kEnginePause};
constexpr EngineKind kHeldOutEngine = EngineKind::kVllmV1Offline;

// KV-cache pressure needs the paged KV cache of a continuous-batching engine; an engine
// that runs static batches per rank (Torch FSDP) has none.
bool Applicable(Mechanism m, EngineKind engine) {
  return m != Mechanism::kKvCachePressure ||
         ProfileFor(engine).batching() != BatchingPolicy::kStaticPerRank;
}

std::vector<Mechanism> MechanismsOf(FaultCategory category, EngineKind engine) {
  std::vector<Mechanism> out;
  for (const MechanismInfo& info : AllMechanisms()) {
    if (info.category == category && info.drawn_by_presets && Applicable(info.mechanism, engine))
      out.push_back(info.mechanism);
  }
  return out;
}

void Shuffle(std::vector<std::string>* items, uint64_t seed) {
  Rng rng(seed);
  for (size_t i = items->size(); i > 1; --i) {
    const size_t j = static_cast<size_t>(rng.UniformInt(0, static_cast<int64_t>(i - 1)));
    std::swap((*items)[i - 1], (*items)[j]);
  }
}

std::string Lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// The keyword-on-logs classifier: the first category whose keywords appear in the
// lines of the request's lifetime (or naming it).
std::string KeywordClassify(const std::vector<SimLogLine>& logs, const RequestSummary& r) {
  static const std::pair<const char*, const char*> kRules[] = {
      {"preempted", "memory_resource"},
      {"out of memory", "memory_resource"},
      {"kv cache usage: 9", "memory_resource"},
      {"illegal memory access", "cuda_kernel"},
      {"cuda error", "cuda_kernel"},
      {"xid", "cuda_kernel"},
      {"cudaerror", "runtime_driver"},
      {"driver", "runtime_driver"},
      {"watchdog", "communication_network"},
      {"nccl warn", "communication_network"},
      {"net/ib", "communication_network"},
      {"timeout", "communication_network"},
      {"waiting: ", "scheduling_software"},
      {"aborted", "scheduling_software"}};
  const int64_t end = r.finish_ns < 0 ? INT64_MAX : r.finish_ns + 50000000;
  for (const auto& [keyword, category] : kRules) {
    for (const SimLogLine& line : logs) {
      const bool mine = line.text.find(r.id) != std::string::npos;
      if (!mine && (line.true_ns < r.arrival_ns || line.true_ns > end)) continue;
      const std::string text = Lower(line.text);
      if (std::string_view(keyword) == "waiting: ") {
        // "Waiting: N reqs" with N > 0.
        const size_t p = text.find("waiting: ");
        if (p != std::string::npos && text.compare(p + 9, 2, "0 ") != 0) return category;
        continue;
      }
      if (text.find(keyword) != std::string::npos) return category;
    }
  }
  return "normal";
}

}  // namespace

base::StatusOr<DatasetPreset> GetPreset(std::string_view name) {
  DatasetPreset p;
  p.name = std::string(name);
  if (name == "paper") {
    p.engines = {{EngineKind::kSglang, 100, 40, 10},
                 {EngineKind::kTorchFsdp, 50, 24, 10},
                 {EngineKind::kVllmV0, 50, 15, 10},
                 {EngineKind::kVllmV1Offline, 50, 29, 10},
                 {EngineKind::kVllmV1Online, 50, 19, 10}};
    return p;
  }
  if (name == "small") {
    p.model_layers = 8;
    p.engines = {{EngineKind::kSglang, 8, 4, 4},
                 {EngineKind::kTorchFsdp, 4, 2, 4},
                 {EngineKind::kVllmV0, 4, 2, 4},
                 {EngineKind::kVllmV1Offline, 4, 2, 4},
                 {EngineKind::kVllmV1Online, 4, 2, 4}};
    return p;
  }
  if (name == "modern") {
    p.modern = true;
    p.model_layers = 8;
    p.engines = {{EngineKind::kSglang, 640, 256, 128},
                 {EngineKind::kVllmV1Offline, 640, 256, 128},
                 {EngineKind::kVllmV1Online, 640, 256, 128}};
    return p;
  }
  if (name == "fleet") {
    p.fleet_ranks = 64;
    p.model_layers = 8;
    p.engines = {{EngineKind::kVllmV1Online, 60, 24, 6},
                 {EngineKind::kSglang, 60, 24, 6},
                 {EngineKind::kVllmV1Offline, 60, 24, 6}};
    return p;
  }
  return base::InvalidArgument("unknown preset '{}' (expected small, paper, modern or fleet)",
                               name);
}

namespace {

// A fleet's size: whole nodes of 8 GPUs.
base::Status CheckFleetRanks(int32_t ranks) {
  if (ranks < 8 || ranks % 8 != 0) {
    return base::InvalidArgument("{} ranks: a fleet has 8 GPUs a node, so a multiple of 8", ranks);
  }
  return base::OkStatus();
}

}  // namespace

base::Status FleetConfig(int32_t ranks, int32_t layers, SimConfig* config) {
  TELLER_RETURN_IF_ERROR(CheckFleetRanks(ranks));
  config->cluster = ModernCluster(GpuKind::kH100, ranks / 8);
  const bool link =
      std::any_of(config->faults.begin(), config->faults.end(),
                  [](const FaultSpec& f) { return f.mechanism == Mechanism::kLinkDegradation; });
  if (link) {
    const int32_t mamba_period = config->model.mamba_period;
    config->model = MoeModel();
    config->model.mamba_period = mamba_period;
    config->cluster.expert_parallel = true;
  }
  config->model.layers = layers;
  return base::OkStatus();
}

void ModernBundleConfig(int32_t index, int32_t layers, SimConfig* config) {
  static constexpr GpuKind kGpus[] = {GpuKind::kH100, GpuKind::kH200, GpuKind::kB200};
  static constexpr int32_t kNodes[] = {2, 4, 8};
  const size_t d = static_cast<size_t>(index / 2);
  GpuKind gpu = kGpus[d % 3];
  bool moe = index % 2 == 0;
  // A degraded link shows only on traffic between nodes: the expert-parallel all-to-all.
  for (const FaultSpec& f : config->faults) {
    if (f.mechanism != Mechanism::kLinkDegradation) continue;
    moe = true;
    if (gpu == GpuKind::kB200) gpu = GpuKind::kH200;
  }
  // Expert parallelism spans 2 nodes (16 GPUs), data parallelism 2 to 8.
  const int32_t nodes = !moe                    ? kNodes[(d + d / 3) % 3]
                        : gpu == GpuKind::kB200 ? kNodes[(d / 3) % 2]
                                                : 2;
  config->cluster = ModernCluster(gpu, nodes);
  const int32_t mamba_period = config->model.mamba_period;  // a hybrid stays hybrid
  config->model = !moe ? DenseModernModel() : gpu == GpuKind::kB200 ? Fp4MoeModel() : MoeModel();
  config->model.layers = layers;
  config->model.mamba_period = mamba_period;
  // Hopper: the experts spread over every GPU (DeepEP-style all-to-all); Blackwell: each
  // node a replica with tensor-parallel experts, as in the real B200 trace.
  config->cluster.expert_parallel = moe && gpu != GpuKind::kB200;
  const int32_t dp = config->cluster.dp;
  EngineSpec& e = config->engine_spec;
  e.max_num_seqs = 256 * dp;
  e.max_num_batched_tokens *= dp;
  e.num_gpu_blocks = 16384 * dp;
  WorkloadSpec& w = config->workload;
  w.arrival_rate_per_s = 400;
  w.prompt_median = 1024;  // chat and RAG prompts of today's serving traffic
  w.prompt_max = 16000;
  w.output_median = 64;
  w.output_max = 256;
  // Requests arrive within the first fraction of a second and wait only while prompts queue
  // for the prefill budget: the faults that act on a waiting or a new request start then.
  for (FaultSpec& f : config->faults) {
    if (f.onset_step < 0 &&
        (f.mechanism == Mechanism::kStarvedRequest || f.mechanism == Mechanism::kDecodeMisroute)) {
      f.onset_step = e.graph_capture_steps + 2;
    }
  }
}

base::Status SizeFleetPreset(int32_t ranks, DatasetPreset* preset) {
  if (preset->fleet_ranks == 0) {
    return base::InvalidArgument("the {} preset has runs of its own sizes (only fleet takes ranks)",
                                 preset->name);
  }
  TELLER_RETURN_IF_ERROR(CheckFleetRanks(ranks));
  if (ranks != preset->fleet_ranks) preset->name = fmt::format("{}-{}", preset->name, ranks);
  preset->fleet_ranks = ranks;
  return base::OkStatus();
}

base::Status ScalePreset(int32_t factor, DatasetPreset* preset) {
  if (factor < 1 || factor > 100) {
    return base::InvalidArgument("scale {} out of range (expected 1 to 100)", factor);
  }
  if (factor == 1) return base::OkStatus();
  for (EnginePlan& plan : preset->engines) {
    plan.requests *= factor;
    plan.faulty_target *= factor;
  }
  preset->name = fmt::format("{}-x{}", preset->name, factor);
  return base::OkStatus();
}

namespace {

// What a dataset build keeps between bundles.
struct DatasetBuild {
  explicit DatasetBuild(uint64_t seed) : rng(MixSeed(seed, 9)) {}

  DatasetSummary summary;
  wire::DatasetManifest manifest;
  std::vector<std::string> all_keys;
  std::vector<std::string> heldout_keys, other_keys;
  std::map<int, int32_t> category_faulty;  // by category index
  std::map<int, size_t> next_mechanism;
  Rng rng;
  // Long-tail metrics for the difficulty check.
  int64_t tp = 0, fp = 0, fn = 0;
  std::map<std::string, std::array<int64_t, 3>> class_counts;  // tp, fp, fn per class
  int64_t correct = 0, classified = 0;
  CeilingCounter ceiling;
};

int32_t BundlesOf(const EnginePlan& plan) {
  return (plan.requests + plan.requests_per_bundle - 1) / plan.requests_per_bundle;
}

// The fault of a faulty bundle: a mechanism of the category furthest below its share
// of faulty requests, taking the category's mechanisms in turn.
Mechanism PickMechanism(EngineKind engine, DatasetBuild* build) {
  int best = 0;
  double best_gap = -1e9;
  int32_t total = 0;
  for (const auto& [c, n] : build->category_faulty) total += n;
  for (int c = 0; c < 5; ++c) {
    const double gap = kCategoryShare[c] * (total + 5) - build->category_faulty[c];
    if (gap > best_gap) {
      best_gap = gap;
      best = c;
    }
  }
  std::vector<Mechanism> options = MechanismsOf(kAllCategories[best], engine);
  return options[build->next_mechanism[best]++ % options.size()];
}

// The run of bundle b of plan; done counts the bundles before it.
SimConfig PlanBundle(const DatasetPreset& preset, const EnginePlan& plan, int32_t b, int done,
                     int32_t faulty_so_far, DatasetBuild* build) {
  const int32_t bundles = BundlesOf(plan);
  SimConfig config = DefaultConfig(plan.engine);
  config.model.layers = preset.model_layers;
  config.fault_window_fraction = 0.5;
  config.seed = MixSeed(preset.seed, static_cast<uint64_t>(done) * 7919 + 13);
  config.run_id = fmt::format("{}-{:03d}", EngineName(plan.engine), b);
  config.workload.num_requests =
      std::min(plan.requests_per_bundle, plan.requests - b * plan.requests_per_bundle);
  // Faulty bundle? Keep the running faulty count on the target line.
  const double want = plan.faulty_target * double(b + 1) / bundles;
  const bool faulty = faulty_so_far + 0.45 * config.workload.num_requests <= want + 0.5;
  bool hybrid = build->rng.Bernoulli(0.15);
  if (faulty) {
    FaultSpec spec;
    spec.mechanism = PickMechanism(plan.engine, build);
    config.faults.push_back(spec);
    if (spec.mechanism == Mechanism::kDecodeMisroute) hybrid = true;
  }
  if (hybrid) config.model.mamba_period = 4;
  if (preset.modern) ModernBundleConfig(done, preset.model_layers, &config);
  // The preset's size is a multiple of 8: FleetConfig cannot refuse it.
  if (preset.fleet_ranks > 0) (void)FleetConfig(preset.fleet_ranks, preset.model_layers, &config);
  return config;
}

// Counts the run's requests, files their keys for the splits and scores the keyword
// classifier on each; returns the bundle's faulty requests.
int32_t AddRequests(const std::string& bundle, const RunSummary& run, EngineKind engine,
                    EngineStats* stats, DatasetBuild* build, std::vector<std::string>* keys) {
  int32_t bundle_faulty = 0;
  for (const RequestSummary& r : run.requests) {
    ++stats->requests;
    stats->request_steps += r.steps;
    stats->nodes += r.nodes;
    if (r.is_fault) {
      ++bundle_faulty;
      for (int c = 0; c < 5; ++c) {
        if (CategoryName(kAllCategories[c]) == r.fault_type) ++build->category_faulty[c];
      }
      ++build->summary.category_requests[r.fault_type];
    }
    const std::string key = bundle + "/" + r.id;
    build->all_keys.push_back(key);
    bool held = engine == kHeldOutEngine;
    for (const ResolvedFault& f : run.faults) {
      for (Mechanism m : kHeldOutMechanisms) held |= f.spec.mechanism == m;
    }
    (held ? build->heldout_keys : build->other_keys).push_back(key);
    keys->push_back(key);
    // Keyword classifier on this request.
    const std::string truth = r.is_fault ? r.fault_type : "normal";
    const std::string guess = KeywordClassify(run.logs, r);
    ++build->classified;
    if (guess == truth) {
      ++build->correct;
      ++build->class_counts[truth][0];
    } else {
      ++build->class_counts[guess][1];
      ++build->class_counts[truth][2];
    }
  }
  return bundle_faulty;
}

// Z-score detector on step durations (robust: median / MAD per bundle and phase is
// not known to it; it sees durations only).
void ScoreStepZScores(const RunSummary& run, DatasetBuild* build) {
  std::vector<double> durations;
  for (int64_t ns : run.step_ns) durations.push_back(static_cast<double>(ns));
  std::vector<double> sorted = durations;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted.empty() ? 0 : sorted[sorted.size() / 2];
  std::vector<double> dev;
  for (double d : durations) dev.push_back(std::fabs(d - median));
  std::sort(dev.begin(), dev.end());
  const double mad = dev.empty() ? 1 : std::max(1.0, base::SigmaOfMad(dev[dev.size() / 2]));
  for (size_t i = 0; i < durations.size(); ++i) {
    const bool flagged = (durations[i] - median) / mad > 3.0;
    const bool truth = run.step_anomaly[i];
    build->tp += flagged && truth;
    build->fp += flagged && !truth;
    build->fn += !flagged && truth;
    ++build->summary.difficulty.steps;
  }
}

wire::ManifestBundle ManifestEntry(const SimConfig& config, const RunSummary& run,
                                   std::vector<std::string> keys, int32_t bundle_faulty) {
  wire::ManifestBundle entry;
  entry.bundle = config.run_id;
  entry.engine = std::string(EngineName(config.engine));
  entry.seed = config.seed;
  entry.model = config.model.mamba_period > 0
                    ? config.model.name + " (hybrid: Mamba2 every 4th layer)"
                    : config.model.name;
  if (!config.faults.empty()) {
    const MechanismInfo& info = InfoOf(config.faults[0].mechanism);
    entry.fault = std::string(info.name);
    entry.category = std::string(CategoryName(info.category));
  }
  entry.requests = std::move(keys);
  entry.faulty_requests = bundle_faulty;
  entry.engine_steps = run.steps;
  entry.events = run.events;
  entry.crashed = run.crashed;
  return entry;
}

void FinishDifficulty(DatasetBuild* build) {
  DifficultyResult& d = build->summary.difficulty;
  d.requests = build->classified;
  const int64_t tp = build->tp, fp = build->fp, fn = build->fn;
  d.zscore_precision = tp + fp > 0 ? double(tp) / (tp + fp) : 0;
  d.zscore_recall = tp + fn > 0 ? double(tp) / (tp + fn) : 0;
  const double p = d.zscore_precision, r = d.zscore_recall;
  d.zscore_step_f1 = p + r > 0 ? 2 * p * r / (p + r) : 0;
  double f1_sum = 0;
  int classes = 0;
  for (const char* c : {"normal", "memory_resource", "cuda_kernel", "runtime_driver",
                        "communication_network", "scheduling_software"}) {
    const auto& k = build->class_counts[c];
    const double prec = k[0] + k[1] > 0 ? double(k[0]) / (k[0] + k[1]) : 0;
    const double rec = k[0] + k[2] > 0 ? double(k[0]) / (k[0] + k[2]) : 0;
    f1_sum += prec + rec > 0 ? 2 * prec * rec / (prec + rec) : 0;
    ++classes;
  }
  d.keyword_macro_f1 = f1_sum / classes;
  d.keyword_accuracy = build->classified > 0 ? double(build->correct) / build->classified : 0;
}

wire::DatasetSplit ThreeParts(std::string name, std::vector<std::string> train,
                              std::vector<std::string> val, std::vector<std::string> test) {
  wire::DatasetSplit split;
  split.name = std::move(name);
  split.parts = {{"train", std::move(train)}, {"val", std::move(val)}, {"test", std::move(test)}};
  return split;
}

// Request-disjoint 80/10/10.
wire::DatasetSplit RequestDisjointSplit(const DatasetPreset& preset, const DatasetBuild& build) {
  std::vector<std::string> keys = build.all_keys;
  Shuffle(&keys, MixSeed(preset.seed, 80));
  const size_t n = keys.size(), n_train = n * 8 / 10, n_val = n / 10;
  const auto val_end = keys.begin() + n_train + n_val;
  return ThreeParts("request_disjoint",
                    std::vector<std::string>(keys.begin(), keys.begin() + n_train),
                    std::vector<std::string>(keys.begin() + n_train, val_end),
                    std::vector<std::string>(val_end, keys.end()));
}

// Bundle-disjoint 70/10/20 per engine: requests of one run share engine steps (a
// horizontal step record of one request is nearly the same as its batch mates'), so
// only whole runs keep the test part unseen.
wire::DatasetSplit BundleDisjointSplit(const DatasetPreset& preset, const DatasetBuild& build) {
  std::map<std::string, std::vector<std::string>> bundles_of_engine;
  for (const wire::ManifestBundle& entry : build.manifest.bundles) {
    bundles_of_engine[entry.engine].push_back(entry.bundle);
  }
  std::map<std::string, std::string> part_of_bundle;
  uint64_t salt = 82;
  for (auto& [engine, bundles] : bundles_of_engine) {
    Shuffle(&bundles, MixSeed(preset.seed, salt++));
    const size_t n = bundles.size();
    const size_t n_test = n < 2 ? 0 : std::max<size_t>(1, (n * 2 + 5) / 10);
    const size_t n_val = n < 3 ? 0 : std::max<size_t>(1, (n + 5) / 10);
    for (size_t i = 0; i < n; ++i) {
      part_of_bundle[bundles[i]] = i < n_test ? "test" : i < n_test + n_val ? "val" : "train";
    }
  }
  std::map<std::string, std::vector<std::string>> parts;
  for (const std::string& key : build.all_keys) {
    parts[part_of_bundle[key.substr(0, key.find('/'))]].push_back(key);
  }
  return ThreeParts("bundle_disjoint", parts["train"], parts["val"], parts["test"]);
}

// Injection-disjoint: the held-out mechanisms and engine are the test part.
wire::DatasetSplit InjectionDisjointSplit(const DatasetPreset& preset, const DatasetBuild& build) {
  std::vector<std::string> keys = build.other_keys;
  Shuffle(&keys, MixSeed(preset.seed, 81));
  const size_t n_val = keys.size() / 9;
  wire::DatasetSplit split =
      ThreeParts("injection_disjoint", std::vector<std::string>(keys.begin() + n_val, keys.end()),
                 std::vector<std::string>(keys.begin(), keys.begin() + n_val), build.heldout_keys);
  split.held_out_engines = std::vector<std::string>{std::string(EngineName(kHeldOutEngine))};
  split.held_out_mechanisms.emplace();
  for (Mechanism m : kHeldOutMechanisms) {
    split.held_out_mechanisms->push_back(std::string(InfoOf(m).name));
  }
  return split;
}

// Runs bundle b of plan and adds it to the build.
base::Status AddBundle(const DatasetPreset& preset, const EnginePlan& plan, int32_t b, int done,
                       const DatasetOptions& options, int32_t* faulty_so_far, DatasetBuild* build) {
  const SimConfig config = PlanBundle(preset, plan, b, done, *faulty_so_far, build);
  const std::string mechanism_name =
      config.faults.empty() ? "none" : std::string(InfoOf(config.faults[0].mechanism).name);
  const std::string dir = options.output + "/" + config.run_id;
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  SimOptions sim_options;
  sim_options.keep_logs = true;
  TELLER_ASSIGN_OR_RETURN(RunSummary run, RunSimulation(config, dir, sim_options));
  EngineStats& stats = build->summary.engines[plan.engine];
  std::vector<std::string> keys;
  const int32_t bundle_faulty = AddRequests(config.run_id, run, plan.engine, &stats, build, &keys);
  *faulty_so_far += bundle_faulty;
  stats.faulty += bundle_faulty;
  stats.engine_steps += run.steps;
  stats.events += run.events;
  ++stats.bundles;
  build->summary.mechanism_bundles[mechanism_name]++;
  ScoreStepZScores(run, build);
  build->ceiling.AddRun(run.step_truth, mechanism_name, bundle_faulty);
  build->manifest.bundles.push_back(ManifestEntry(config, run, std::move(keys), bundle_faulty));
  return base::OkStatus();
}

}  // namespace

base::StatusOr<DatasetSummary> BuildDataset(const DatasetPreset& preset,
                                            const DatasetOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  std::error_code ec;
  std::filesystem::create_directories(options.output, ec);
  if (ec) return base::IoError("cannot create {}: {}", options.output, ec.message());

  DatasetBuild build(preset.seed);
  int total_bundles = 0;
  for (const EnginePlan& e : preset.engines) total_bundles += BundlesOf(e);
  int done = 0;
  for (const EnginePlan& plan : preset.engines) {
    int32_t faulty_so_far = 0;
    for (int32_t b = 0; b < BundlesOf(plan); ++b) {
      TELLER_RETURN_IF_ERROR(AddBundle(preset, plan, b, done, options, &faulty_so_far, &build));
      ++done;
      if (options.on_bundle) {
        options.on_bundle(build.manifest.bundles.back().bundle, done, total_bundles);
      }
    }
  }
  FinishDifficulty(&build);
  build.summary.ceiling = build.ceiling.Result();
  build.summary.effects = build.ceiling.effects();

  wire::DatasetSplits splits;
  splits.seed = preset.seed;
  splits.splits = {RequestDisjointSplit(preset, build), BundleDisjointSplit(preset, build),
                   InjectionDisjointSplit(preset, build)};
  DatasetSummary& summary = build.summary;
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  build.manifest.preset = preset.name;
  build.manifest.seed = preset.seed;
  TELLER_RETURN_IF_ERROR(wire::WriteDatasetFiles(options.output, build.manifest, splits));
  TELLER_RETURN_IF_ERROR(
      base::WriteFileAtomic(options.output + "/stats.md", FormatDatasetSummary(preset, summary)));
  return summary;
}

std::string FormatDatasetSummary(const DatasetPreset& preset, const DatasetSummary& s) {
  std::string out = fmt::format("Dataset preset `{}` (seed {}).\n\n", preset.name, preset.seed);
  out +=
      "| Engine | Requests | Faulty | Steps | Nodes | Bundles | Engine steps | Events on disk |\n";
  out += "| --- | --- | --- | --- | --- | --- | --- | --- |\n";
  EngineStats total;
  for (const EnginePlan& e : preset.engines) {
    auto it = s.engines.find(e.engine);
    if (it == s.engines.end()) continue;
    const EngineStats& x = it->second;
    out += fmt::format("| {} | {} | {} | {} | {:.2f}M | {} | {} | {:.2f}M |\n",
                       EngineDisplayName(e.engine), x.requests, x.faulty, x.request_steps,
                       x.nodes / 1e6, x.bundles, x.engine_steps, x.events / 1e6);
    total.requests += x.requests;
    total.faulty += x.faulty;
    total.request_steps += x.request_steps;
    total.nodes += x.nodes;
    total.bundles += x.bundles;
    total.engine_steps += x.engine_steps;
    total.events += x.events;
  }
  out +=
      fmt::format("| Overall | {} | {} ({:.1f}%) | {} | {:.2f}M | {} | {} | {:.2f}M |\n\n",
                  total.requests, total.faulty,
                  total.requests ? 100.0 * total.faulty / total.requests : 0.0, total.request_steps,
                  total.nodes / 1e6, total.bundles, total.engine_steps, total.events / 1e6);
  out += "| Fault category | Faulty requests | Share |\n| --- | --- | --- |\n";
  for (FaultCategory c : kAllCategories) {
    auto it = s.category_requests.find(std::string(CategoryName(c)));
    const int32_t n = it == s.category_requests.end() ? 0 : it->second;
    out += fmt::format("| {} | {} | {:.1f}% |\n", CategoryName(c), n,
                       total.faulty ? 100.0 * n / total.faulty : 0.0);
  }
  out += "\n| Mechanism | Bundles |\n| --- | --- |\n";
  for (const auto& [m, n] : s.mechanism_bundles) out += fmt::format("| {} | {} |\n", m, n);
  const DifficultyResult& d = s.difficulty;
  out += fmt::format(
      "\nDifficulty check ({} steps, {} requests):\n\n| Detector | Metric | Value | Must stay "
      "below |\n| --- | --- | --- | --- |\n| step-duration z-score (robust, >3 MAD) | step F1 | "
      "{:.3f} (P {:.3f}, R {:.3f}) | 0.85 |\n| keyword-on-logs classifier | macro F1 (6 classes) | "
      "{:.3f} (accuracy {:.3f}) | 0.60 |\n",
      d.steps, d.requests, d.zscore_step_f1, d.zscore_precision, d.zscore_recall,
      d.keyword_macro_f1, d.keyword_accuracy);
  out += FormatCeiling(s.ceiling, s.effects);
  out += fmt::format("\nGenerated in {:.1f} s.\n", s.seconds);
  return out;
}

}  // namespace teller::sim
