// teller synth perturb: determinism, the magnitude-0 identity, the replay's ordering
// invariants, labels that resolve to events of the store, the fault window on a
// fixture and, when ../shared/real-traces is present, real traces.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "base/file_util.h"
#include "base/testing.h"
#include "import/import_inputs.h"
#include "model/classify.h"
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

// A replayed kernel keeps its launch shape (the fixture's sgemm [4, 2, 1] x [128, 1, 1] and
// all-reduce [2, 1, 1] x [512, 1, 1]): without it, the calls of one kernel name at
// different shapes read as peers of each other (cause/instance_peers.h).
TEST_F(PerturbTest, ReplayedKernelsKeepTheirLaunchShape) {
  std::map<std::string, std::pair<wire::Dim3, wire::Dim3>> shapes;
  for (const StepTemplate& tpl : templates_.steps) {
    ReplayedStep r;
    ReplayStep(templates_, tpl, 7, 0, 1'000'000'000, 1ull << 32, nullptr, &r);
    for (const wire::KernelRecord& k : r.buffer.kernels) {
      shapes[std::string(k.name).substr(0, 14)] = {k.grid, k.block};
    }
  }
  ASSERT_TRUE(shapes.count("ampere_sgemm_1") && shapes.count("ncclDevKernel_"));
  EXPECT_EQ(shapes["ampere_sgemm_1"].first, (wire::Dim3{4, 2, 1}));
  EXPECT_EQ(shapes["ampere_sgemm_1"].second, (wire::Dim3{128, 1, 1}));
  EXPECT_EQ(shapes["ncclDevKernel_"].first, (wire::Dim3{2, 1, 1}));
  EXPECT_EQ(shapes["ncclDevKernel_"].second, (wire::Dim3{512, 1, 1}));
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

TEST_F(PerturbTest, MultiRankMechanismsNeedSeveralRanks) {
  for (std::string_view m : {"straggler_rank", "link_degradation"}) {
    auto resolved = ResolveFault(Fault(m), templates_, 16, 1);
    ASSERT_FALSE(resolved.ok());
    EXPECT_NE(resolved.status().message().find("several ranks"), std::string::npos);
    EXPECT_TRUE(ResolveFault(Fault(m), templates_, 16, 1, 4).ok());
  }
  EXPECT_FALSE(ResolveFault(Fault("nccl_timeout"), templates_, 16, 1, 4).ok());
  EXPECT_FALSE(ResolveFault(Fault("kv_cache_pressure"), templates_, 16, 1).ok());
  EXPECT_FALSE(ResolveFault(Fault("gpu_throttle:rank=4"), templates_, 16, 1, 4).ok());
  EXPECT_FALSE(ResolveFault(Fault("link_degradation:rank=1"), templates_, 16, 1, 4).ok());
  auto link = ResolveFault(Fault("link_degradation"), templates_, 16, 1, 4);
  ASSERT_TRUE(link.ok());
  EXPECT_EQ(link->rank, -1);  // every rank
  auto straggler = ResolveFault(Fault("straggler_rank"), templates_, 16, 1, 4);
  ASSERT_TRUE(straggler.ok());
  EXPECT_GE(straggler->rank, 0);
  EXPECT_LT(straggler->rank, 4);
  auto picked = ResolveFault(Fault("gpu_throttle"), templates_, 30, 3);
  ASSERT_TRUE(picked.ok());
  EXPECT_GE(picked->onset_step, 10);
  EXPECT_LT(picked->onset_step, 20);
  EXPECT_DOUBLE_EQ(picked->magnitude, sim::InfoOf(sim::Mechanism::kGpuThrottle).default_magnitude);
}

// The rank-r kernels of a multi-rank replay that are collectives (layer COMM), in template
// order.
std::vector<const wire::KernelRecord*> Collectives(const ReplayedStep& r) {
  std::vector<const wire::KernelRecord*> out;
  for (const wire::KernelRecord& k : r.buffer.kernels) {
    if (model::ClassifyKernel(k.name) == model::Layer::kComm) out.push_back(&k);
  }
  return out;
}

std::vector<ReplayedStep> ReplayOnRanks(const TraceTemplates& t, int32_t step, int32_t ranks,
                                        const StepFault* fault) {
  std::vector<ReplayedStep> out;
  const StepTemplate& tpl = t.steps[static_cast<size_t>(step) % t.steps.size()];
  ReplayRanks(t, tpl, ReplayAt{7, step, 1'000'000'000, 1ull << 32}, ranks, fault, &out);
  return out;
}

// (name, start, end) of each record.
template <typename Record>
std::vector<std::tuple<std::string, int64_t, int64_t>> Times(const std::vector<Record>& records) {
  std::vector<std::tuple<std::string, int64_t, int64_t>> out;
  for (const Record& r : records) out.emplace_back(std::string(r.name), r.start_ns, r.end_ns);
  return out;
}

// One rank replays exactly as ReplayStep: --ranks 1 keeps today's replay.
TEST_F(PerturbTest, OneRankReplaysAsBefore) {
  for (int32_t step = 0; step < 4; ++step) {
    ReplayedStep single;
    const StepTemplate& tpl = templates_.steps[static_cast<size_t>(step) % templates_.steps.size()];
    ReplayStep(templates_, tpl, 7, step, 1'000'000'000, 1ull << 32, nullptr, &single);
    const std::vector<ReplayedStep> ranks = ReplayOnRanks(templates_, step, 1, nullptr);
    ASSERT_EQ(ranks.size(), 1u);
    EXPECT_EQ(ranks[0].end_ns, single.end_ns);
    EXPECT_EQ(Times(ranks[0].buffer.kernels), Times(single.buffer.kernels));
    EXPECT_EQ(Times(ranks[0].buffer.ranges), Times(single.buffer.ranges));
    EXPECT_EQ(Times(ranks[0].buffer.api_calls), Times(single.buffer.api_calls));
    EXPECT_EQ(ranks[0].buffer.kernel_hit, single.buffer.kernel_hit);
  }
  const std::string dir = base::TempDir("perturb_one_rank");
  PerturbOptions o;
  o.steps = 4;
  Perturb(templates_, o, dir + "/b");
  model::Trace trace;
  ASSERT_TRUE(import::ImportInputs({dir + "/b"}, {}, &trace).ok());
  EXPECT_EQ(trace.processes.size(), 1u);
}

// 4 ranks: each collective's instances end together, the last to arrive has its own
// duration and the others waited inside; ranks draw their own jitter.
TEST_F(PerturbTest, FourRanksEndEachCollectiveTogether) {
  int64_t checked = 0;
  bool jitter_differs = false;
  for (int32_t step = 0; step < 6; ++step) {
    const std::vector<ReplayedStep> ranks = ReplayOnRanks(templates_, step, 4, nullptr);
    ASSERT_EQ(ranks.size(), 4u);
    const auto first = Collectives(ranks[0]);
    ASSERT_FALSE(first.empty());
    for (int32_t r = 1; r < 4; ++r) {
      const auto other = Collectives(ranks[static_cast<size_t>(r)]);
      ASSERT_EQ(other.size(), first.size());
      EXPECT_EQ(ranks[static_cast<size_t>(r)].buffer.rank, r);
      for (size_t k = 0; k < first.size(); ++k) {
        EXPECT_LE(std::llabs(other[k]->end_ns - first[k]->end_ns), 1000) << "step " << step;
        jitter_differs |= other[k]->start_ns != first[k]->start_ns;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 0);
  EXPECT_TRUE(jitter_differs);
}

// A straggler's collectives are short (it arrives last), its peers' long (they wait).
TEST_F(PerturbTest, StragglerRanksCollectivesAreShorterThanItsPeers) {
  StepFault f;
  f.mechanism = sim::Mechanism::kStragglerRank;
  f.magnitude = 0.4;
  f.rank = 2;
  int64_t checked = 0;
  for (int32_t step = 0; step < 6; ++step) {
    const std::vector<ReplayedStep> ranks = ReplayOnRanks(templates_, step, 4, &f);
    const auto straggler = Collectives(ranks[2]);
    for (int32_t r : {0, 1, 3}) {
      const auto peer = Collectives(ranks[static_cast<size_t>(r)]);
      ASSERT_EQ(peer.size(), straggler.size());
      for (size_t k = 0; k < peer.size(); ++k) {
        EXPECT_LT(straggler[k]->end_ns - straggler[k]->start_ns,
                  peer[k]->end_ns - peer[k]->start_ns);
        EXPECT_GT(straggler[k]->start_ns, peer[k]->start_ns);
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 0);
}

// The labels of a 4-rank straggler run: rank 2's host work is the culprit, the peers'
// collective kernels are victims; every labelled instance resolves and the imported
// bundle's collective kernels (no collective metadata) are matched across ranks.
TEST_F(PerturbTest, StragglerLabelsBlameItsHostAndNameThePeersWaits) {
  const std::string dir = base::TempDir("perturb_straggler") + "/b";
  PerturbOptions o;
  o.steps = 9;
  o.ranks = 4;
  o.fault = Fault("straggler_rank:rank=2,onset=3,duration=3");
  const PerturbSummary run = Perturb(templates_, o, dir);
  EXPECT_EQ(run.abnormal_steps, (std::vector<int32_t>{3, 4, 5}));
  const wire::Labels labels = LabelsOf(dir);
  std::set<int32_t> culprit_ranks, victim_comm_ranks;
  bool host_culprit = false;
  for (const wire::LabelsOperator& op : labels.affected_operators) {
    EXPECT_GE(op.step, 3);
    EXPECT_LE(op.step, 5);
    if (op.role == "culprit") {
      culprit_ranks.insert(op.rank);
      host_culprit |= op.layer != "K" && op.layer != "COMM" && op.layer != "MEM";
    }
    if (op.role == "victim" && op.layer == "COMM" && op.rank != 2 && op.delta_ns.front() > 0) {
      victim_comm_ranks.insert(op.rank);
    }
  }
  EXPECT_EQ(culprit_ranks, (std::set<int32_t>{2}));
  EXPECT_TRUE(host_culprit);
  EXPECT_EQ(victim_comm_ranks, (std::set<int32_t>{0, 1, 3}));
  ASSERT_EQ(labels.cluster.gpus_per_node, 4);
  ExpectLabelsResolve(dir);
  model::Trace trace;
  ASSERT_TRUE(import::ImportInputs({dir}, {}, &trace).ok());
  ASSERT_TRUE(reconstruct::BuildCallChains(&trace).ok());
  EXPECT_EQ(trace.processes.size(), 4u);
  EXPECT_EQ(trace.collectives.size(), 0u);
  EXPECT_GT(trace.collective_matches.size(), 0u);
  EXPECT_GT(trace.stats.Get("reconstruct_collectives_matched_by_step_order"), 0);
  EXPECT_EQ(trace.stats.Get("reconstruct_collectives_step_order_skipped"), 0);
  // Every match spans the 4 ranks, and its instances end within 1 us.
  std::map<uint32_t, std::vector<size_t>> by_match;
  for (size_t i = 0; i < trace.collective_matches.size(); ++i) {
    by_match[trace.collective_matches.match[i].value()].push_back(i);
  }
  for (const auto& [match, rows] : by_match) {
    ASSERT_EQ(rows.size(), 4u);
    std::vector<int64_t> ends;
    for (size_t i : rows) ends.push_back(trace.events.end_ns(trace.collective_matches.event[i]));
    EXPECT_LE(
        *std::max_element(ends.begin(), ends.end()) - *std::min_element(ends.begin(), ends.end()),
        1000);
  }
}

// On 4 ranks too, a fault that changes nothing gives the fault-free bundle.
TEST_F(PerturbTest, MagnitudeZeroOnFourRanksIsTheFaultFreeRun) {
  const std::string dir = base::TempDir("perturb_zero_ranks");
  PerturbOptions o;
  o.steps = 6;
  o.ranks = 4;
  Perturb(templates_, o, dir + "/none");
  auto clean = Files(dir + "/none");
  clean.erase("labels.json");
  for (std::string_view mechanism : {"straggler_rank", "link_degradation", "gpu_throttle"}) {
    SCOPED_TRACE(mechanism);
    o.fault = Fault(std::string(mechanism) + ":magnitude=0,onset=2");
    const std::string out = dir + "/" + std::string(mechanism);
    const PerturbSummary run = Perturb(templates_, o, out);
    EXPECT_TRUE(run.abnormal_steps.empty());
    auto faulty = Files(out);
    faulty.erase("labels.json");
    EXPECT_EQ(faulty, clean);
  }
}

// A throttled GPU among 4: only its compute kernels are culprits (in the fixture its
// collective is on a stream of its own, so its peers need not wait); a degraded link
// makes every rank's collectives culprits.
TEST_F(PerturbTest, ThrottledRankAndDegradedLinkAmongFourRanks) {
  const std::string dir = base::TempDir("perturb_ranks");
  PerturbOptions o;
  o.steps = 8;
  o.ranks = 4;
  o.fault = Fault("gpu_throttle:rank=1,magnitude=0.5,onset=2,duration=3");
  const PerturbSummary throttle = Perturb(templates_, o, dir + "/throttle");
  EXPECT_EQ(throttle.abnormal_steps, (std::vector<int32_t>{2, 3, 4}));
  std::set<int32_t> culprits;
  for (const wire::LabelsOperator& op : LabelsOf(dir + "/throttle").affected_operators) {
    if (op.role != "culprit") continue;
    culprits.insert(op.rank);
    EXPECT_EQ(op.layer, "K");
  }
  EXPECT_EQ(culprits, (std::set<int32_t>{1}));
  ExpectLabelsResolve(dir + "/throttle");

  o.fault = Fault("link_degradation:magnitude=0.5,onset=2,duration=3");
  const PerturbSummary link = Perturb(templates_, o, dir + "/link");
  EXPECT_EQ(link.abnormal_steps, (std::vector<int32_t>{2, 3, 4}));
  std::set<int32_t> comm_culprits;
  for (const wire::LabelsOperator& op : LabelsOf(dir + "/link").affected_operators) {
    if (op.role == "culprit") {
      EXPECT_EQ(op.layer, "COMM");
      comm_culprits.insert(op.rank);
    }
  }
  EXPECT_EQ(comm_culprits, (std::set<int32_t>{0, 1, 2, 3}));
  ExpectLabelsResolve(dir + "/link");
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

// The B200 vLLM trace's NVLS all-reduce kernels carry no collective metadata: replayed on
// 4 ranks with a straggler, its peers wait in them, and reconstruction matches every one
// of them across the ranks by its order in the step.
TEST_F(RealPerturbTest, VllmB200OnFourRanksWithAStraggler) {
  auto t = LoadTemplates({dir_ + "/tracelens__b200_vllm_tp8_rank0_eager.json.gz"});
  ASSERT_TRUE(t.ok()) << t.status().message();
  const std::string out = base::TempDir("perturb_real_ranks") + "/b";
  PerturbOptions o;
  o.steps = 4;
  o.ranks = 4;
  o.fault = Fault("straggler_rank:rank=3,onset=1,duration=2");
  const PerturbSummary run = Perturb(*t, o, out);
  EXPECT_EQ(run.abnormal_steps, (std::vector<int32_t>{1, 2}));
  std::set<int32_t> culprits, waiting_peers;
  for (const wire::LabelsOperator& op : LabelsOf(out).affected_operators) {
    if (op.role == "culprit") culprits.insert(op.rank);
    if (op.role == "victim" && op.layer == "COMM" && op.rank != 3) waiting_peers.insert(op.rank);
  }
  EXPECT_EQ(culprits, (std::set<int32_t>{3}));
  EXPECT_EQ(waiting_peers, (std::set<int32_t>{0, 1, 2}));
  int64_t collectives = 0;  // per rank, over the replayed steps
  for (int32_t step = 0; step < o.steps; ++step) {
    for (const TemplateEvent& e : t->steps[static_cast<size_t>(step) % t->steps.size()].events) {
      collectives += e.kind == EventKind::kKernel && e.layer == model::Layer::kComm;
    }
  }
  ASSERT_GT(collectives, 0);
  model::Trace trace;
  ASSERT_TRUE(import::ImportInputs({out}, {}, &trace).ok());
  ASSERT_TRUE(reconstruct::BuildCallChains(&trace).ok());
  EXPECT_EQ(trace.stats.Get("reconstruct_collectives_matched_by_step_order"), collectives);
  EXPECT_EQ(trace.collective_matches.size(), static_cast<size_t>(collectives * o.ranks));
}

TEST_F(RealPerturbTest, NsysExport) {
  Check("nvfuser__h200_cross_entropy_report1.sqlite", "launch_latency:onset=3,duration=2");
}

}  // namespace
}  // namespace teller::perturb
