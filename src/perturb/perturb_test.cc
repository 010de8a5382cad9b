// teller synth perturb: determinism, the magnitude-0 identity, the replay's ordering
// invariants, labels that resolve to events of the store, the fault window on a
// fixture and, when ../shared/real-traces is present, real traces.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "base/file_util.h"
#include "base/testing.h"
#include "import/import_inputs.h"
#include "model/trace.h"
#include "perturb/perturb.h"
#include "perturb/real_dataset.h"
#include "perturb/replay.h"
#include "perturb/step_templates.h"
#include "reconstruct/call_chain_builder.h"
#include "sim/fault_spec.h"
#include "wire/dataset_files.h"
#include "wire/labels_file.h"

namespace teller::perturb {
namespace {

namespace fs = std::filesystem;

std::string Fixture() { return base::SourceDir() + "/tests/fixtures/kineto/small_modern.json"; }

sim::FaultSpec Fault(std::string_view text) {
  auto faults = sim::ParseFaults(text);
  EXPECT_TRUE(faults.ok()) << faults.status().message();
  return faults->at(0);
}

// Every file of a bundle folder, by relative path.
std::map<std::string, std::string> Files(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    auto text = base::ReadFile(e.path().string());
    EXPECT_TRUE(text.ok());
    out[fs::relative(e.path(), dir).string()] = *text;
  }
  return out;
}

PerturbSummary Perturb(const TraceTemplates& t, const PerturbOptions& o, const std::string& dir) {
  auto run = RunPerturb(t, o, dir);
  EXPECT_TRUE(run.ok()) << run.status().message();
  return run.ok() ? *run : PerturbSummary{};
}

wire::Labels LabelsOf(const std::string& dir) {
  auto text = base::ReadFile(dir + "/labels.json");
  EXPECT_TRUE(text.ok());
  auto labels = wire::ParseLabels(*text, dir);
  EXPECT_TRUE(labels.ok()) << labels.status().message();
  return labels.ok() ? *labels : wire::Labels{};
}

// Every labelled instance (kind != missing) names an event of the store: the bundle is
// imported and reconstructed, and instances are matched by (step, rank, layer, name,
// ordinal), ordinals counted per step like records' NodeOrdinals.
void ExpectLabelsResolve(const std::string& dir) {
  model::Trace trace;
  ASSERT_TRUE(import::ImportInputs({dir}, {}, &trace).ok());
  ASSERT_TRUE(reconstruct::BuildCallChains(&trace).ok());
  for (const auto& [counter, stat] : trace.stats.entries()) {
    if (stat.value != 0) {
      EXPECT_EQ(stat.severity, model::StatSeverity::kInfo) << counter << " = " << stat.value;
    }
  }
  using Key = std::tuple<int64_t, int32_t, std::string, std::string, int32_t>;
  std::set<Key> events;
  for (size_t s = 0; s < trace.steps.size(); ++s) {
    const uint32_t begin = trace.steps.node_begin[s].value();
    const uint32_t end = trace.steps.node_end[s].value();
    std::vector<uint32_t> order;
    for (uint32_t n = begin; n < end; ++n) order.push_back(n);
    auto start = [&](uint32_t n) { return trace.events.start_ns[trace.nodes.event[n].value()]; };
    std::stable_sort(order.begin(), order.end(),
                     [&](uint32_t a, uint32_t b) { return start(a) < start(b); });
    std::map<std::pair<model::Layer, uint32_t>, int32_t> seen;
    for (uint32_t n : order) {
      const uint32_t row = trace.nodes.event[n].value();
      const model::Layer layer = trace.events.layer[row];
      const int32_t ordinal = seen[{layer, trace.events.name[row].value()}]++;
      events.insert({trace.steps.number[s], trace.steps.rank[s],
                     std::string(model::LayerName(layer)),
                     std::string(trace.str(trace.events.name[row])), ordinal});
    }
  }
  const wire::Labels labels = LabelsOf(dir);
  int64_t checked = 0;
  for (const wire::LabelsOperator& op : labels.affected_operators) {
    if (op.kind == "missing") continue;
    for (int32_t ordinal : op.ordinals) {
      ++checked;
      EXPECT_TRUE(events.count({op.step, op.rank, op.layer, op.name, ordinal}))
          << "step " << op.step << " " << op.layer << " " << op.name << " #" << ordinal;
    }
  }
  EXPECT_GT(checked, 0);
}

// A host event inside another on its thread in the source stays inside it.
void ExpectNestingKept(const StepTemplate& tpl, const ReplayedStep& r) {
  struct Span {
    int64_t start, end, orig_start, orig_end, tid;
  };
  std::vector<Span> host;
  size_t range = 1, api = 0;  // the STEP range comes first
  for (const TemplateEvent& e : tpl.events) {
    if (e.kind == EventKind::kRange) {
      const auto& h = r.buffer.ranges[range++];
      host.push_back({h.start_ns, h.end_ns, e.start_ns, e.start_ns + e.dur_ns, e.tid});
    } else if (e.kind == EventKind::kApi) {
      const auto& a = r.buffer.api_calls[api++];
      host.push_back({a.start_ns, a.end_ns, e.start_ns, e.start_ns + e.dur_ns, e.tid});
    }
  }
  std::stable_sort(host.begin(), host.end(), [](const Span& a, const Span& b) {
    return std::tie(a.tid, a.orig_start) < std::tie(b.tid, b.orig_start);
  });
  std::vector<const Span*> open;
  int64_t checked = 0;
  for (const Span& s : host) {
    while (!open.empty() && (open.back()->tid != s.tid || open.back()->orig_end < s.orig_end ||
                             open.back()->orig_start > s.orig_start)) {
      open.pop_back();
    }
    if (!open.empty()) {
      ++checked;
      EXPECT_LE(open.back()->start, s.start);
      EXPECT_GE(open.back()->end, s.end);
    }
    open.push_back(&s);
  }
  if (host.size() > 1) {
    EXPECT_GT(checked, 0);
  }
}

// Kernels of a stream keep the template's order and never overlap; no device work
// starts before its launch call.
void ExpectReplayInvariants(const TraceTemplates& t, const StepFault* fault) {
  for (int32_t step = 0; step < 6; ++step) {
    const StepTemplate& tpl = t.steps[static_cast<size_t>(step) % t.steps.size()];
    ReplayedStep r;
    ReplayStep(t, tpl, 7, step, 1'000'000'000, 1ull << 32, fault, &r);
    std::map<uint64_t, int64_t> launch;
    for (const wire::ApiCallRecord& a : r.buffer.api_calls) {
      if (a.correlation) launch[a.correlation] = a.start_ns;
    }
    std::map<int64_t, int64_t> stream_end;
    std::map<int64_t, std::vector<std::string_view>> replayed, source;
    for (const wire::KernelRecord& k : r.buffer.kernels) {  // template order
      EXPECT_GE(k.start_ns, stream_end[k.stream]) << k.name;
      EXPECT_GE(k.end_ns, k.start_ns);
      stream_end[k.stream] = k.end_ns;
      auto it = launch.find(k.correlation);
      if (it != launch.end()) {
        EXPECT_GE(k.start_ns, it->second) << k.name;
      }
      EXPECT_GE(k.start_ns, r.start_ns);
      EXPECT_LE(k.end_ns, r.end_ns);
    }
    for (const wire::HostRangeRecord& h : r.buffer.ranges) {
      EXPECT_GE(h.start_ns, r.start_ns);
      EXPECT_LE(h.end_ns, r.end_ns);
    }
    ExpectNestingKept(tpl, r);
  }
}

class PerturbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = LoadTemplates({Fixture()});
    ASSERT_TRUE(t.ok()) << t.status().message();
    templates_ = std::move(*t);
  }
  TraceTemplates templates_;
};

TEST_F(PerturbTest, FixtureHasTemplates) {
  ASSERT_FALSE(templates_.steps.empty());
  EXPECT_FALSE(templates_.steps[0].events.empty());
  EXPECT_GT(templates_.device_sigma, 0);
}

TEST_F(PerturbTest, SameSeedSameBytes) {
  const std::string dir = base::TempDir("perturb_determinism");
  PerturbOptions o;
  o.steps = 12;
  o.seed = 5;
  o.fault = Fault("kernel_contention");
  Perturb(templates_, o, dir + "/a");
  Perturb(templates_, o, dir + "/b");
  EXPECT_EQ(Files(dir + "/a"), Files(dir + "/b"));
  o.seed = 6;
  Perturb(templates_, o, dir + "/c");
  EXPECT_NE(Files(dir + "/a"), Files(dir + "/c"));
}

TEST_F(PerturbTest, MagnitudeZeroIsTheFaultFreeRun) {
  const std::string dir = base::TempDir("perturb_zero");
  PerturbOptions o;
  o.steps = 10;
  Perturb(templates_, o, dir + "/none");
  for (std::string_view mechanism : {"gpu_throttle", "launch_latency", "host_memory_pressure",
                                     "allocator_slow_path", "engine_pause", "sync_latency"}) {
    SCOPED_TRACE(mechanism);
    o.fault = Fault(std::string(mechanism) + ":magnitude=0");
    const std::string out = dir + "/" + std::string(mechanism);
    const PerturbSummary run = Perturb(templates_, o, out);
    EXPECT_TRUE(run.abnormal_steps.empty());
    auto faulty = Files(out), clean = Files(dir + "/none");
    faulty.erase("labels.json");
    clean.erase("labels.json");
    EXPECT_EQ(faulty, clean);
  }
}

TEST_F(PerturbTest, ReplayKeepsStreamOrderAndLaunches) {
  ExpectReplayInvariants(templates_, nullptr);
  for (sim::Mechanism m : {sim::Mechanism::kGpuThrottle, sim::Mechanism::kLaunchLatency,
                           sim::Mechanism::kHostMemoryPressure, sim::Mechanism::kEnginePause,
                           sim::Mechanism::kAllocatorSlowPath}) {
    StepFault f;
    f.mechanism = m;
    f.magnitude = 0.8;
    ExpectReplayInvariants(templates_, &f);
  }
}

TEST_F(PerturbTest, GpuThrottleIsAbnormalExactlyInItsWindow) {
  const std::string dir = base::TempDir("perturb_window");
  PerturbOptions o;
  o.steps = 16;
  o.fault = Fault("gpu_throttle:magnitude=0.3,onset=5,duration=4");
  const PerturbSummary run = Perturb(templates_, o, dir + "/b");
  EXPECT_EQ(run.abnormal_steps, (std::vector<int32_t>{5, 6, 7, 8}));
  const wire::Labels labels = LabelsOf(dir + "/b");
  ASSERT_EQ(labels.steps.size(), 16u);
  for (const wire::LabelsStep& s : labels.steps) {
    EXPECT_EQ(s.is_anomaly, s.step >= 5 && s.step <= 8) << s.step;
  }
  ASSERT_EQ(labels.faults.size(), 1u);
  EXPECT_EQ(labels.faults[0].mechanism, "gpu_throttle");
  EXPECT_TRUE(labels.faults[0].manifested);
  EXPECT_GT(labels.faults[0].effect.culprit_instances, 0);
  EXPECT_TRUE(labels.requests.empty());
  ExpectLabelsResolve(dir + "/b");
}

TEST_F(PerturbTest, EveryMechanismLabelsResolve) {
  const std::string dir = base::TempDir("perturb_resolve");
  for (std::string_view m : {"launch_latency", "host_memory_pressure", "allocator_slow_path",
                             "engine_pause", "kernel_contention"}) {
    SCOPED_TRACE(m);
    PerturbOptions o;
    o.steps = 9;
    o.fault = Fault(std::string(m) + ":onset=3,duration=3");
    const PerturbSummary run = Perturb(templates_, o, dir + "/" + std::string(m));
    EXPECT_FALSE(run.abnormal_steps.empty());
    ExpectLabelsResolve(dir + "/" + std::string(m));
  }
}

TEST_F(PerturbTest, MultiRankMechanismsAreRefused) {
  for (std::string_view m : {"straggler_rank", "link_degradation", "nccl_timeout"}) {
    auto resolved = ResolveFault(Fault(m), templates_, 16, 1);
    ASSERT_FALSE(resolved.ok());
    EXPECT_NE(resolved.status().message().find("several ranks"), std::string::npos);
  }
  EXPECT_FALSE(ResolveFault(Fault("kv_cache_pressure"), templates_, 16, 1).ok());
  auto picked = ResolveFault(Fault("gpu_throttle"), templates_, 30, 3);
  ASSERT_TRUE(picked.ok());
  EXPECT_GE(picked->onset_step, 10);
  EXPECT_LT(picked->onset_step, 20);
  EXPECT_DOUBLE_EQ(picked->magnitude, sim::InfoOf(sim::Mechanism::kGpuThrottle).default_magnitude);
}

// A dataset from a folder holding the fixture and a file that is no trace: the fixture's
// runs with the dataset files, the other file skipped with a note.
TEST(RealDatasetTest, BuildsFromAFolderAndSkipsWhatDoesNotImport) {
  const std::string dir = base::TempDir("perturb_dataset");
  fs::create_directories(dir + "/traces");
  fs::create_symlink(Fixture(), dir + "/traces/small_modern.json");
  ASSERT_TRUE(base::WriteFileAtomic(dir + "/traces/broken.json", "{\"traceEvents\": 7}").ok());
  RealDatasetOptions options;
  options.traces = dir + "/traces";
  options.output = dir + "/out";
  options.max_steps = 9;
  auto summary = BuildRealDataset(options);
  ASSERT_TRUE(summary.ok()) << summary.status().message();
  EXPECT_EQ(summary->bundles, options.fault_free_runs + options.faulty_runs);
  EXPECT_EQ(summary->skipped.count("broken.json"), 1u);
  auto manifest = wire::ReadManifest(options.output);
  ASSERT_TRUE(manifest.ok()) << manifest.status().message();
  EXPECT_EQ(manifest->preset, "real");
  ASSERT_EQ(manifest->bundles.size(), 6u);
  EXPECT_EQ(manifest->bundles[0].fault, "none");
  EXPECT_NE(manifest->bundles[5].fault, "none");
  auto splits = wire::ReadSplits(options.output);
  ASSERT_TRUE(splits.ok()) << splits.status().message();
  const wire::DatasetSplit* bundles = splits->Find("bundle_disjoint");
  ASSERT_NE(bundles, nullptr);
  size_t keys = 0;
  for (const wire::SplitPart& part : bundles->parts) keys += part.keys.size();
  EXPECT_EQ(keys, 6u);
  auto stats = base::ReadFile(options.output + "/stats.md");
  ASSERT_TRUE(stats.ok());
  EXPECT_NE(stats->find("broken.json"), std::string::npos);
}

// The real traces, when ../shared/real-traces is present.
class RealPerturbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = base::RealTracesDir();
    if (dir_.empty()) GTEST_SKIP() << "../shared/real-traces is absent";
  }
  void Check(const std::string& file, std::string_view fault) {
    SCOPED_TRACE(file);
    auto t = LoadTemplates({dir_ + "/" + file});
    ASSERT_TRUE(t.ok()) << t.status().message();
    const std::string out = base::TempDir("perturb_real") + "/b";
    PerturbOptions o;
    o.steps = 8;
    o.fault = Fault(fault);
    const PerturbSummary run = Perturb(*t, o, out);
    EXPECT_FALSE(run.abnormal_steps.empty());
    ExpectLabelsResolve(out);
    ExpectReplayInvariants(*t, nullptr);
  }
  std::string dir_;
};

TEST_F(RealPerturbTest, VllmB200) {
  Check("tracelens__b200_vllm_tp8_rank0_eager.json.gz", "gpu_throttle:onset=3,duration=2");
}

TEST_F(RealPerturbTest, NsysExport) {
  Check("nvfuser__h200_cross_entropy_report1.sqlite", "launch_latency:onset=3,duration=2");
}

}  // namespace
}  // namespace teller::perturb
