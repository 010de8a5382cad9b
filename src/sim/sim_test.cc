#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "base/file_util.h"
#include "base/testing.h"
#include "model/layer.h"
#include "sim/dataset.h"
#include "sim/engine_profile.h"
#include "sim/fault_spec.h"
#include "sim/rng.h"
#include "sim/simulated_trace_testing.h"
#include "sim/simulator.h"
#include "sim/time_units.h"
#include "sim/twin_diff.h"
#include "wire/bundle_reader.h"
#include "wire/dataset_files.h"
#include "wire/labels_file.h"
#include "wire/store_names.h"

namespace teller::sim {
namespace {

using Json = nlohmann::json;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::map<std::string, std::string> FilesOf(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) {
      files[std::filesystem::relative(e.path(), dir).string()] = ReadAll(e.path().string());
    }
  }
  return files;
}

SimConfig SmallConfig(EngineKind engine, uint64_t seed) {
  SimConfig config = DefaultConfig(engine);
  config.model.layers = 8;
  config.workload.num_requests = 6;
  config.seed = seed;
  return config;
}

// Events of each step seen through the observer (true times).
struct StepCapture {
  std::vector<StepPlan> plans;
  std::vector<std::vector<RankBuffer>> buffers;
  // Names point into the simulator's storage, freed when RunSimulation returns (ASan
  // found the tests reading them afterwards): keep copies.
  std::deque<std::string> names;
  SimOptions Options() {
    SimOptions o;
    o.on_step = [this](const StepPlan& p, const std::vector<RankBuffer>& b) {
      plans.push_back(p);
      buffers.push_back(b);
      auto own = [this](std::string_view& view) { view = names.emplace_back(view); };
      // Views into the step's arg storage die with the step: drop them.
      for (RankBuffer& r : buffers.back()) {
        r.step_requests.clear();
        for (auto& h : r.ranges) h.args = {};
        for (auto& h : r.ranges) own(h.name);
        for (auto& a : r.api_calls) own(a.name);
        for (auto& k : r.kernels) own(k.name);
        for (auto& c : r.collectives) {
          own(c.op);
          own(c.communicator);
          own(c.dtype);
        }
      }
    };
    return o;
  }
};

int64_t Duration(const wire::KernelRecord& k) { return k.end_ns - k.start_ns; }

bool IsNccl(std::string_view name) { return name.starts_with("nccl"); }

TEST(Rng, DeterministicAndSane) {
  Rng a(42), b(42), c(43);
  for (int i = 0; i < 100; ++i) {
    const uint64_t x = a.Next();
    EXPECT_EQ(x, b.Next());
    EXPECT_NE(x, c.Next());
  }
  Rng r(7);
  double sum = 0, sum_sq = 0, uni = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double z = r.Normal();
    sum += z;
    sum_sq += z * z;
    uni += r.Uniform();
  }
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sum_sq / n, 1.0, 0.02);
  EXPECT_NEAR(uni / n, 0.5, 0.005);
}

TEST(FaultSpec, ParsesAndFormats) {
  auto faults = ParseFaults(
      "gpu_throttle:rank=1,magnitude=0.3,onset=5,duration=4;kernel_slowdown:family=gemm");
  ASSERT_TRUE(faults.ok()) << faults.status().ToString();
  ASSERT_EQ(faults->size(), 2u);
  EXPECT_EQ((*faults)[0].mechanism, Mechanism::kGpuThrottle);
  EXPECT_EQ((*faults)[0].rank, 1);
  EXPECT_DOUBLE_EQ((*faults)[0].magnitude, 0.3);
  EXPECT_EQ((*faults)[1].family, "gemm");
  auto again = ParseFaults(FormatFault((*faults)[0]));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(FormatFault((*again)[0]), FormatFault((*faults)[0]));
  EXPECT_FALSE(ParseFaults("gpu_throttle:rnk=1").ok());
  EXPECT_FALSE(ParseFaults("no_such_fault").ok());
  // Five categories, at least three mechanisms each.
  std::map<FaultCategory, int> per_category;
  for (const MechanismInfo& m : AllMechanisms()) ++per_category[m.category];
  EXPECT_EQ(per_category.size(), 5u);
  for (const auto& [c, n] : per_category) EXPECT_GE(n, 3) << CategoryName(c);
}

TEST(EngineProfile, OnePerEngineWithItsLayout) {
  for (EngineKind engine : kAllEngines) {
    const EngineProfile& profile = ProfileFor(engine);
    EXPECT_EQ(profile.kind(), engine) << EngineName(engine);
    EXPECT_FALSE(profile.ranges().step.empty()) << EngineName(engine);
    EXPECT_GT(profile.input_copies(), 0) << EngineName(engine);
    EXPECT_FALSE(profile.LaunchCommand(DefaultConfig(engine)).empty()) << EngineName(engine);
  }
  const ClusterSpec serving = DefaultConfig(EngineKind::kVllmV1Online).cluster;  // tp 3, pp 2
  const EngineProfile& v1 = ProfileFor(EngineKind::kVllmV1Online);
  EXPECT_EQ(v1.batching(), BatchingPolicy::kChunkedPrefill);
  EXPECT_EQ(v1.DataParallelSize(serving), 1);
  EXPECT_EQ(v1.PipelineStages(serving), 2);
  EXPECT_EQ(v1.CollectiveGroupSize(serving), 3);
  EXPECT_EQ(v1.CommunicatorCount(serving), 2 + 2 * 3);
  EXPECT_EQ(ProfileFor(EngineKind::kVllmV0).batching(), BatchingPolicy::kPrefillFirst);
  EXPECT_EQ(ProfileFor(EngineKind::kSglang).batching(), BatchingPolicy::kPrefillFirst);
  const ClusterSpec replicas = DefaultConfig(EngineKind::kTorchFsdp).cluster;  // tp 1, pp 1
  const EngineProfile& fsdp = ProfileFor(EngineKind::kTorchFsdp);
  EXPECT_TRUE(fsdp.data_parallel());
  EXPECT_EQ(fsdp.batching(), BatchingPolicy::kStaticPerRank);
  EXPECT_EQ(fsdp.DataParallelSize(replicas), 6);
  EXPECT_EQ(fsdp.PipelineStages(replicas), 1);
  EXPECT_EQ(fsdp.CollectiveGroupSize(replicas), 6);
  EXPECT_EQ(fsdp.CommunicatorCount(replicas), 1);
  EXPECT_EQ(fsdp.RequestId("run", 7, 1, 2), "req-run-0007");
  EXPECT_EQ(ProfileFor(EngineKind::kVllmV1Offline).RequestId("run", 7, 1, 2), "7");
}

TEST(Simulator, SameSeedSameBytes) {
  SimConfig config = SmallConfig(EngineKind::kVllmV1Online, 11);
  config.faults = *ParseFaults("gpu_throttle:rank=1");
  const std::string a = base::TempDir("sim_det_a"), b = base::TempDir("sim_det_b");
  std::filesystem::remove_all(a);
  std::filesystem::remove_all(b);
  ASSERT_TRUE(RunSimulation(config, a).ok());
  ASSERT_TRUE(RunSimulation(config, b).ok());
  const auto fa = FilesOf(a), fb = FilesOf(b);
  ASSERT_GT(fa.size(), 5u);
  EXPECT_EQ(fa, fb);
  config.seed = 12;
  const std::string c = base::TempDir("sim_det_c");
  std::filesystem::remove_all(c);
  ASSERT_TRUE(RunSimulation(config, c).ok());
  EXPECT_NE(FilesOf(c), fa);
}

// Twins: a fault of magnitude 0 leaves every event and log line as the run without
// it; a real one leaves every step before its onset as it was.
TEST(Simulator, TwinsDrawTheSameRandomnessWhetherAFaultFiresOrNot) {
  for (EngineKind engine : {EngineKind::kVllmV1Online, EngineKind::kTorchFsdp}) {
    SimConfig clean = SmallConfig(engine, 31);
    const std::string clean_dir = base::TempDir("sim_twin_clean");
    std::filesystem::remove_all(clean_dir);
    StepCapture clean_steps;
    ASSERT_TRUE(RunSimulation(clean, clean_dir, clean_steps.Options()).ok());
    auto clean_files = FilesOf(clean_dir);
    clean_files.erase("labels.json");
    for (const char* fault :
         {"gpu_throttle:rank=1,mag=0", "kernel_slowdown:family=gemm,mag=0",
          "host_memory_pressure:node=0,mag=0", "launch_latency:rank=0,mag=0",
          "memcpy_latency:rank=0,mag=0", "sync_latency:rank=0,mag=0", "driver_retry:rank=0,mag=0",
          "link_degradation:mag=0", "straggler_rank:rank=1,mag=0", "engine_pause:mag=0",
          "kernel_contention:rank=1,mag=0"}) {
      SimConfig zero = clean;
      zero.faults = *ParseFaults(fault);
      const std::string dir = base::TempDir("sim_twin_zero");
      std::filesystem::remove_all(dir);
      ASSERT_TRUE(RunSimulation(zero, dir).ok()) << fault;
      auto files = FilesOf(dir);
      files.erase("labels.json");
      EXPECT_EQ(files, clean_files) << fault << " on " << EngineName(engine);
      auto labels = wire::ParseLabels(ReadAll(dir + "/labels.json"), dir);
      ASSERT_TRUE(labels.ok());
      EXPECT_TRUE(labels->affected_operators.empty()) << fault;
    }
    SimConfig faulty = clean;
    faulty.faults = *ParseFaults("gpu_throttle:rank=1,onset=6");
    StepCapture faulty_steps;
    auto run = RunSimulation(faulty, "", [&] {
      SimOptions o = faulty_steps.Options();
      o.dry_run = true;
      return o;
    }());
    ASSERT_TRUE(run.ok());
    ASSERT_GT(faulty_steps.plans.size(), 6u);
    for (size_t i = 0; i < faulty_steps.plans.size() && faulty_steps.plans[i].step < 6; ++i) {
      for (size_t r = 0; r < faulty_steps.buffers[i].size(); ++r) {
        const auto& a = faulty_steps.buffers[i][r].kernels;
        const auto& b = clean_steps.buffers[i][r].kernels;
        ASSERT_EQ(a.size(), b.size()) << "step " << i;
        for (size_t k = 0; k < a.size(); ++k) {
          EXPECT_EQ(a[k].start_ns, b[k].start_ns);
          EXPECT_EQ(a[k].end_ns, b[k].end_ns);
        }
      }
    }
  }
}

TEST(Simulator, EventsPerStepOnDefaultModel) {
  SimConfig config = DefaultConfig(EngineKind::kVllmV1Online);
  config.workload.num_requests = 10;
  SimOptions options;
  options.dry_run = true;
  auto run = RunSimulation(config, "", options);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  // Steady-state steps (cold start and graph capture are eager and much larger).
  int64_t events = 0, steps = 0, largest = 0;
  for (size_t i = 0; i < run->step_events.size(); ++i) {
    largest = std::max(largest, run->step_events[i]);
    if (run->step_benign[i]) continue;
    events += run->step_events[i];
    ++steps;
  }
  ASSERT_GT(steps, 10);
  const double mean = double(events) / steps;
  EXPECT_GE(mean, 2000);
  EXPECT_LE(mean, 2700);
  EXPECT_GT(largest, 2 * mean);  // the eager cold-start step
  // Graph-replayed decode (vLLM v0) has far fewer host calls than eager prefill.
  SimConfig v0 = DefaultConfig(EngineKind::kVllmV0);
  v0.workload.num_requests = 6;
  StepCapture cap;
  ASSERT_TRUE(RunSimulation(v0, "",
                            [&] {
                              auto o = cap.Options();
                              o.dry_run = true;
                              return o;
                            }())
                  .ok());
  size_t decode_api = 0, prefill_api = 0;
  for (size_t i = 0; i < cap.plans.size(); ++i) {
    if (cap.plans[i].warmup || i < 4) continue;
    const size_t api = cap.buffers[i][0].api_calls.size();
    if (cap.plans[i].phase == StepPhase::kDecode) decode_api = std::max(decode_api, api);
    if (cap.plans[i].phase == StepPhase::kPrefill) prefill_api = std::max(prefill_api, api);
  }
  EXPECT_GT(prefill_api, 5 * decode_api);
}

TEST(Simulator, ThrottleLengthensThatGpusKernelsByTheMagnitude) {
  SimConfig config = SmallConfig(EngineKind::kVllmV1Online, 5);
  config.faults = *ParseFaults("gpu_throttle:rank=1,magnitude=0.3,onset=6,duration=5");
  StepCapture cap;
  auto run = RunSimulation(config, "", [&] {
    auto o = cap.Options();
    o.dry_run = true;
    return o;
  }());
  ASSERT_TRUE(run.ok());
  double in_sum = 0, out_sum = 0;
  int in_n = 0, out_n = 0;
  for (size_t i = 0; i < cap.plans.size(); ++i) {
    const auto& r0 = cap.buffers[i][0].kernels;
    const auto& r1 = cap.buffers[i][1].kernels;
    ASSERT_EQ(r0.size(), r1.size());
    int64_t d0 = 0, d1 = 0;
    for (size_t k = 0; k < r0.size(); ++k) {
      if (IsNccl(r0[k].name)) continue;
      ASSERT_EQ(r0[k].name, r1[k].name);
      d0 += Duration(r0[k]);
      d1 += Duration(r1[k]);
    }
    const double ratio = double(d1) / d0;
    const int step = cap.plans[i].step;
    if (step >= 6 && step < 11) {
      in_sum += ratio;
      ++in_n;
    } else if (!cap.plans[i].warmup) {
      out_sum += ratio;
      ++out_n;
    }
  }
  ASSERT_GT(in_n, 0);
  ASSERT_GT(out_n, 0);
  const double speed = out_sum / out_n;  // the fixed per-GPU speed difference
  EXPECT_NEAR(in_sum / in_n / speed, 1.3, 0.06);
  EXPECT_NEAR(speed, 1.0, 0.15);
  ASSERT_EQ(run->faults.size(), 1u);
  EXPECT_FALSE(run->faults[0].anomalous_steps.empty());
}

// A fleet of 64 H100s (8 nodes, TP 8, one replica a node, `synth run --ranks 64`): every
// rank steps, and a throttle placed on rank 45 slows that rank's kernels alone.
TEST(Simulator, AFleetOf64RanksPlacesAFaultOnAnyRank) {
  SimConfig config = SmallConfig(EngineKind::kVllmV1Online, 5);
  config.cluster = ModernCluster(GpuKind::kH100, 8);
  config.model.layers = 2;
  config.faults = *ParseFaults("gpu_throttle:rank=45,magnitude=0.3,onset=6,duration=5");
  StepCapture cap;
  auto run = RunSimulation(config, "", [&] {
    auto o = cap.Options();
    o.dry_run = true;
    return o;
  }());
  ASSERT_TRUE(run.ok()) << run.status().message();
  ASSERT_FALSE(cap.plans.empty());
  // Per step, rank 45's compute time over rank 44's (same tensor-parallel group, same
  // kernels): higher inside the window than outside it (tiny kernels jitter step to step).
  std::vector<double> in, out;
  for (size_t i = 0; i < cap.plans.size(); ++i) {
    ASSERT_EQ(cap.buffers[i].size(), 64u);
    if (cap.plans[i].warmup) continue;
    double ns[2] = {0, 0};
    for (int r : {0, 1}) {
      for (const auto& kernel : cap.buffers[i][45 - r].kernels) {
        if (!IsNccl(kernel.name)) ns[r] += Duration(kernel);
      }
    }
    const int step = cap.plans[i].step;
    (step >= 6 && step < 11 ? in : out).push_back(ns[0] / ns[1]);
  }
  ASSERT_GE(in.size(), 3u);
  ASSERT_GE(out.size(), 3u);
  auto median = [](std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  };
  EXPECT_GT(median(in), median(out) + 0.08);
  ASSERT_EQ(run->faults.size(), 1u);
  EXPECT_FALSE(run->faults[0].anomalous_steps.empty());
}

// A family of short kernels each slowed 40% moves each instance less than the 2 us an
// instance must move alone, but the step's sum of them by far more: the fault shows, its
// kernels are its culprits.
TEST(Simulator, AFamilyOfShortKernelsSlowedShowsInTheirSum) {
  SimConfig config = SmallConfig(EngineKind::kVllmV1Offline, 5);
  config.faults = *ParseFaults("kernel_slowdown:family=activation,magnitude=0.4,onset=4,duration=6");
  const std::string dir = base::TempDir("sim_short_kernels");
  auto run = RunSimulation(config, dir);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  auto text = base::ReadFile(dir + "/labels.json");
  ASSERT_TRUE(text.ok());
  auto labels = wire::ParseLabels(*text, dir);
  ASSERT_TRUE(labels.ok()) << labels.status().message();
  ASSERT_EQ(labels->faults.size(), 1u);
  EXPECT_TRUE(labels->faults[0].manifested);
  int64_t short_culprits = 0;
  for (const wire::LabelsOperator& op : labels->affected_operators) {
    if (op.role != "culprit" || op.family != "activation") continue;
    for (size_t i = 0; i < op.delta_ns.size(); ++i) {
      EXPECT_GT(op.ratio[i], 1.1) << op.name;
      short_culprits += std::llabs(op.delta_ns[i]) <= kMinChangeNs;
    }
  }
  EXPECT_GT(short_culprits, 0);
}

// The references end with what the fault cost as the run's twin measured it: a throttle
// that lengthens every step says by how much; slow launches under a busy GPU that move
// no step say so, and no phrasing claims the steps slowed.
TEST(Simulator, ReferencesSayWhatTheTwinMeasured) {
  for (const auto& [fault, moved] : std::vector<std::pair<std::string, bool>>{
           {"gpu_throttle:rank=1", true}, {"launch_latency:rank=1", false}}) {
    SimConfig config = SmallConfig(EngineKind::kVllmV1Online, 7);
    config.faults = *ParseFaults(fault);
    const std::string dir = base::TempDir("sim_references");
    ASSERT_TRUE(RunSimulation(config, dir).ok()) << fault;
    auto text = base::ReadFile(dir + "/labels.json");
    ASSERT_TRUE(text.ok());
    auto labels = wire::ParseLabels(*text, dir);
    ASSERT_TRUE(labels.ok()) << labels.status().message();
    ASSERT_EQ(labels->faults.size(), 1u);
    const wire::LabelsFault& f = labels->faults[0];
    ASSERT_TRUE(f.manifested) << fault;
    EXPECT_EQ(f.effect.moved_steps > 0, moved) << fault << ": " << f.effect.moved_steps;
    ASSERT_EQ(f.explanations.size(), 3u);
    for (const std::string& phrasing : f.explanations) {
      EXPECT_EQ(phrasing.find("took measurably longer") != std::string::npos, moved) << phrasing;
      EXPECT_EQ(phrasing.find("did not move") != std::string::npos, !moved) << phrasing;
      if (!moved) {
        EXPECT_EQ(phrasing.find("steps slowed"), std::string::npos) << phrasing;
      }
    }
  }
}

std::vector<std::string> LogTexts(const std::string& dir) {
  std::vector<std::string> texts;
  auto reader = wire::BundleReader::Open(dir);
  EXPECT_TRUE(reader.ok());
  if (!reader.ok()) return texts;
  std::vector<wire::ReadIssue> issues;
  EXPECT_TRUE(reader
                  ->ReadLogs([&](const wire::LogLineRecord& r, const std::string&,
                                 int64_t) { texts.emplace_back(r.text); },
                             &issues)
                  .ok());
  EXPECT_TRUE(issues.empty());
  return texts;
}

bool AnyContains(const std::vector<std::string>& texts, std::string_view needle) {
  for (const std::string& t : texts) {
    if (t.find(needle) != std::string::npos) return true;
  }
  return false;
}

TEST(Simulator, NcclTimeoutWritesWatchdogAndAbortsRequests) {
  SimConfig config = SmallConfig(EngineKind::kVllmV1Online, 8);
  config.faults = *ParseFaults("nccl_timeout:rank=2,onset=6");
  const std::string dir = base::TempDir("sim_nccl");
  std::filesystem::remove_all(dir);
  auto run = RunSimulation(config, dir);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_TRUE(run->crashed);
  const auto texts = LogTexts(dir);
  EXPECT_TRUE(AnyContains(texts, "Watchdog caught collective operation timeout"));
  EXPECT_TRUE(AnyContains(texts, "Timeout(ms)=600000"));
  int faulty = 0;
  for (const RequestSummary& r : run->requests) faulty += r.is_fault;
  EXPECT_GT(faulty, 0);
  // A normal run has NCCL INFO lines and benign warnings, but no watchdog.
  SimConfig normal = SmallConfig(EngineKind::kVllmV1Online, 8);
  const std::string ndir = base::TempDir("sim_nccl_normal");
  std::filesystem::remove_all(ndir);
  ASSERT_TRUE(RunSimulation(normal, ndir).ok());
  const auto ntexts = LogTexts(ndir);
  EXPECT_FALSE(AnyContains(ntexts, "Watchdog"));
  EXPECT_TRUE(AnyContains(ntexts, "NCCL INFO"));
  EXPECT_TRUE(AnyContains(ntexts, "WARNING"));
  EXPECT_TRUE(AnyContains(ntexts, "Added request cmpl-"));
}

// Issue 42: a crash fault whose onset step replays a full CUDA graph (vLLM v0 and SGLang
// decode) fires in that step, on its rank. An illegal access faults a node of the replay
// and comes back at the first CUDA call after the fault: the synchronization that waits
// for the sampled tokens, or, on a pipeline stage that ends its step with its send,
// ProcessGroupNCCL's watchdog polling its events (cudaEventQuery on a thread of its own).
// An out-of-memory fails at the first eager allocation outside the graph: the logits
// after the replay, or the input tensors of a stage with no logits.
TEST(Simulator, CrashFaultsFireInsideCudaGraphReplays) {
  std::map<std::string, int> calls;
  std::map<AllocationSite, int> sites;
  int runs = 0;
  for (EngineKind engine : {EngineKind::kVllmV0, EngineKind::kSglang}) {
    for (uint64_t seed = 1; seed <= 6; ++seed) {
      SimConfig config = SmallConfig(engine, seed);
      config.workload.num_requests = 8;
      const int32_t rank =
          static_cast<int32_t>(seed % static_cast<uint64_t>(config.cluster.world()));
      const std::vector<int32_t> graph_steps = GraphReplaySteps(config, rank);
      ASSERT_GE(graph_steps.size(), 4u) << EngineName(engine) << " seed " << seed;
      const int32_t onset = graph_steps[1 + seed % (graph_steps.size() - 2)];
      for (Mechanism m : {Mechanism::kIllegalMemoryAccess, Mechanism::kOutOfMemory}) {
        const std::string what = fmt::format("{} seed {} rank {} onset {} {}", EngineName(engine),
                                             seed, rank, onset, InfoOf(m).name);
        FaultSpec spec;
        spec.mechanism = m;
        spec.rank = rank;
        spec.onset_step = onset;
        config.faults = {spec};
        StepCapture cap;
        const std::string dir = base::TempDir("sim_graph_crash");
        std::filesystem::remove_all(dir);
        auto run = RunSimulation(config, dir, cap.Options());
        ASSERT_TRUE(run.ok()) << run.status().ToString();
        ++runs;
        EXPECT_TRUE(run->crashed) << what;
        const ResolvedFault& f = run->faults[0];
        EXPECT_EQ(f.anomalous_steps, std::set<int32_t>{onset}) << what;
        ASSERT_EQ(cap.plans.back().step, onset) << what;
        const RankBuffer& b = cap.buffers.back()[static_cast<size_t>(rank)];
        // The labels name the rank, the step and the kind that happened.
        auto labels = wire::ParseLabels(ReadAll(dir + "/labels.json"), dir);
        ASSERT_TRUE(labels.ok()) << labels.status().ToString();
        ASSERT_EQ(labels->faults.size(), 1u);
        EXPECT_EQ(labels->faults[0].mechanism, InfoOf(m).name) << what;
        EXPECT_EQ(labels->faults[0].target.rank, rank) << what;
        EXPECT_EQ(labels->faults[0].affected_steps, std::vector<int32_t>{onset}) << what;
        const auto texts = LogTexts(dir);
        if (m == Mechanism::kIllegalMemoryAccess) {
          EXPECT_TRUE(f.crash_in_graph) << what;
          // The faulting kernel is a node of the replay, cut off 6 us in; the error call
          // comes after it, and no launch of the replay returned it.
          int64_t fault_end = -1;
          for (const wire::KernelRecord& k : b.kernels) {
            if (k.graph_id != 0 && k.end_ns - k.start_ns == 6 * kUs) fault_end = k.end_ns;
          }
          EXPECT_GE(fault_end, 0) << what;
          int errors = 0;
          for (const wire::ApiCallRecord& a : b.api_calls) {
            if (a.result != 700) continue;
            ++errors;
            ++calls[std::string(a.name)];
            EXPECT_EQ(a.name, f.crash_call) << what;
            EXPECT_GE(a.end_ns, fault_end) << what;
            EXPECT_EQ(a.tid, a.name == "cudaEventQuery" ? kNcclWatchdogThread : 0) << what;
          }
          EXPECT_EQ(errors, 1) << what;
          EXPECT_TRUE(AnyContains(texts, "CUDA error: an illegal memory access was encountered"))
              << what;
          if (f.crash_call == "cudaEventQuery") {
            EXPECT_TRUE(AnyContains(texts,
                                    "Process group watchdog thread terminated with "
                                    "exception: CUDA error: an illegal memory access"))
                << what;
          }
        } else {
          ++sites[f.oom_site];
          EXPECT_NE(f.oom_site, AllocationSite::kAttention) << what;
          int failed = 0;
          bool replayed_before = false;
          for (const wire::ApiCallRecord& a : b.api_calls) {
            if (a.name == "cudaGraphLaunch" && failed == 0) replayed_before = true;
            failed += a.name == "cudaMalloc" && a.result == 2;
          }
          EXPECT_EQ(failed, 2) << what;
          EXPECT_EQ(replayed_before, f.oom_site == AllocationSite::kLogits) << what;
          EXPECT_FALSE(labels->faults[0].target.layer_index.has_value()) << what;
          EXPECT_TRUE(AnyContains(texts, "torch.OutOfMemoryError: CUDA out of memory")) << what;
        }
      }
    }
  }
  EXPECT_EQ(runs, 24);
  // Both pipeline stages were hit: the last one's synchronization and logits, the first
  // one's watchdog and input tensors.
  EXPECT_GT(calls["cudaStreamSynchronize"], 0);
  EXPECT_GT(calls["cudaEventQuery"], 0);
  EXPECT_GT(sites[AllocationSite::kLogits], 0);
  EXPECT_GT(sites[AllocationSite::kInputs], 0);
}

template <typename Record>
bool StoreNameMatches(const Record& r, std::string_view layer, std::string_view name) {
  return model::LayerName(wire::StoreLayerOf(r)) == layer && wire::StoreNameOf(r) == name;
}

// Every mechanism manifests, touches requests, and the operator instances its
// labels name exist in the events, under the names the store gives them.
class MechanismTest : public ::testing::TestWithParam<Mechanism> {};

TEST_P(MechanismTest, ManifestsAndLabelsMatchEvents) {
  const Mechanism m = GetParam();
  EngineKind engine = EngineKind::kVllmV1Online;
  if (m == Mechanism::kKvCachePressure) engine = EngineKind::kVllmV0;
  SimConfig config = SmallConfig(engine, 21);
  config.workload.num_requests = 10;
  if (m == Mechanism::kDecodeMisroute) {
    config.engine = EngineKind::kSglang;
    config = DefaultConfig(EngineKind::kSglang);
    config.model.layers = 8;
    config.model.mamba_period = 4;
    config.workload.num_requests = 10;
    config.seed = 21;
  }
  FaultSpec spec;
  spec.mechanism = m;
  config.faults = {spec};
  StepCapture cap;
  const std::string dir =
      base::TempDir(std::string("sim_mechanism_") + std::string(InfoOf(m).name));
  std::filesystem::remove_all(dir);
  auto run = RunSimulation(config, dir, cap.Options());
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  const ResolvedFault& f = run->faults[0];
  // A starved request changes no step: its waiting time makes it faulty.
  if (m != Mechanism::kStarvedRequest) {
    EXPECT_FALSE(f.anomalous_steps.empty()) << InfoOf(m).name;
  }
  EXPECT_FALSE(f.faulty_requests.empty()) << InfoOf(m).name;

  auto labels = wire::ParseLabels(ReadAll(dir + "/labels.json"), dir);
  ASSERT_TRUE(labels.ok()) << labels.status().ToString();
  std::map<int, size_t> step_index;
  for (size_t i = 0; i < cap.plans.size(); ++i) step_index[cap.plans[i].step] = i;
  // Scheduling faults act on requests; the others change operator instances.
  const bool expects_instances =
      m != Mechanism::kKvCachePressure && m != Mechanism::kStarvedRequest;
  if (expects_instances) {
    EXPECT_FALSE(labels->affected_operators.empty()) << InfoOf(m).name;
  }
  int culprits = 0;
  for (const wire::LabelsOperator& a : labels->affected_operators) {
    culprits += a.role == "culprit";
    EXPECT_EQ(a.delta_ns.size(), a.ordinals.size());
    if (a.kind == "missing") continue;  // the twin's, not in the written run
    const RankBuffer& b =
        cap.buffers[step_index[static_cast<int>(a.step)]][static_cast<size_t>(a.rank)];
    int64_t count = 0;
    for (const auto& k : b.kernels) count += StoreNameMatches(k, a.layer, a.name);
    for (const auto& k : b.api_calls) count += StoreNameMatches(k, a.layer, a.name);
    for (const auto& k : b.ranges) count += StoreNameMatches(k, a.layer, a.name);
    for (const auto& k : b.memcpys) count += StoreNameMatches(k, a.layer, a.name);
    for (const auto& k : b.syncs) count += StoreNameMatches(k, a.layer, a.name);
    for (int32_t ordinal : a.ordinals) EXPECT_LT(ordinal, count) << a.layer << " " << a.name;
  }
  if (expects_instances) {
    EXPECT_GT(culprits, 0) << InfoOf(m).name;
  }
  // Mechanism-specific evidence.
  auto in_window = [&](size_t i) { return f.anomalous_steps.count(cap.plans[i].step) > 0; };
  switch (m) {
    case Mechanism::kAllocatorSlowPath: {
      bool malloc_seen = false;
      for (size_t i = 0; i < cap.plans.size(); ++i) {
        for (const auto& a : cap.buffers[i][static_cast<size_t>(f.spec.rank)].api_calls) {
          if (a.name == "cudaMalloc" && in_window(i)) malloc_seen = true;
        }
      }
      EXPECT_TRUE(malloc_seen);
      break;
    }
    case Mechanism::kOutOfMemory: {
      int failed = 0;  // the first cudaMalloc and its retry after the cache flush
      for (const auto& bufs : cap.buffers) {
        for (const auto& a : bufs[static_cast<size_t>(f.spec.rank)].api_calls)
          failed += a.name == "cudaMalloc" && a.result == 2;
      }
      EXPECT_EQ(failed, 2);
      break;
    }
    case Mechanism::kDriverRetry: {
      int failed = 0;
      for (const auto& bufs : cap.buffers) {
        for (const auto& a : bufs[static_cast<size_t>(f.spec.rank)].api_calls)
          failed += a.result == 701;
      }
      EXPECT_GT(failed, 0);
      break;
    }
    case Mechanism::kDecodeMisroute: {
      bool contradiction = false;
      for (size_t i = 0; i < cap.plans.size(); ++i) {
        if (!in_window(i)) continue;
        for (const auto& k : cap.buffers[i][0].kernels) {
          contradiction |= k.name == "_selective_scan_update_kernel";
        }
      }
      EXPECT_TRUE(contradiction);
      break;
    }
    case Mechanism::kKvCachePressure: {
      int preemptions = 0;
      for (const auto& p : cap.plans) preemptions += static_cast<int>(p.preempted.size());
      EXPECT_GT(preemptions, 0);
      break;
    }
    default:
      break;
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllMechanisms, MechanismTest,
    ::testing::Values(Mechanism::kKvCachePressure, Mechanism::kHostMemoryPressure,
                      Mechanism::kAllocatorSlowPath, Mechanism::kMemoryFragmentation,
                      Mechanism::kOutOfMemory, Mechanism::kGpuThrottle, Mechanism::kKernelSlowdown,
                      Mechanism::kKernelContention, Mechanism::kIllegalMemoryAccess,
                      Mechanism::kLaunchLatency, Mechanism::kMemcpyLatency, Mechanism::kSyncLatency,
                      Mechanism::kDriverRetry, Mechanism::kLinkDegradation,
                      Mechanism::kStragglerRank, Mechanism::kNcclTimeout,
                      Mechanism::kOperatorReorder, Mechanism::kStarvedRequest,
                      Mechanism::kDecodeMisroute, Mechanism::kEnginePause),
    [](const auto& info) { return std::string(InfoOf(info.param).name); });

// Counts records per kind through the wire reader.
class CountingVisitor : public wire::RecordVisitor {
 public:
  int64_t records = 0, steps = 0, kernels = 0;
  void OnHostRange(const wire::HostRangeRecord& r) override {
    ++records;
    steps += r.layer == wire::RangeLayer::kStep;
  }
  void OnApiCall(const wire::ApiCallRecord&) override { ++records; }
  void OnKernel(const wire::KernelRecord&) override {
    ++records;
    ++kernels;
  }
  void OnMemcpy(const wire::MemcpyRecord&) override { ++records; }
  void OnSync(const wire::SyncRecord&) override { ++records; }
  void OnCollective(const wire::CollectiveRecord&) override { ++records; }
};

TEST(Simulator, RoundTripThroughBundleReader) {
  SimConfig config = SmallConfig(EngineKind::kVllmV1Online, 3);
  config.faults = *ParseFaults("kernel_slowdown:family=attention");
  const std::string dir = base::TempDir("sim_roundtrip");
  std::filesystem::remove_all(dir);
  auto run = RunSimulation(config, dir);
  ASSERT_TRUE(run.ok());
  auto reader = wire::BundleReader::Open(dir);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ(reader->processes().size(), 6u);
  EXPECT_EQ(reader->meta().hosts.size(), 1u);  // node1's clocks
  EXPECT_GT(reader->meta().clock_pairs.size(), 2u);
  CountingVisitor visitor;
  std::vector<wire::ReadIssue> issues;
  for (size_t i = 0; i < reader->processes().size(); ++i) {
    ASSERT_TRUE(reader->ReadProcess(i, &visitor, &issues).ok());
  }
  EXPECT_TRUE(issues.empty());
  EXPECT_EQ(visitor.records, run->events);
  EXPECT_EQ(visitor.steps, 6 * run->steps);
  ASSERT_TRUE(reader->labels_json().has_value());
  Json labels = Json::parse(*reader->labels_json());
  EXPECT_EQ(labels["requests"].size(), 6u);
  EXPECT_EQ(labels["steps"].size(), static_cast<size_t>(run->steps));
  ASSERT_EQ(labels["faults"].size(), 1u);
  EXPECT_EQ(labels["faults"][0]["category"], "cuda_kernel");
  EXPECT_GE(labels["faults"][0]["explanations"].size(), 3u);
  bool any_fault = false;
  for (const auto& r : labels["requests"]) any_fault |= r["is_fault"].get<bool>();
  EXPECT_TRUE(any_fault);
  for (const auto& a : labels["affected_operators"]) EXPECT_EQ(a["family"], "attention");
}

TEST(Dataset, ScaledPresetMultipliesRunsAndKeepsShares) {
  auto paper = GetPreset("paper");
  ASSERT_TRUE(paper.ok());
  DatasetPreset scaled = *paper;
  ASSERT_TRUE(ScalePreset(4, &scaled).ok());
  EXPECT_EQ(scaled.name, "paper-x4");
  ASSERT_EQ(scaled.engines.size(), paper->engines.size());
  for (size_t e = 0; e < scaled.engines.size(); ++e) {
    EXPECT_EQ(scaled.engines[e].requests, 4 * paper->engines[e].requests);
    EXPECT_EQ(scaled.engines[e].faulty_target, 4 * paper->engines[e].faulty_target);
    EXPECT_EQ(scaled.engines[e].requests_per_bundle, paper->engines[e].requests_per_bundle);
  }
  DatasetPreset same = *paper;
  ASSERT_TRUE(ScalePreset(1, &same).ok());
  EXPECT_EQ(same.name, "paper");
  EXPECT_FALSE(ScalePreset(0, &same).ok());
  EXPECT_FALSE(ScalePreset(1000, &same).ok());
}

TEST(Dataset, SmallPresetBuildsWithDisjointSplits) {
  auto preset = GetPreset("small");
  ASSERT_TRUE(preset.ok());
  const std::string dir = base::TempDir("sim_dataset_small");
  DatasetOptions options;
  options.output = dir;
  auto summary = BuildDataset(*preset, options);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->engines.size(), 5u);
  Json splits = Json::parse(ReadAll(dir + "/splits.json"));
  for (const char* kind : {"request_disjoint", "bundle_disjoint", "injection_disjoint"}) {
    std::set<std::string> seen;
    size_t total = 0;
    for (const char* part : {"train", "val", "test"}) {
      for (const auto& k : splits[kind][part]) {
        EXPECT_TRUE(seen.insert(k.get<std::string>()).second) << k;
        ++total;
      }
    }
    EXPECT_EQ(total, 24u) << kind;
  }
  // bundle_disjoint: no run has requests in two parts.
  std::map<std::string, std::string> part_of_bundle;
  for (const char* part : {"train", "val", "test"}) {
    for (const auto& k : splits["bundle_disjoint"][part]) {
      const std::string key = k.get<std::string>();
      const auto [it, inserted] = part_of_bundle.emplace(key.substr(0, key.find('/')), part);
      EXPECT_EQ(it->second, part) << key;
    }
  }
  Json manifest = Json::parse(ReadAll(dir + "/manifest.json"));
  EXPECT_EQ(manifest["bundles"].size(), 6u);
  EXPECT_TRUE(std::filesystem::exists(dir + "/stats.md"));
}

// The presets draw out_of_memory: the memory faults take the category's mechanisms in
// turn, so one in five is an out-of-memory, and each of its runs crashes.
TEST(Dataset, PresetsDrawOutOfMemory) {
  DatasetPreset preset;
  preset.name = "oom";
  preset.model_layers = 4;
  preset.engines = {{EngineKind::kSglang, 120, 120, 3}};
  const std::string dir = base::TempDir("sim_dataset_oom");
  std::filesystem::remove_all(dir);
  DatasetOptions options;
  options.output = dir;
  auto summary = BuildDataset(preset, options);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_GE(summary->mechanism_bundles["out_of_memory"], 1);
  auto manifest = wire::ParseManifest(ReadAll(dir + "/manifest.json"), dir);
  ASSERT_TRUE(manifest.ok()) << manifest.status().ToString();
  int oom = 0;
  for (const wire::ManifestBundle& b : manifest->bundles) {
    if (b.fault != "out_of_memory") continue;
    ++oom;
    EXPECT_TRUE(b.crashed) << b.bundle;
  }
  EXPECT_GE(oom, 1);
}

}  // namespace
}  // namespace teller::sim
