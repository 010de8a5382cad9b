// The modern preset: its runs' kernel families fall inside the ranges of the real
// serving traces (../shared/real-traces, docs/benchmark.md "Modern preset"), measured
// with the same classification teller uses on real traces (localize's operator
// families over the imported bundle), and every fault mechanism runs in it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include "base/file_util.h"
#include "base/testing.h"
#include "localize/operator_family.h"
#include "model/layer.h"
#include "sim/dataset.h"
#include "sim/engine_profile.h"
#include "sim/fault_spec.h"
#include "sim/labels.h"
#include "sim/simulated_trace_testing.h"
#include "sim/simulator.h"
#include "store/open_trace.h"
#include "wire/labels_file.h"
#include "wire/store_names.h"

namespace teller::sim {
namespace {

using localize::OperatorFamily;

// Bundle b of the modern preset, cut to a few layers and requests so a run takes a
// second or two.
SimConfig ModernTestConfig(EngineKind engine, int32_t b, uint64_t seed) {
  SimConfig config = DefaultConfig(engine);
  ModernBundleConfig(b, 8, &config);
  config.workload.num_requests = 32 * config.cluster.dp;
  config.seed = seed;
  config.run_id = "modern";
  return config;
}

struct FamilyShares {
  double gemm = 0;  // GEMMs and the MoE kernels (grouped expert GEMMs and their routing)
  double attention = 0;
  double communication = 0;  // collective kernels, waits included
  std::string families;      // every family over 1%, for the log
};

FamilyShares SharesOf(const model::Trace& trace) {
  const localize::FamilyCoverage coverage = localize::ComputeFamilyCoverage(trace, 0);
  FamilyShares shares;
  const double total = static_cast<double>(std::max<int64_t>(1, coverage.device_time_ns));
  for (int f = 0; f < localize::kOperatorFamilyCount; ++f) {
    const auto family = static_cast<OperatorFamily>(f);
    const double share = coverage.time_by_family_ns[static_cast<size_t>(f)] / total;
    if (family == OperatorFamily::kGemm || family == OperatorFamily::kMoe) shares.gemm += share;
    if (family == OperatorFamily::kAttention) shares.attention += share;
    if (localize::IsCollectiveFamily(family)) shares.communication += share;
    if (share > 0.01) {
      shares.families += std::string(localize::OperatorFamilyName(family)) + " " +
                         std::to_string(static_cast<int>(share * 1000 + 0.5) / 10.0).substr(0, 4) +
                         "% ";
    }
  }
  return shares;
}

struct ShareCase {
  EngineKind engine;
  int32_t bundle;  // index of the preset's bundle: picks GPU, nodes and model
};

class ModernShares : public ::testing::TestWithParam<ShareCase> {};

TEST_P(ModernShares, KernelFamiliesInsideTheRealTracesRanges) {
  const ShareCase& c = GetParam();
  const SimConfig config = ModernTestConfig(c.engine, c.bundle, 5);
  const std::string dir = base::TempDir("sim_modern_shares");
  std::filesystem::remove_all(dir);
  auto run = RunSimulation(config, dir);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  store::OpenOptions open;
  open.reconstruct = false;  // the families need the events only
  auto trace = store::OpenTrace({dir}, open);
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  const FamilyShares s = SharesOf(*trace);
  std::printf("%s on %d x %s, %s: gemm %.1f%% attention %.1f%% communication %.1f%%\n  %s\n",
              std::string(EngineName(config.engine)).c_str(), config.cluster.nodes,
              config.cluster.gpu_name.c_str(), config.model.name.c_str(), 100 * s.gemm,
              100 * s.attention, 100 * s.communication, s.families.c_str());
  EXPECT_GE(s.gemm, 0.40);
  EXPECT_LE(s.gemm, 0.85);
  EXPECT_GE(s.attention, 0.05);
  EXPECT_LE(s.attention, 0.30);
  EXPECT_LT(s.communication, 0.35);
  // TELLER_KEEP_MODERN_BUNDLE=DIR keeps a copy of the bundle there (to look at it).
  if (const char* keep = std::getenv("TELLER_KEEP_MODERN_BUNDLE")) {
    std::filesystem::copy(dir,
                          std::string(keep) + "/" + config.cluster.gpu_name.substr(7) + "-" +
                              std::to_string(c.bundle),
                          std::filesystem::copy_options::recursive);
  }
  std::filesystem::remove_all(dir);
}

// Bundles of the preset (ModernBundleConfig): MoE on H100 x2 (EP), H200 x2 (EP), B200 x2,
// B200 x4; dense on H100 x2, H200 x4, B200 x8 (about 30 s in all).
INSTANTIATE_TEST_SUITE_P(
    Preset, ModernShares,
    ::testing::Values(ShareCase{EngineKind::kVllmV1Online, 0}, ShareCase{EngineKind::kSglang, 2},
                      ShareCase{EngineKind::kVllmV1Offline, 4}, ShareCase{EngineKind::kSglang, 10},
                      ShareCase{EngineKind::kVllmV1Offline, 1}, ShareCase{EngineKind::kSglang, 3},
                      ShareCase{EngineKind::kVllmV1Online, 5}),
    [](const auto& info) {
      std::string name = std::string(EngineName(info.param.engine)) + "_bundle" +
                         std::to_string(info.param.bundle);
      for (char& ch : name) ch = ch == '-' ? '_' : ch;
      return name;
    });

TEST(ModernPreset, LayoutAndNames) {
  auto preset = GetPreset("modern");
  ASSERT_TRUE(preset.ok());
  EXPECT_TRUE(preset->modern);
  std::set<int32_t> nodes;
  std::set<std::string> gpus;
  for (int32_t b = 0; b < 15; ++b) {
    SimConfig config = DefaultConfig(EngineKind::kVllmV1Online);
    ModernBundleConfig(b, 4, &config);
    ASSERT_TRUE(ValidateConfig(config).ok()) << ValidateConfig(config).ToString();
    EXPECT_EQ(config.cluster.tp, 8);
    EXPECT_EQ(config.cluster.gpus_per_node, 8);
    EXPECT_EQ(config.cluster.dp, config.cluster.nodes);
    EXPECT_EQ(ProfileFor(config.engine).DataParallelSize(config.cluster), config.cluster.dp);
    nodes.insert(config.cluster.nodes);
    gpus.insert(config.cluster.gpu_name);
  }
  EXPECT_EQ(nodes, (std::set<int32_t>{2, 4, 8}));
  EXPECT_EQ(gpus.size(), 3u);
  // A degraded link needs traffic between nodes: the dense bundle becomes expert parallel.
  SimConfig link = DefaultConfig(EngineKind::kSglang);
  link.faults = *ParseFaults("link_degradation");
  ModernBundleConfig(5, 4, &link);
  EXPECT_TRUE(link.cluster.expert_parallel);
  EXPECT_TRUE(ValidateConfig(link).ok());
}

// The fleet preset: runs of 64 ranks (8 H100 nodes, TP 8 a node, a replica a node), or
// of the size --ranks gives; a degraded link's run crosses nodes (experts over every GPU)
// and its fault shows; sizes that are no fleet are refused with what was expected.
TEST(FleetPreset, LayoutSizesAndALinkThatShows) {
  auto preset = GetPreset("fleet");
  ASSERT_TRUE(preset.ok());
  EXPECT_EQ(preset->fleet_ranks, 64);
  SimConfig config = DefaultConfig(EngineKind::kVllmV1Online);
  ASSERT_TRUE(FleetConfig(preset->fleet_ranks, 8, &config).ok());
  EXPECT_EQ(config.cluster.world(), 64);
  EXPECT_EQ(config.cluster.tp, 8);
  EXPECT_EQ(config.cluster.dp, 8);
  EXPECT_FALSE(config.cluster.expert_parallel);
  EXPECT_TRUE(ValidateConfig(config).ok()) << ValidateConfig(config).ToString();

  ASSERT_TRUE(SizeFleetPreset(16, &*preset).ok());
  EXPECT_EQ(preset->fleet_ranks, 16);
  EXPECT_EQ(preset->name, "fleet-16");
  const base::Status odd = SizeFleetPreset(12, &*preset);
  EXPECT_NE(odd.message().find("12 ranks: a fleet has 8 GPUs a node"), std::string::npos)
      << odd.message();
  auto paper = GetPreset("paper");
  ASSERT_TRUE(paper.ok());
  EXPECT_NE(SizeFleetPreset(64, &*paper).message().find("only fleet takes ranks"),
            std::string::npos);

  SimConfig link = DefaultConfig(EngineKind::kVllmV1Online);
  link.faults = *ParseFaults("link_degradation");
  link.fault_window_fraction = 0.5;
  link.workload.num_requests = 6;
  link.seed = 4;
  ASSERT_TRUE(FleetConfig(16, 4, &link).ok());
  EXPECT_TRUE(link.cluster.expert_parallel);
  EXPECT_EQ(link.model.layers, 4);
  SimOptions options;
  options.dry_run = true;
  auto run = RunSimulation(link, "", options);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_EQ(run->faults.size(), 1u);
  EXPECT_FALSE(run->faults[0].anomalous_steps.empty()) << "the degraded link moved no step";
}

// The MoE run carries the routing, grouped-GEMM, all-to-all and NVLS kernels, and the
// NVLS all-reduce has no NCCL record while the all-to-all has one.
// Kernel names and collective records of a short run of bundle `index`.
struct RunNames {
  std::set<std::string> kernels;
  std::set<std::pair<std::string, int32_t>> collectives;  // op, group size
  bool Has(std::string_view part) const {
    for (const std::string& k : kernels) {
      if (k.find(part) != std::string::npos) return true;
    }
    return false;
  }
};

RunNames NamesOfRun(int32_t index) {
  SimConfig config = ModernTestConfig(EngineKind::kVllmV1Online, index, 9);
  config.workload.num_requests = 16;
  RunNames names;
  SimOptions options;
  options.dry_run = true;
  options.on_step = [&](const StepPlan&, const std::vector<RankBuffer>& buffers) {
    for (const RankBuffer& b : buffers) {
      for (const auto& k : b.kernels) names.kernels.insert(std::string(k.name));
      for (const auto& c : b.collectives)
        names.collectives.emplace(std::string(c.op), c.group_size);
    }
  };
  auto run = RunSimulation(config, "", options);
  EXPECT_TRUE(run.ok()) << run.status().ToString();
  return names;
}

// The Hopper MoE run (bundle 0, expert parallel over 16 GPUs) carries the routing,
// grouped-GEMM, FP8 and NVLS kernels; the NVLS all-reduce has no NCCL record, the
// all-to-all over every rank has one.
TEST(ModernPreset, HopperMoeRunHasExpertAndNvlsKernels) {
  const RunNames names = NamesOfRun(0);
  EXPECT_TRUE(names.Has("multimem_all_reduce_kernel"));
  EXPECT_TRUE(names.Has("fused_moe_kernel"));
  EXPECT_TRUE(names.Has("topkGatingSoftmax"));
  EXPECT_TRUE(names.Has("moe_align_block_size_kernel"));
  EXPECT_TRUE(names.Has("cutlass_3x_gemm_sm90_fp8"));
  EXPECT_TRUE(names.Has("scaled_fp8_quant_kernel"));
  EXPECT_TRUE(names.collectives.count({"all_to_all", 16}));
  EXPECT_FALSE(names.collectives.count({"all_reduce", 8}));  // TP all-reduce: NVLS, no record
  EXPECT_TRUE(names.collectives.count({"all_gather", 8}));   // the logits
}

// The Blackwell MoE run (bundle 4, gpt-oss) carries the real B200 trace's kernels.
TEST(ModernPreset, BlackwellMoeRunHasTheRealTracesKernels) {
  const RunNames names = NamesOfRun(4);
  for (std::string_view part :
       {"multimem_all_reduce_kernel", "bmm_MxE4m3_MxE2m1MxE4m3", "bmm_Bfloat16_MxE2m1MxE4m3",
        "routingIndicesHistogramKernel", "finalizeKernelVecLoad", "fmhaSm100aKernel", "nvjet_tst",
        "Fp8KVCacheDataType)1"}) {
    EXPECT_TRUE(names.Has(part)) << part;
  }
  EXPECT_FALSE(names.collectives.count({"all_to_all", 16}));  // experts inside the node
}

// Every mechanism of fault_spec.h runs in the modern preset, touches requests, and the
// instances its labels name are events of the run under the store's names.
class ModernMechanism : public ::testing::TestWithParam<Mechanism> {};

TEST_P(ModernMechanism, RunsAndTouchesRequests) {
  const Mechanism m = GetParam();
  const EngineKind engine =
      m == Mechanism::kDecodeMisroute ? EngineKind::kSglang : EngineKind::kVllmV1Online;
  SimConfig config = DefaultConfig(engine);
  if (m == Mechanism::kDecodeMisroute) config.model.mamba_period = 4;  // as PlanBundle does
  FaultSpec spec;
  spec.mechanism = m;
  config.faults = {spec};
  config.fault_window_fraction = 0.5;
  config.seed = 21;
  ModernBundleConfig(0, 4, &config);  // MoE, expert parallel over 2 H100 nodes
  config.workload.num_requests = 32 * config.cluster.dp;
  // Events per (step, rank, layer, name) as the store will name them, counted while the
  // step's buffers live.
  std::map<std::tuple<int64_t, int32_t, std::string, std::string>, int64_t> events;
  SimOptions options;
  options.on_step = [&](const StepPlan& plan, const std::vector<RankBuffer>& buffers) {
    for (const RankBuffer& b : buffers) {
      auto count = [&](const auto& records) {
        for (const auto& r : records) {
          ++events[{plan.step, b.rank, std::string(model::LayerName(wire::StoreLayerOf(r))),
                    std::string(wire::StoreNameOf(r))}];
        }
      };
      count(b.kernels);
      count(b.api_calls);
      count(b.ranges);
      count(b.memcpys);
      count(b.syncs);
    }
  };
  const std::string dir = base::TempDir("modern_mechanism") + "/" + std::string(InfoOf(m).name);
  std::filesystem::remove_all(dir);
  auto run = RunSimulation(config, dir, options);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  const ResolvedFault& f = run->faults[0];
  if (m != Mechanism::kStarvedRequest) {
    EXPECT_FALSE(f.anomalous_steps.empty()) << InfoOf(m).name;
  }
  EXPECT_FALSE(f.faulty_requests.empty()) << InfoOf(m).name;
  auto text = base::ReadFile(dir + "/labels.json");
  ASSERT_TRUE(text.ok());
  auto labels = wire::ParseLabels(*text, dir);
  ASSERT_TRUE(labels.ok()) << labels.status().ToString();
  int64_t affected = 0, missing = 0;
  for (const wire::LabelsOperator& a : labels->affected_operators) {
    if (a.kind == "missing") continue;  // the twin's, not in the written run
    affected += static_cast<int64_t>(a.ordinals.size());
    const int64_t count = events[{a.step, a.rank, a.layer, a.name}];
    for (int32_t ordinal : a.ordinals) missing += ordinal >= count;
  }
  // KV-cache pressure and starvation act on the scheduler, not on an operator.
  if (m != Mechanism::kKvCachePressure && m != Mechanism::kStarvedRequest) {
    EXPECT_GT(affected, 0) << InfoOf(m).name;
  }
  EXPECT_EQ(missing, 0) << InfoOf(m).name;
}

INSTANTIATE_TEST_SUITE_P(AllMechanisms, ModernMechanism, ::testing::ValuesIn([] {
                           std::vector<Mechanism> all;
                           for (const MechanismInfo& info : AllMechanisms()) {
                             all.push_back(info.mechanism);
                           }
                           return all;
                         }()),
                         [](const auto& info) { return std::string(InfoOf(info.param).name); });

// Each data-parallel replica is an engine core of its own (vLLM's DP engine cores, SGLang's
// DP schedulers): its first rank schedules its requests, and its share of the batch sets
// how long that takes. A fault-free 16-rank run of two replicas whose requests drain at
// different times: both first ranks schedule, no other rank does, and each one's schedule
// ranges are longer (in their median) in the steps its replica serves more requests; each
// records the tokens it scheduled, not the step's across replicas.
TEST(SimTest, EachDataParallelReplicaSchedulesItsOwnRequests) {
  SimConfig config = SmallConfig(EngineKind::kVllmV1Online, 2, 24, 3);
  ASSERT_TRUE(FleetConfig(16, 2, &config).ok());
  ASSERT_EQ(config.cluster.dp, 2);
  const model::Trace trace = SimulatedTrace(config, "", "sim_dp_schedulers");
  std::map<int32_t, std::vector<std::pair<model::TimeNs, model::DurationNs>>> schedules;
  for (size_t e = 0; e < trace.events.size(); ++e) {
    if (trace.str(trace.events.name[e]) != "Scheduler.schedule") continue;
    const int32_t rank = trace.processes.rank[trace.events.process[e].value()];
    schedules[rank].emplace_back(trace.events.start_ns[e], trace.events.dur_ns[e]);
  }
  ASSERT_EQ(schedules.size(), 2u);
  EXPECT_TRUE(schedules.count(0) && schedules.count(8));
  // Per first rank: schedule time against its step's requests (the step range's list).
  for (const auto& [rank, ranges] : schedules) {
    std::vector<std::pair<double, double>> by_requests;  // requests, duration
    for (size_t s = 0; s < trace.steps.size(); ++s) {
      if (trace.steps.rank[s] != rank) continue;
      const model::TimeNs begin = trace.steps.start_ns[s];
      const model::TimeNs end = trace.steps.end_ns[s];
      for (const auto& [start, dur] : ranges) {
        if (start < begin || start >= end) continue;
        by_requests.emplace_back(static_cast<double>(trace.steps.requests_count[s]),
                                 static_cast<double>(dur));
      }
    }
    ASSERT_GT(by_requests.size(), 10u) << "rank " << rank;
    // Medians of the halves: a GC pause or the cold start stretches single steps.
    std::sort(by_requests.begin(), by_requests.end());
    const size_t half = by_requests.size() / 2;
    std::vector<double> fewer_ns, more_ns;
    for (size_t i = 0; i < half; ++i) fewer_ns.push_back(by_requests[i].second);
    for (size_t i = by_requests.size() - half; i < by_requests.size(); ++i)
      more_ns.push_back(by_requests[i].second);
    std::nth_element(fewer_ns.begin(), fewer_ns.begin() + half / 2, fewer_ns.end());
    std::nth_element(more_ns.begin(), more_ns.begin() + half / 2, more_ns.end());
    const double fewer = fewer_ns[half / 2], more = more_ns[half / 2];
    EXPECT_GT(more, fewer) << "rank " << rank;
  }
  // Each records the tokens it scheduled: the replicas' differ in some step, and a step
  // that served none of its requests records none.
  const model::StringId tokens_key = trace.strings.Find("tokens");
  std::map<int64_t, std::set<int64_t>> tokens_of_step;  // global step -> tokens recorded
  for (size_t s = 0; s < trace.steps.size(); ++s) {
    int64_t tokens = 0;
    trace.FindIntArg(trace.steps.event[s], tokens_key, &tokens);
    if (trace.steps.requests_count[s] == 0) {
      EXPECT_EQ(tokens, 0) << "step " << s;
    }
    tokens_of_step[trace.steps.global_step[s]].insert(tokens);
  }
  EXPECT_TRUE(std::any_of(tokens_of_step.begin(), tokens_of_step.end(),
                          [](const auto& entry) { return entry.second.size() > 1; }));
}

}  // namespace
}  // namespace teller::sim
