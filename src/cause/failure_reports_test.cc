#include "cause/cause_text.h"
#include "cause/crash_report.h"
#include "cause/hang_report.h"
#include "cause/oom_report.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include "base/file_util.h"
#include "base/status.h"
#include "base/testing.h"
#include "sim/dataset.h"
#include "sim/simulated_trace_testing.h"
#include "store/open_trace.h"
#include "wire/bundle_writer.h"

namespace teller::cause {
namespace {

// A simulated run of 12 requests (seed 5): 4 layers, or the model's own.
model::Trace SimulatedRun(sim::EngineKind engine, const std::string& fault,
                          bool few_layers = true) {
  sim::SimConfig config = sim::SmallConfig(engine, 4, 12, 5);
  if (!few_layers) config.model.layers = sim::DefaultConfig(engine).model.layers;
  return sim::SimulatedTrace(config, fault, "failure_reports");
}

// On every engine, the rank that never launched the collective is the culprit and the
// ranks stuck in it (and those stuck behind them) are victims.
TEST(HangReportTest, TheRankThatNeverEnteredIsTheCulpritOnEveryEngine) {
  for (sim::EngineKind engine : sim::kAllEngines) {
    const model::Trace trace = SimulatedRun(engine, "nccl_timeout:rank=1");
    const HangReport report = FindHang(trace);
    const std::string name(sim::EngineName(engine));
    ASSERT_TRUE(report.found()) << name;
    EXPECT_EQ(report.evidence, HangEvidence::kTrace) << name;
    ASSERT_EQ(report.culprits, std::vector<int32_t>{1}) << name << ": " << HangSentence(report);
    EXPECT_FALSE(report.victims.empty()) << name;
    EXPECT_EQ(std::count(report.victims.begin(), report.victims.end(), 1), 0) << name;
    EXPECT_GE(report.longest_wait_ns, 10'000'000'000) << name;
    ASSERT_EQ(report.states.size(), 1u) << name;
    EXPECT_FALSE(report.states[0].last_kernel.empty()) << name;
    EXPECT_NE(HangSentence(report).find("Rank 1 waits in no collective"), std::string::npos)
        << name << ": " << HangSentence(report);
  }
}

// Two data-parallel replicas of SGLang, rank 2 of the first stopping before its tensor-
// parallel all-reduce: its 7 peers log the watchdog's timeout, and the second replica
// stops with the job, logging none. A watchdog line names its process group, not its
// members: the second replica's 8 ranks were named beside rank 2 as never entering.
TEST(HangReportTest, OnlyTheWaitingRanksGroupCanMissTheirCollective) {
  sim::SimConfig config = sim::SmallConfig(sim::EngineKind::kSglang, 4, 12, 5);
  ASSERT_TRUE(sim::FleetConfig(16, 4, &config).ok());
  const HangReport report = FindHang(sim::SimulatedTrace(config, "nccl_timeout:rank=2",
                                                         "failure_reports_replicas"));
  ASSERT_TRUE(report.found());
  EXPECT_EQ(report.culprits, std::vector<int32_t>{2}) << HangSentence(report);
  for (int32_t rank : report.victims) EXPECT_LT(rank, 8) << HangSentence(report);
}

TEST(HangReportTest, AHealthyRunHasNoHang) {
  EXPECT_FALSE(FindHang(SimulatedRun(sim::EngineKind::kVllmV1Online, "")).found());
}

model::Trace LogOnly(const std::string& text) {
  const std::string path = base::TempDir("hang_logs") + "/watchdog.log";
  EXPECT_TRUE(base::WriteFileAtomic(path, text).ok());
  auto trace = store::OpenTrace({path}, {});
  EXPECT_TRUE(trace.ok()) << trace.status().message();
  return trace.ok() ? std::move(trace).value() : model::Trace();
}

std::string WatchdogLine(int rank, int sequence) {
  return "[rank" + std::to_string(rank) +
         "]:[E101 00:10:01.228338539 ProcessGroupNCCL.cpp:616] [Rank " + std::to_string(rank) +
         "] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=" +
         std::to_string(sequence) +
         ", OpType=ALLREDUCE, NumelIn=8192, NumelOut=8192, Timeout(ms)=600000) ran for 600045 "
         "milliseconds before timing out.\n";
}

// From the logs alone: ranks 0 and 1 time out in #1005 of a 3-rank job; rank 2 is
// behind ("last enqueued NCCL work: 1004").
TEST(HangReportTest, WatchdogLinesNameTheRankThatIsBehind) {
  const std::string text =
      "node0:2064:2064 [0] NCCL INFO comm 0x55d0 rank 0 nranks 3 cudaDev 0 busId 1000 commId 0xe6 "
      "- "
      "Init COMPLETE\n" +
      WatchdogLine(0, 1005) + WatchdogLine(1, 1005) +
      "[rank2]:[E101 00:10:02.000000000 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0 Rank 2] "
      "Exception (either an error or timeout) detected by watchdog at work: 1004, last enqueued "
      "NCCL work: 1004, last completed NCCL work: 1004.\n";
  const HangReport report = FindHang(LogOnly(text));
  ASSERT_TRUE(report.found());
  EXPECT_EQ(report.evidence, HangEvidence::kLogs);
  EXPECT_EQ(report.culprits, std::vector<int32_t>{2}) << HangSentence(report);
  EXPECT_EQ(report.victims, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(report.waits[0].op, "allreduce");
  EXPECT_EQ(report.waits[0].sequence, 1005);
}

// Flight Recorder dumps of three ranks (tests/fixtures/flight_recorder): ranks 0 and 1
// started all_reduce #6 and never finished it; rank 2's last collective is #5.
TEST(HangReportTest, FlightRecorderDumpsNameTheRankThatNeverEntered) {
  const std::string dir = base::SourceDir() + "/tests/fixtures/flight_recorder";
  auto trace = store::OpenTrace({dir}, {});
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  const HangReport report = FindHang(*trace);
  ASSERT_TRUE(report.found());
  EXPECT_EQ(report.evidence, HangEvidence::kFlightRecorder);
  EXPECT_EQ(report.culprits, std::vector<int32_t>{2}) << HangSentence(report);
  EXPECT_EQ(report.victims, (std::vector<int32_t>{0, 1}));
  ASSERT_EQ(report.waits.size(), 2u);
  EXPECT_EQ(report.waits[0].sequence, 6);
  EXPECT_EQ(report.waits[0].op, "all_reduce");
  EXPECT_EQ(report.waits[0].size_bytes, 4096 * 8192 * 2);  // bf16
  EXPECT_NE(HangSentence(report).find(
                "rank 2 never entered all_reduce #6 of PG 0; ranks 0 and 1 waited 600 s in it"),
            std::string::npos)
      << HangSentence(report);
  EXPECT_NE(CulpritSentence(report).find("rank 2 had entered #5 last, which it called from sample "
                                         "(vllm/v1/sample/sampler.py:88)"),
            std::string::npos)
      << CulpritSentence(report);
}

// Ranks 1, 2 and 4 time out and the log names no world size: ranks 0 and 3 log nothing.
// They are named as the place to look, not as culprits (the log may lack their lines).
TEST(HangReportTest, RanksBelowTheHighestThatLogNothingAreNamed) {
  const HangReport report =
      FindHang(LogOnly(WatchdogLine(1, 90) + WatchdogLine(2, 90) + WatchdogLine(4, 90)));
  ASSERT_TRUE(report.found());
  EXPECT_EQ(report.silent, (std::vector<int32_t>{0, 3}));
  EXPECT_TRUE(report.culprits.empty());
  EXPECT_NE(HangSentence(report).find(
                "Ranks 0 and 3 appear in no line of the log although higher ranks do"),
            std::string::npos)
      << HangSentence(report);
  // With NCCL's init line the ranks are known: nobody is silent.
  const HangReport known = FindHang(LogOnly(
      "node0:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 3 cudaDev 0 busId 1000 commId 0xe6 - Init "
      "COMPLETE\n" +
      WatchdogLine(1, 90) + WatchdogLine(2, 90)));
  EXPECT_TRUE(known.silent.empty());
}

// Every rank timed out in the same collective: no culprit among them.
TEST(HangReportTest, EveryRankWaitingMeansNoCulprit) {
  const HangReport report =
      FindHang(LogOnly(WatchdogLine(0, 7) + WatchdogLine(1, 7) + WatchdogLine(2, 7)));
  ASSERT_TRUE(report.found());
  EXPECT_TRUE(report.culprits.empty());
  EXPECT_TRUE(report.no_culprit);
  EXPECT_NE(HangSentence(report).find("No rank is free of a wait"), std::string::npos);
}

// A bundle as `teller record` writes it on host h, in dir; and the trace read back from
// it once closed.
std::unique_ptr<wire::BundleWriter> RecordedBundle(const std::string& dir) {
  wire::BundleMeta meta;
  meta.tool_version = "test";
  meta.host = "h";
  meta.clock_pairs = {{1'700'000'000'000'000'000, 1'000'000'000, std::nullopt}};
  auto writer = wire::BundleWriter::Create(dir, meta);
  EXPECT_TRUE(writer.ok());
  return writer.ok() ? std::move(writer).value() : nullptr;
}

model::Trace CloseAndOpen(const std::string& dir, wire::BundleWriter* writer) {
  EXPECT_TRUE(writer->Close().ok());
  auto trace = store::OpenTrace({dir}, {});
  EXPECT_TRUE(trace.ok()) << trace.status().message();
  return trace.ok() ? std::move(trace).value() : model::Trace();
}

// A recorded process (rank 0) with `steps` engine steps of 5 ms, then one written while
// open (`teller record --watch`) after open_ms.
model::Trace WatchedRun(int steps, int64_t open_ms, bool with_kernels = false) {
  const std::string dir = base::TempDir("stalled_step") + "/run.teller";
  auto writer = RecordedBundle(dir);
  auto process = writer->OpenProcess({77, 0, 0, 1, 0, "h", "python3", "serve"});
  EXPECT_TRUE(process.ok());
  int64_t at_ns = 2'000'000'000;
  for (int step = 0; step <= steps; ++step) {
    const bool open = step == steps;
    const wire::Arg args[] = {wire::Arg::Int("step", step), wire::Arg::Int("open", 1)};
    wire::HostRangeRecord record;
    record.tid = 77;
    record.start_ns = at_ns;
    record.end_ns = at_ns + (open ? open_ms * 1'000'000 : 5'000'000);
    record.layer = wire::RangeLayer::kStep;
    record.name = "Scheduler.run_batch";
    record.args = std::span<const wire::Arg>(args, open ? 2 : 1);
    EXPECT_TRUE((*process)->Append(record).ok());
    if (with_kernels) {  // one launch a step; the open step's kernel never completes
      const uint64_t correlation = static_cast<uint64_t>(step) + 1;
      EXPECT_TRUE((*process)
                      ->Append(wire::ApiCallRecord{
                          wire::ClockDomain::kMonotonic, 77, at_ns + 100'000, at_ns + 110'000,
                          correlation, wire::ApiKind::kRuntime, 0, 0, "cudaLaunchKernel"})
                      .ok());
      if (!open) {
        wire::KernelRecord kernel;
        kernel.clock = wire::ClockDomain::kMonotonic;
        kernel.start_ns = at_ns + 200'000;
        kernel.end_ns = at_ns + 4'000'000;
        kernel.device = 0;
        kernel.stream = 7;
        kernel.correlation = correlation;
        kernel.name = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL";
        EXPECT_TRUE((*process)->Append(kernel).ok());
      }
    }
    at_ns = record.end_ns + 1'000'000;
  }
  return CloseAndOpen(dir, writer.get());
}

TEST(HangReportTest, AStepWrittenOpenFarPastItsPeersIsAStall) {
  const HangReport report = FindHang(WatchedRun(40, 3'000));
  ASSERT_TRUE(report.found());
  EXPECT_EQ(report.evidence, HangEvidence::kStalledStep);
  ASSERT_EQ(report.stalled.size(), 1u);
  EXPECT_EQ(report.stalled[0].rank, 0);
  EXPECT_EQ(report.stalled[0].steps_before, 40u);
  EXPECT_EQ(report.stalled[0].open_ns, 3'000'000'000);
  EXPECT_EQ(report.victims, std::vector<int32_t>{0});
  EXPECT_TRUE(report.culprits.empty());
  EXPECT_NE(HangSentence(report).find("rank 0's engine step Scheduler.run_batch had not ended "
                                      "after 3.0 s when the trace was written (its 40 steps "
                                      "before took at most 5.0 ms)"),
            std::string::npos)
      << HangSentence(report);
}

// With CUPTI's records: the open step's launch has no kernel record (CUPTI delivers it
// when the kernel completes), so its kernel never completed.
TEST(HangReportTest, AStalledStepNamesTheLaunchWhoseKernelNeverCompleted) {
  const HangReport report = FindHang(WatchedRun(40, 3'000, /*with_kernels=*/true));
  ASSERT_EQ(report.stalled.size(), 1u);
  EXPECT_EQ(report.stalled[0].pending.count, 1u);
  EXPECT_EQ(report.stalled[0].pending.last_call, "cudaLaunchKernel");
  EXPECT_NE(HangSentence(report).find("1 kernel launch of that process never completed (no "
                                      "kernel record; the last, cudaLaunchKernel, 3.0 s before "
                                      "the trace ends)"),
            std::string::npos)
      << HangSentence(report);
  // Without the stall, the run's last launches are not called pending (under 1 s old).
  EXPECT_EQ(FindPendingLaunches(WatchedRun(40, 30, true), model::ProcessIndex(0)).count, 0u);
}

// Two ranks of a CPU job under `teller record --watch`, 40 steps of 5 ms with a hooked
// all_reduce each, then both steps written open after 3 s: rank 0 inside its all_reduce
// (waiting), rank 1 inside `stuck_in` (or in an all_reduce too when it is "").
model::Trace WatchedRanks(std::string_view stuck_in) {
  const std::string dir = base::TempDir("stalled_ranks") + "/run.teller";
  auto writer = RecordedBundle(dir);
  for (int32_t rank : {0, 1}) {
    const int64_t pid = 70 + rank;
    auto process = writer->OpenProcess({pid, rank, rank, 2, 0, "h", "python3", "serve"});
    EXPECT_TRUE(process.ok());
    auto append = [&](wire::RangeLayer layer, std::string_view name, int64_t start_ns,
                      int64_t end_ns, std::span<const wire::Arg> args) {
      wire::HostRangeRecord record;
      record.tid = pid;
      record.start_ns = start_ns;
      record.end_ns = end_ns;
      record.layer = layer;
      record.name = name;
      record.args = args;
      EXPECT_TRUE((*process)->Append(record).ok());
    };
    int64_t at_ns = 2'000'000'000;
    for (int step = 0; step <= 40; ++step) {
      const bool open = step == 40;
      const wire::Arg args[] = {wire::Arg::Int("step", step), wire::Arg::Int("open", 1)};
      const int64_t end_ns = at_ns + (open ? 3'000'000'000 : 5'000'000);
      append(wire::RangeLayer::kStep, "DecodeEngine.step", at_ns, end_ns,
             std::span<const wire::Arg>(args, open ? 2 : 1));
      const bool waits = !open || rank == 0 || stuck_in.empty();
      append(waits ? wire::RangeLayer::kComm : wire::RangeLayer::kBe,
             waits ? "all_reduce" : stuck_in, at_ns + 1'000'000, open ? end_ns : end_ns - 100'000,
             std::span<const wire::Arg>(args + 1, open ? 1 : 0));
      at_ns = end_ns + 1'000'000;
    }
  }
  return CloseAndOpen(dir, writer.get());
}

TEST(HangReportTest, AStalledRankOutsideTheCollectiveItsPeersWaitInIsTheCulprit) {
  const HangReport report = FindHang(WatchedRanks("time.sleep"));
  ASSERT_EQ(report.evidence, HangEvidence::kStalledStep);
  ASSERT_EQ(report.stalled.size(), 2u);
  EXPECT_EQ(report.culprits, std::vector<int32_t>{1});
  EXPECT_EQ(report.victims, std::vector<int32_t>{0});
  EXPECT_FALSE(report.no_culprit);
  ASSERT_EQ(report.states.size(), 1u);
  EXPECT_EQ(report.states[0].range, "time.sleep");
  EXPECT_NE(HangSentence(report).find("rank 1 never entered the collective rank 0 waits in "
                                      "(all_reduce)"),
            std::string::npos)
      << HangSentence(report);
  // Every rank waiting in the collective: who stopped first is not in the trace.
  const HangReport all_wait = FindHang(WatchedRanks(""));
  EXPECT_TRUE(all_wait.culprits.empty());
  EXPECT_TRUE(all_wait.no_culprit);
  EXPECT_EQ(all_wait.victims, (std::vector<int32_t>{0, 1}));
}

TEST(HangReportTest, AnOpenStepWithinItsPeersOrWithoutThemIsNoStall) {
  EXPECT_FALSE(FindHang(WatchedRun(40, 30)).found());    // the ring written mid-step
  EXPECT_FALSE(FindHang(WatchedRun(2, 3'000)).found());  // too few steps to compare
}

// On every engine, the call that returned 700 is on the injected rank, in the step the
// fault was injected in, and the report names a kernel to look at. (Which kernel: the one
// cut shortest against its normal is the simulator's faulting attention kernel in some
// runs only; docs/diagnose.md, "Not done".)
TEST(CrashReportTest, TheCrashIsPlacedOnEveryEngine) {
  for (sim::EngineKind engine : sim::kAllEngines) {
    const std::string name(sim::EngineName(engine));
    // The model's own layers: the simulator picks the faulting layer among them.
    const CrashReport report =
        FindCrash(SimulatedRun(engine, "illegal_memory_access:rank=1,onset=8", false));
    ASSERT_TRUE(report.found) << name;
    EXPECT_EQ(report.rank, 1) << name;
    EXPECT_EQ(report.error, 700) << name;
    EXPECT_EQ(report.category, model::FaultCategory::kCudaKernel) << name;
    EXPECT_EQ(report.step, 8) << name;
    // The simulator's faulting kernel is the attention kernel of the faulting layer, cut
    // off 6 us in: the last compute kernel to start on that GPU.
    ASSERT_TRUE(report.has_suspect) << name << ": " << CrashSentence(report);
    const std::string site = report.suspect.launched_from;
    EXPECT_TRUE(site.find("attn") != std::string::npos ||
                site.find("attention") != std::string::npos ||
                site.find("batch_prefill") != std::string::npos)
        << name << ": " << CrashSentence(report);
    EXPECT_EQ(report.suspect.dur_ns, 6'000) << name;
    EXPECT_NE(CrashSentence(report).find("returned 700 (illegal address)"), std::string::npos);
  }
}

// A fault of `kind` on `rank` of a 4-stage vLLM v0 run, at the middle one of the rank's
// CUDA-graph replay steps (its onset).
struct GraphStepFault {
  model::Trace trace;
  int32_t onset = -1;
};
GraphStepFault FaultAtAGraphStep(std::string_view kind, int32_t rank) {
  const sim::SimConfig config = sim::SmallConfig(sim::EngineKind::kVllmV0, 4, 12, 5);
  const std::vector<int32_t> steps = sim::GraphReplaySteps(config, rank);
  EXPECT_GE(steps.size(), 3u);
  GraphStepFault fault;
  if (steps.empty()) return fault;
  fault.onset = steps[steps.size() / 2];
  fault.trace = sim::SimulatedTrace(
      config, fmt::format("{}:rank={},onset={}", kind, rank, fault.onset), "failure_reports");
  return fault;
}

// Issue 42: a fault inside a CUDA-graph replay (vLLM v0's decode) comes back at a later
// call: the synchronization for the sampled tokens on the last pipeline stage (rank 4),
// ProcessGroupNCCL's watchdog polling its events on the first (rank 1, cudaEventQuery). The
// report names that call, the rank and the step, and the faulting kernel as a node of the
// graph that cudaGraphLaunch replayed.
TEST(CrashReportTest, AFaultInsideACudaGraphNamesTheReplayAndTheCallItCameBackAt) {
  for (int32_t rank : {1, 4}) {
    const GraphStepFault fault = FaultAtAGraphStep("illegal_memory_access", rank);
    const int32_t onset = fault.onset;
    ASSERT_GE(onset, 0);
    const CrashReport report = FindCrash(fault.trace);
    ASSERT_TRUE(report.found) << rank;
    EXPECT_EQ(report.rank, rank);
    EXPECT_EQ(report.step, onset);
    EXPECT_EQ(report.error, 700);
    EXPECT_EQ(report.call, rank < 3 ? "cudaEventQuery" : "cudaStreamSynchronize");
    ASSERT_TRUE(report.has_suspect) << CrashSentence(report);
    EXPECT_TRUE(report.suspect.in_graph);
    EXPECT_EQ(report.suspect.launch_call, "cudaGraphLaunch");
    EXPECT_EQ(report.suspect.dur_ns, 6'000);
    EXPECT_NE(CrashSentence(report).find("a node of the CUDA graph that cudaGraphLaunch "
                                         "replayed from CUDAGraphRunner.forward"),
              std::string::npos)
        << CrashSentence(report);
  }
}

// An out-of-memory at a CUDA-graph step: the replay allocates nothing, so the allocation
// that fails is the first eager one outside it (the logits on the last pipeline stage,
// the input tensors on the first); the report reads it on that rank, in that step.
TEST(OomReportTest, AnOomAtACudaGraphStepIsReportedInThatStep) {
  for (int32_t rank : {1, 4}) {
    const GraphStepFault fault = FaultAtAGraphStep("out_of_memory", rank);
    const int32_t onset = fault.onset;
    ASSERT_GE(onset, 0);
    const OomReport r = FindOom(fault.trace);
    ASSERT_TRUE(r.found) << rank;
    EXPECT_EQ(r.rank, rank);
    EXPECT_EQ(r.step, onset);
    EXPECT_EQ(r.kind, OomKind::kFull) << OomSentence(r);
    EXPECT_FALSE(r.requests.empty()) << OomSentence(r);
  }
}

// A launch that failed and was retried (701: out of resources) is no crash.
TEST(CrashReportTest, RetriedLaunchFailuresAndHealthyRunsAreNoCrash) {
  EXPECT_FALSE(
      FindCrash(SimulatedRun(sim::EngineKind::kVllmV1Online, "driver_retry:rank=1")).found);
  EXPECT_FALSE(FindCrash(SimulatedRun(sim::EngineKind::kVllmV1Online, "")).found);
}

// --- Out of memory -------------------------------------------------------------

constexpr double kMiB = 1024.0 * 1024.0, kGiB = 1024.0 * kMiB;

// The first line of a log excerpt of tests/fixtures/log_excerpts that holds `needle`.
std::string ExcerptLine(const std::string& file, std::string_view needle) {
  auto text = base::ReadFile(base::SourceDir() + "/tests/fixtures/log_excerpts/" + file);
  EXPECT_TRUE(text.ok()) << file;
  if (!text.ok()) return "";
  const size_t at = text->find(needle);
  if (at == std::string::npos) return "";
  const size_t begin = text->rfind('\n', at) == std::string::npos ? 0 : text->rfind('\n', at) + 1;
  return text->substr(begin, text->find('\n', at) - begin);
}

// vLLM (PyTorch >= 2.1 message) on a 24 GiB card: 22.88 GiB allocated by PyTorch and a
// few hundred MiB of cache slack is a full GPU, not fragmentation.
TEST(OomReportTest, AFullCardIsFull) {
  const OomReport r = ParseOomMessage(ExcerptLine("vllm-oom-compiled-ffn-16.log", "Tried to"));
  ASSERT_TRUE(r.found);
  EXPECT_EQ(r.device, 0);
  EXPECT_NEAR(r.requested_bytes, 50.0 * kMiB, 1.0);
  EXPECT_NEAR(r.capacity_bytes, 23.56 * kGiB, 0.01 * kGiB);
  EXPECT_NEAR(r.free_bytes, 21.75 * kMiB, 0.01 * kMiB);
  EXPECT_NEAR(r.process_bytes, 23.50 * kGiB, 0.01 * kGiB);
  EXPECT_NEAR(r.allocated_bytes, 22.88 * kGiB, 0.01 * kGiB);
  EXPECT_NEAR(r.reserved_unallocated_bytes, 275.38 * kMiB, 0.01 * kMiB);
  EXPECT_EQ(r.kind, OomKind::kFull) << OomSentence(r);
  EXPECT_NE(OomSentence(r).find("an allocation of 50.0 MiB failed with 21.8 MiB of 23.56 GiB free"),
            std::string::npos)
      << OomSentence(r);
}

// The older message (PyTorch < 2.1: "already allocated", "reserved in total"): a 16 GB
// V100 that cannot hold the model.
TEST(OomReportTest, TheOlderMessageIsReadToo) {
  const OomReport r = ParseOomMessage(ExcerptLine("tgi-oom-single-v100-866.log", "Tried to"));
  ASSERT_TRUE(r.found);
  EXPECT_NEAR(r.requested_bytes, 128.0 * kMiB, 1.0);
  EXPECT_NEAR(r.capacity_bytes, 15.77 * kGiB, 0.01 * kGiB);
  EXPECT_NEAR(r.free_bytes, 13.62 * kMiB, 0.01 * kMiB);
  EXPECT_NEAR(r.allocated_bytes, 15.37 * kGiB, 0.01 * kGiB);
  EXPECT_NEAR(r.reserved_unallocated_bytes, 0.03 * kGiB, 0.01 * kGiB);
  EXPECT_EQ(r.kind, OomKind::kFull);
  EXPECT_NE(NextActionOfOom(r).find("shard"), std::string_view::npos);
}

// DDP on one node: seven other ranks each opened a CUDA context on GPU 5; without their
// 3.7 GiB the 2 MiB allocation would have fit.
TEST(OomReportTest, OtherProcessesOnTheGpuAreNamed) {
  const OomReport r =
      ParseOomMessage(ExcerptLine("pytorch-ddp-oom-extra-contexts-20.log", "Tried to"));
  ASSERT_TRUE(r.found);
  EXPECT_EQ(r.device, 5);
  EXPECT_EQ(r.other_processes, 7);
  EXPECT_NEAR(r.other_processes_bytes, 7 * 540.0 * kMiB, 1.0);
  EXPECT_EQ(r.kind, OomKind::kOutsidePyTorch) << OomSentence(r);
  EXPECT_NE(OomSentence(r).find("7 other processes held 3.69 GiB"), std::string::npos)
      << OomSentence(r);
  EXPECT_NE(NextActionOfOom(r).find("nvidia-smi"), std::string_view::npos);
}

// The simulator's out_of_memory on every engine: the message is read with its figures,
// on the injected rank, in a step with requests in flight; the trace has the two failed
// cudaMalloc calls around the allocator's cache flush.
TEST(OomReportTest, TheSimulatedOomIsReportedOnEveryEngine) {
  for (sim::EngineKind engine : sim::kAllEngines) {
    const std::string name(sim::EngineName(engine));
    const model::Trace trace = SimulatedRun(engine, "out_of_memory:rank=1,magnitude=2.5");
    const OomReport r = FindOom(trace);
    ASSERT_TRUE(r.found) << name;
    EXPECT_EQ(r.rank, 1) << name;
    EXPECT_EQ(r.kind, OomKind::kFull) << name << ": " << OomSentence(r);
    EXPECT_NEAR(r.requested_bytes, 2.5 * kGiB, 0.01 * kGiB) << name;
    EXPECT_GT(r.allocated_bytes, 70.0 * kGiB) << name;
    EXPECT_GE(r.step, 0) << name;
    if (engine != sim::EngineKind::kTorchFsdp) {  // its ranks' static batches name no request
      EXPECT_FALSE(r.requests.empty()) << name << ": " << OomSentence(r);
    }
    int failed_mallocs = 0;
    for (uint32_t e = 0; e < trace.events.size(); ++e) {
      int64_t result = 0;
      if (trace.str(trace.events.name[e]) == "cudaMalloc" &&
          trace.FindIntArg(model::EventRow(e), trace.strings.Find("result"), &result) &&
          result == 2) {
        ++failed_mallocs;
      }
    }
    EXPECT_EQ(failed_mallocs, 2) << name;
  }
}

// The message read on lines aligned on steps held elsewhere (a distributed run's rows):
// with the trace's own steps given as those rows, the report is FindOom's, field for field;
// the step and requests are the rows', the trend the one given.
TEST(OomReportTest, TheMessageOnLinesAlignedElsewhereTakesItsStepFromThem) {
  const model::Trace trace =
      SimulatedRun(sim::EngineKind::kVllmV1Online, "out_of_memory:rank=1,magnitude=2.5");
  const OomReport own = FindOom(trace);
  ASSERT_TRUE(own.found && own.step >= 0);
  auto step_of = [&](model::StepIndex step) {
    return StepOfLine{trace.steps.number[step.value()], StepRequestIds(trace, step)};
  };
  const OomReport on_lines = FindOom(trace.logs, trace.strings, step_of, own.trend);
  EXPECT_EQ(OomDifference(on_lines, own), "");
  const OomReport elsewhere = FindOom(trace.logs, trace.strings, [](model::StepIndex) {
    return StepOfLine{7, {"r"}};
  }, MemoryTrend{});
  EXPECT_EQ(elsewhere.step, 7);
  EXPECT_EQ(elsewhere.requests, std::vector<std::string>{"r"});
  EXPECT_NE(OomDifference(elsewhere, own).find("step 7 serving 1 requests against step"),
            std::string::npos)
      << OomDifference(elsewhere, own);
  OomReport other_gpu = own;
  other_gpu.device += 1;
  EXPECT_NE(OomDifference(other_gpu, own).find("GPU"), std::string::npos);
}

// A cache whose unallocated reserve is a large share of it and would hold the request:
// fragmentation, and expandable segments is the fix.
TEST(OomReportTest, ALargeUnallocatedReserveIsFragmentation) {
  const OomReport r = ParseOomMessage(
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0 has a "
      "total capacity of 79.10 GiB of which 1.06 GiB is free. Including non-PyTorch memory, "
      "this process has 78.02 GiB memory in use. Of the allocated memory 60.10 GiB is "
      "allocated by PyTorch, and 17.30 GiB is reserved by PyTorch but unallocated.");
  ASSERT_TRUE(r.found);
  EXPECT_EQ(r.kind, OomKind::kFragmented) << OomSentence(r);
  EXPECT_NE(NextActionOfOom(r).find("expandable_segments:True"), std::string_view::npos);
}

TEST(OomReportTest, ARawAllocationFailureHasNoSizesAndOtherLinesAreNoOom) {
  const OomReport raw = ParseOomMessage("RuntimeError: CUDA error: out of memory");
  ASSERT_TRUE(raw.found);
  EXPECT_LT(raw.requested_bytes, 0.0);
  EXPECT_NE(OomSentence(raw).find("gives no sizes"), std::string::npos);
  EXPECT_FALSE(ParseOomMessage("INFO Model loading took 14.99 GiB").found);
  EXPECT_FALSE(ParseOomMessage("").found);
}

// PyTorch's allocator counters ("[memory]" instants of a Kineto trace) give the trend
// before an OOM: GPU samples only, on the OOM's device, up to its time.
TEST(OomReportTest, TheAllocatorCountersBeforeItAreItsTrend) {
  auto sample = [](int64_t ts_us, int type, int device, double allocated_gib) {
    return fmt::format(
        R"({{"ph":"i","cat":"cpu_instant_event","s":"t","name":"[memory]","pid":1,"tid":1,)"
        R"("ts":{},"args":{{"Device Type":{},"Device Id":{},"Bytes":512,)"
        R"("Total Allocated":{:.0f},"Total Reserved":8589934592}}}})",
        ts_us, type, device, allocated_gib * 1073741824.0);
  };
  const std::string path = base::TempDir("oom_trend") + "/trace.json";
  ASSERT_TRUE(base::WriteFileAtomic(
                  path, "{\"traceEvents\":[" + sample(1000, 1, 0, 1.0) + "," +
                            sample(2000, 1, 0, 2.0) + "," + sample(2500, 0, -1, 40.0) + "," +
                            sample(3000, 1, 0, 3.0) + "," + sample(3000, 1, 1, 0.5) + "]}")
                  .ok());
  auto trace = store::OpenTrace({path}, {});
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  MemoryTrend trend = FindMemoryTrend(*trace, 0, INT64_MAX);
  ASSERT_TRUE(trend.found);
  EXPECT_EQ(trend.device, 0);
  EXPECT_EQ(trend.samples, 3u);  // the CPU sample and GPU 1's are not GPU 0's
  EXPECT_EQ(TrendSentence(trend),
            "Before it, PyTorch's allocated memory on GPU 0 rose from 1.00 GiB to 3.00 GiB in "
            "0.0 s (peak 3.00 GiB, 8.00 GiB reserved).");
  trend = FindMemoryTrend(*trace, 0, 2'000'000);  // up to the OOM's time
  EXPECT_EQ(trend.samples, 2u);
  EXPECT_DOUBLE_EQ(trend.last_allocated, 2.0 * 1073741824.0);
  EXPECT_FALSE(FindMemoryTrend(*trace, 5, INT64_MAX).found);  // no counters for that GPU
}

// The real V100 training trace records the allocator's counters on GPU 1.
TEST(OomReportTest, ARealTracesCountersAreReadOnItsGpu) {
  if (base::RealTracesDir().empty()) GTEST_SKIP() << "../shared/real-traces is absent";
  auto trace =
      store::OpenTrace({base::RealTracesDir() + "/hta__v100_2rank_allreduce_rank1.json.gz"}, {});
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  const MemoryTrend trend = FindMemoryTrend(*trace, -1, INT64_MAX);
  ASSERT_TRUE(trend.found);
  EXPECT_EQ(trend.device, 1);
  EXPECT_GT(trend.samples, 1000u);
  EXPECT_DOUBLE_EQ(trend.last_reserved, 12782141440.0);  // as the last sample says
  EXPECT_GE(trend.peak_allocated, trend.last_allocated);
  EXPECT_NE(TrendSentence(trend).find("on GPU 1"), std::string::npos) << TrendSentence(trend);
}

}  // namespace
}  // namespace teller::cause
