#include <gtest/gtest.h>

#include <map>
#include <tuple>

#include <csignal>

#include "capture/process_status.h"

#include <filesystem>
#include <map>

#include "base/file_util.h"
#include "base/testing.h"
#include "import/importer.h"
#include "wire/bundle_writer.h"
#include "wire/example_bundle.h"

namespace teller::import {
namespace {

namespace fs = std::filesystem;
using model::EventPhase;
using model::Layer;

constexpr int64_t kMs = 1000000;
constexpr int64_t kT0 = wire::kExampleRealtimeBaseNs;

std::string Fixture() { return base::SourceDir() + "/tests/fixtures/bundle/two_ranks"; }

// Rows of trace events with this name, in order.
std::vector<uint32_t> Rows(const model::Trace& t, std::string_view name) {
  std::vector<uint32_t> rows;
  for (uint32_t i = 0; i < t.events.size(); ++i) {
    if (t.str(t.events.name[i]) == name) rows.push_back(i);
  }
  return rows;
}

std::string StringArg(const model::Trace& t, uint32_t row, std::string_view key) {
  model::StringId value;
  if (!t.FindStringArg(model::EventRow(row), t.strings.Find(key), &value)) return "<absent>";
  return std::string(t.str(value));
}

int64_t IntArg(const model::Trace& t, uint32_t row, std::string_view key) {
  int64_t value = -999;
  t.FindIntArg(model::EventRow(row), t.strings.Find(key), &value);
  return value;
}

TEST(BundleImporterTest, ImportsTheTwoRankFixture) {
  model::Trace t;
  ASSERT_TRUE(ImportBundle(Fixture(), {}, &t).ok());
  EXPECT_EQ(t.meta.format, model::TraceFormat::kBundle);
  auto meta_text = base::ReadFile(Fixture() + "/meta.json");
  auto labels_text = base::ReadFile(Fixture() + "/labels.json");
  EXPECT_EQ(t.meta.meta_json, *meta_text);
  EXPECT_EQ(t.meta.labels_json, *labels_text);
  EXPECT_NE(std::find(t.meta.notes.begin(), t.meta.notes.end(),
                      "capture layer nccl_profiler was disabled: synthetic example: collectives "
                      "come from the sim"),
            t.meta.notes.end());
  for (const auto& [name, entry] : t.stats.entries()) {
    EXPECT_EQ(entry.severity, model::StatSeverity::kInfo) << name << "=" << entry.value;
  }

  // Processes: host, pid and rank from the ProcessInfo records.
  ASSERT_EQ(t.processes.size(), 2u);
  for (uint32_t p = 0; p < 2; ++p) {
    EXPECT_EQ(t.str(t.processes.host[p]), p == 0 ? "node0" : "node1");
    EXPECT_EQ(t.processes.os_pid[p], p == 0 ? 1001 : 2002);
    EXPECT_EQ(t.processes.rank[p], static_cast<int32_t>(p));
    EXPECT_EQ(t.str(t.processes.name[p]), "python3");
  }
  // One host thread and two streams per process.
  ASSERT_EQ(t.threads.size(), 6u);
  int device_tracks = 0;
  for (uint32_t i = 0; i < t.threads.size(); ++i) {
    if (t.threads.is_device[i]) {
      ++device_tracks;
      EXPECT_EQ(t.threads.device[i], 0);
      EXPECT_EQ(t.str(t.threads.name[i]), fmt::format("stream {}", t.threads.os_tid[i]));
    } else {
      EXPECT_EQ(t.str(t.threads.name[i]), "MainThread");
      EXPECT_EQ(t.threads.os_tid[i], t.processes.os_pid[t.threads.process[i].value()]);
    }
  }
  EXPECT_EQ(device_tracks, 4);

  // STEP range with its args; node1's drifting clocks land on the same realtime.
  std::vector<uint32_t> steps = Rows(t, "execute_model");
  ASSERT_EQ(steps.size(), 2u);
  for (uint32_t row : steps) {
    EXPECT_EQ(t.events.layer[row], Layer::kStep);
    EXPECT_EQ(t.events.phase[row], EventPhase::kComplete);
    EXPECT_EQ(t.events.start_ns[row], kT0 + 100 * kMs);
    EXPECT_EQ(t.events.dur_ns[row], 30 * kMs);
    EXPECT_EQ(IntArg(t, row, "step"), 7);
    EXPECT_EQ(StringArg(t, row, "phase"), "decode");
    EXPECT_EQ(StringArg(t, row, "requests"), "cmpl-a1,cmpl-b2");
    EXPECT_EQ(t.events.id[row], model::EventId(1));
  }
  std::vector<uint32_t> forward = Rows(t, "LlamaForCausalLM.forward");
  ASSERT_EQ(forward.size(), 2u);
  EXPECT_EQ(t.events.layer[forward[0]], Layer::kFe);

  // NVTX push/pop: begin and end on the host thread, left for reconstruction to pair.
  std::vector<uint32_t> mm = Rows(t, "aten::mm");
  ASSERT_EQ(mm.size(), 4u);
  EXPECT_EQ(t.events.phase[mm[0]], EventPhase::kBegin);
  EXPECT_EQ(t.events.phase[mm[1]], EventPhase::kEnd);
  EXPECT_EQ(t.events.layer[mm[1]], Layer::kBe);
  EXPECT_EQ(t.events.start_ns[mm[0]], kT0 + 102 * kMs);
  EXPECT_EQ(t.events.start_ns[mm[1]], kT0 + 104 * kMs);
  EXPECT_FALSE(t.events.id[mm[0]].valid());
  EXPECT_EQ(StringArg(t, mm[0], "domain"), "torch");

  // Runtime calls and kernels joined by correlation; the external id reaches both.
  std::vector<uint32_t> launches = Rows(t, "cudaLaunchKernel");
  ASSERT_EQ(launches.size(), 4u);
  EXPECT_EQ(t.events.layer[launches[0]], Layer::kRt);
  EXPECT_EQ(t.events.correlation[launches[0]], model::CorrelationId(11));
  EXPECT_EQ(t.events.id[launches[0]], model::EventId(501));
  EXPECT_EQ(t.events.start_ns[launches[0]], kT0 + 102 * kMs + 100000);
  EXPECT_EQ(t.events.start_ns[launches[2]], kT0 + 102 * kMs + 100000);  // node1, after drift
  EXPECT_EQ(t.events.dur_ns[launches[0]], 8000);
  EXPECT_FALSE(t.threads.is_device[t.events.thread[launches[0]].value()]);

  std::vector<uint32_t> gemms = Rows(t, "ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_nn");
  ASSERT_EQ(gemms.size(), 2u);
  for (uint32_t row : gemms) {
    EXPECT_EQ(t.events.layer[row], Layer::kK);
    EXPECT_EQ(t.events.start_ns[row], kT0 + 103 * kMs);
    EXPECT_EQ(t.events.dur_ns[row], 2 * kMs);
    EXPECT_EQ(t.events.correlation[row], model::CorrelationId(11));
    EXPECT_EQ(t.events.id[row], model::EventId(501));
    EXPECT_EQ(t.events.flags[row], model::kFlagNone);
    uint32_t track = t.events.thread[row].value();
    EXPECT_TRUE(t.threads.is_device[track]);
    EXPECT_EQ(t.threads.os_tid[track], 7);
    EXPECT_EQ(IntArg(t, row, "device"), 0);
    EXPECT_EQ(IntArg(t, row, "stream"), 7);
    EXPECT_EQ(StringArg(t, row, "grid"), "128,1,1");
    EXPECT_EQ(StringArg(t, row, "block"), "256,1,1");
    EXPECT_EQ(IntArg(t, row, "graph_id"), -999);  // not a graph node
  }

  std::vector<uint32_t> copies = Rows(t, "Memcpy HtoD");
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_EQ(t.events.layer[copies[0]], Layer::kMem);
  EXPECT_EQ(IntArg(t, copies[0], "bytes"), 4096);
  EXPECT_EQ(StringArg(t, copies[0], "kind"), "HtoD");
  EXPECT_EQ(t.events.correlation[copies[0]], model::CorrelationId(12));
  std::vector<uint32_t> copy_calls = Rows(t, "cudaMemcpyAsync");
  ASSERT_EQ(copy_calls.size(), 2u);
  EXPECT_EQ(t.events.layer[copy_calls[0]], Layer::kRt);

  std::vector<uint32_t> syncs = Rows(t, "Stream Sync");
  ASSERT_EQ(syncs.size(), 2u);
  EXPECT_EQ(t.events.layer[syncs[0]], Layer::kSync);
  EXPECT_EQ(t.events.start_ns[syncs[1]], kT0 + 116 * kMs);
  std::vector<uint32_t> marks = Rows(t, "sampled");
  ASSERT_EQ(marks.size(), 2u);
  EXPECT_EQ(t.events.phase[marks[0]], EventPhase::kInstant);

  // One NCCL all-reduce on both ranks, linked to its kernel by correlation.
  ASSERT_EQ(t.collectives.size(), 2u);
  for (uint32_t i = 0; i < 2; ++i) {
    uint32_t row = t.collectives.event[i].value();
    EXPECT_EQ(t.events.layer[row], Layer::kComm);
    EXPECT_EQ(t.events.correlation[row], model::CorrelationId(13));
    EXPECT_EQ(t.events.process[row].value(), i);
    EXPECT_EQ(t.str(t.collectives.communicator[i]), "0x7f3a5e1c00000001");
    EXPECT_EQ(t.collectives.sequence[i], 42);
    EXPECT_EQ(t.str(t.collectives.op[i]), "all_reduce");
    EXPECT_EQ(t.collectives.size_bytes[i], 8192);
    EXPECT_EQ(t.str(t.collectives.dtype[i]), "float16");
    EXPECT_EQ(t.collectives.group_size[i], 2);
    EXPECT_EQ(t.collectives.group_rank[i], static_cast<int32_t>(i));
    EXPECT_EQ(t.events.dur_ns[row], 4 * kMs + 250000 * i);
  }
}

// Logs keep ts, pid, stream, text, source and line; parsing is left to the log stage.
TEST(BundleImporterTest, ImportsTheFixtureLogsVerbatim) {
  model::Trace t;
  ASSERT_TRUE(ImportBundle(Fixture(), {}, &t).ok());
  ASSERT_EQ(t.logs.size(), 4u);
  std::string jsonl = Fixture() + "/logs/stdout.jsonl";
  EXPECT_EQ(t.logs.ts_ns[0], kT0 + 99 * kMs);
  EXPECT_EQ(t.logs.os_pid[0], 1001);
  EXPECT_EQ(t.logs.process[0].value(), 0u);
  EXPECT_EQ(t.logs.stream[0], model::LogStream::kStdout);
  EXPECT_EQ(t.str(t.logs.text[0]), "INFO 11-14 22:13:20 engine.py:267] Added request cmpl-a1.");
  EXPECT_EQ(t.str(t.logs.source[0]), jsonl);
  EXPECT_EQ(t.logs.line_number[0], 1);
  EXPECT_EQ(t.logs.level[0], model::LogLevel::kUnknown);
  EXPECT_FALSE(t.logs.template_id[0].valid());
  EXPECT_EQ(t.logs.process[2].value(), 1u);
  EXPECT_EQ(t.logs.stream[2], model::LogStream::kStderr);
  EXPECT_EQ(t.logs.rank[2], 1);
  EXPECT_EQ(t.str(t.logs.source[3]), "vllm_server.log");
  EXPECT_EQ(t.logs.line_number[3], 1234);
  EXPECT_EQ(t.str(t.logs.text[3]),
            "INFO 11-14 22:13:20 metrics.py:341] Avg generation throughput: 66.7 tokens/s, "
            "\"quoted\" \t tab");
}

// Copies the fixture so a test can damage it.
std::string CopyFixture(const std::string& name) {
  std::string dir = base::TempDir(name);
  fs::copy(Fixture(), dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  return dir;
}

TEST(BundleImporterTest, TruncatedEventFileIsCountedAndTheRestImported) {
  std::string dir = CopyFixture("bundle_truncated");
  std::string file = dir + "/proc-node1-2002/events-000000.bin";
  uint64_t size = fs::file_size(file);
  fs::resize_file(file, size - 10);
  model::Trace t;
  ASSERT_TRUE(ImportBundle(dir, {}, &t).ok());
  EXPECT_EQ(t.stats.Get("bundle_chunk_truncated"), 1);
  EXPECT_GT(t.stats.Get("bundle_bytes_lost"), 10);
  bool noted = false;
  for (const std::string& note : t.meta.notes) {
    if (note.find(file) != std::string::npos &&
        note.find("bundle_chunk_truncated") != std::string::npos) {
      noted = true;
    }
  }
  EXPECT_TRUE(noted);
  // node0 is whole; node1 lost only its last chunk.
  EXPECT_EQ(Rows(t, "execute_model").size(), 2u);
  EXPECT_EQ(Rows(t, "sampled").size(), 1u);
}

TEST(BundleImporterTest, MissingOrMalformedMetaJsonIsAStatusNamingTheFile) {
  std::string dir = CopyFixture("bundle_bad_meta");
  fs::remove(dir + "/meta.json");
  model::Trace t;
  base::Status missing = ImportBundle(dir, {}, &t);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find(dir + "/meta.json"), std::string::npos) << missing.message();

  ASSERT_TRUE(base::WriteFileAtomic(dir + "/meta.json",
                                    "{\"format\": \"teller-bundle\", "
                                    "\"format_version\": \"one\"}")
                  .ok());
  base::Status malformed = ImportBundle(dir, {}, &t);
  ASSERT_FALSE(malformed.ok());
  EXPECT_NE(malformed.message().find(dir + "/meta.json: format_version: expected an integer"),
            std::string::npos)
      << malformed.message();
  ASSERT_TRUE(base::WriteFileAtomic(dir + "/meta.json", "not json").ok());
  malformed = ImportBundle(dir, {}, &t);
  ASSERT_FALSE(malformed.ok());
  EXPECT_NE(malformed.message().find(dir + "/meta.json: not valid JSON at offset 1"),
            std::string::npos)
      << malformed.message();
}

TEST(BundleImporterTest, GraphsDriverCallsRangesByIdAndLooseCollectives) {
  std::string dir = base::TempDir("bundle_graphs");
  wire::BundleMeta meta;
  meta.host = "h";
  meta.ranks = {{5, 0, "h", 77, 0}};
  auto writer = wire::BundleWriter::Create(dir, meta);
  ASSERT_TRUE(writer.ok());
  auto w = (*writer)->OpenProcess(wire::ProcessInfoRecord{77, -1, -1, -1, -1, "h", "srv", ""});
  ASSERT_TRUE(w.ok());
  using wire::ClockDomain;
  ASSERT_TRUE((*w)->Append(wire::ApiCallRecord{ClockDomain::kRealtime, 3, 100, 110, 21,
                                               wire::ApiKind::kRuntime, 0, 0, "cudaGraphLaunch"})
                  .ok());
  ASSERT_TRUE((*w)->Append(wire::ApiCallRecord{ClockDomain::kRealtime, 3, 120, 130, 22,
                                               wire::ApiKind::kDriver, 0, 2, "cuMemAlloc_v2"})
                  .ok());
  wire::KernelRecord k;
  k.clock = ClockDomain::kRealtime;
  k.start_ns = 200;
  k.end_ns = 300;
  k.device = 1;
  k.stream = 4;
  k.correlation = 21;
  k.graph_id = 9;
  k.graph_node_id = 1234;
  k.name = "fused_moe_kernel";
  ASSERT_TRUE((*w)->Append(k).ok());
  ASSERT_TRUE((*w)->Append(wire::RangeStartRecord{ClockDomain::kRealtime, 88, 3, 50,
                                                  wire::RangeLayer::kUnspecified, "d", "load"})
                  .ok());
  ASSERT_TRUE((*w)->Append(wire::RangeEndRecord{ClockDomain::kRealtime, 88, 4, 400, "d"}).ok());
  // A collective with its own times, one linked to a host range, one with nothing.
  ASSERT_TRUE((*w)->Append(wire::CollectiveRecord{ClockDomain::kRealtime, -1, 500, 600, "pg", 1,
                                                  "broadcast", 64, "int8", 2, 0, 0, 0, 1, 4})
                  .ok());
  ASSERT_TRUE((*w)->Append(wire::HostRangeRecord{ClockDomain::kRealtime,
                                                 3,
                                                 700,
                                                 800,
                                                 5,
                                                 wire::RangeLayer::kComm,
                                                 "all_gather_into_tensor",
                                                 {}})
                  .ok());
  ASSERT_TRUE((*w)->Append(wire::CollectiveRecord{ClockDomain::kRealtime, -1, 0, 0, "pg", 2,
                                                  "all_gather", 64, "int8", 2, 0, 0, 5, -1, -1})
                  .ok());
  ASSERT_TRUE((*w)->Append(wire::CollectiveRecord{ClockDomain::kRealtime, -1, 0, 0, "pg", 3,
                                                  "all_gather", 64, "int8", 2, 0, 0, 0, -1, -1})
                  .ok());
  // Monotonic time without clock pairs: taken as realtime and counted.
  ASSERT_TRUE((*w)->Append(wire::MarkRecord{ClockDomain::kMonotonic, 3, 900, "", "late"}).ok());
  ASSERT_TRUE((*writer)->Close().ok());

  ImportOptions options;
  options.rank_hint = 3;
  model::Trace t;
  ASSERT_TRUE(ImportBundle(dir, options, &t).ok());
  ASSERT_EQ(t.processes.size(), 1u);
  EXPECT_EQ(t.processes.rank[0], 5);  // from meta.json ranks, over the hint
  uint32_t graph = Rows(t, "cudaGraphLaunch")[0];
  EXPECT_EQ(t.events.flags[graph], model::kFlagGraphLaunch);
  uint32_t driver = Rows(t, "cuMemAlloc_v2")[0];
  EXPECT_EQ(t.events.layer[driver], Layer::kDrv);
  EXPECT_EQ(IntArg(t, driver, "result"), 2);
  uint32_t kernel = Rows(t, "fused_moe_kernel")[0];
  EXPECT_EQ(t.events.flags[kernel], model::kFlagGraphNode);
  EXPECT_EQ(IntArg(t, kernel, "graph_id"), 9);
  EXPECT_EQ(IntArg(t, kernel, "graph_node_id"), 1234);
  EXPECT_EQ(t.threads.device[t.events.thread[kernel].value()], 1);
  std::vector<uint32_t> load = Rows(t, "load");
  ASSERT_EQ(load.size(), 2u);
  EXPECT_EQ(t.events.phase[load[0]], EventPhase::kBegin);
  EXPECT_EQ(t.events.phase[load[1]], EventPhase::kEnd);
  EXPECT_EQ(t.events.id[load[0]], model::EventId(88));
  EXPECT_EQ(t.events.id[load[1]], model::EventId(88));
  EXPECT_NE(t.events.thread[load[0]], t.events.thread[load[1]]);

  ASSERT_EQ(t.collectives.size(), 2u);
  uint32_t own = t.collectives.event[0].value();
  EXPECT_EQ(t.str(t.events.name[own]), "broadcast");
  EXPECT_EQ(t.events.layer[own], Layer::kComm);
  EXPECT_EQ(t.events.dur_ns[own], 100);
  EXPECT_TRUE(t.threads.is_device[t.events.thread[own].value()]);
  EXPECT_EQ(t.str(t.events.name[t.collectives.event[1].value()]), "all_gather_into_tensor");
  EXPECT_EQ(t.stats.Get("bundle_collective_unlinked"), 1);
  EXPECT_EQ(t.stats.Get("bundle_clock_unpaired"), 1);
  EXPECT_EQ(t.events.start_ns[Rows(t, "late")[0]], 900);
}

}  // namespace
}  // namespace teller::import

namespace teller::import {
namespace {

// A graph replay gives every kernel the launch's correlation id: collectives must
// still link to the collective kernels, in order, not to the graph's first kernel.
TEST(BundleImporterTest, CollectivesInAGraphReplayLinkToTheirOwnKernels) {
  std::string dir = base::TempDir("bundle_graph_collectives");
  wire::BundleMeta meta;
  meta.host = "h";
  auto writer = wire::BundleWriter::Create(dir, meta);
  ASSERT_TRUE(writer.ok());
  auto w = (*writer)->OpenProcess(wire::ProcessInfoRecord{77, 0, -1, -1, -1, "h", "srv", ""});
  ASSERT_TRUE(w.ok());
  using wire::ClockDomain;
  ASSERT_TRUE((*w)->Append(wire::ApiCallRecord{ClockDomain::kRealtime, 3, 100, 110, 21,
                                               wire::ApiKind::kRuntime, 0, 0, "cudaGraphLaunch"})
                  .ok());
  int64_t start = 200;
  for (const char* name : {"gemm_a", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "gemm_b",
                           "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"}) {
    wire::KernelRecord k;
    k.clock = ClockDomain::kRealtime;
    k.start_ns = start;
    k.end_ns = start + 50;
    k.device = 0;
    k.stream = 7;
    k.correlation = 21;
    k.graph_id = 1;
    k.name = name;
    ASSERT_TRUE((*w)->Append(k).ok());
    start += 100;
  }
  // Sequence 1 without times (takes the next collective kernel), sequence 2 with the
  // times of the second NCCL kernel (nearest start).
  ASSERT_TRUE((*w)->Append(wire::CollectiveRecord{ClockDomain::kRealtime, -1, 0, 0, "c", 1,
                                                  "all_reduce", 64, "bf16", 2, 0, 21, 0, 0, 7})
                  .ok());
  ASSERT_TRUE((*w)->Append(wire::CollectiveRecord{ClockDomain::kRealtime, -1, 500, 550, "c", 2,
                                                  "all_reduce", 64, "bf16", 2, 0, 21, 0, 0, 7})
                  .ok());
  ASSERT_TRUE((*writer)->Close().ok());
  model::Trace t;
  ASSERT_TRUE(ImportBundle(dir, {}, &t).ok());
  ASSERT_EQ(t.collectives.size(), 2u);
  uint32_t first = t.collectives.event[0].value(), second = t.collectives.event[1].value();
  EXPECT_EQ(t.events.layer[first], Layer::kComm);
  EXPECT_EQ(t.events.start_ns[first], 300);
  EXPECT_EQ(t.events.layer[second], Layer::kComm);
  EXPECT_EQ(t.events.start_ns[second], 500);
}

// A process folder whose exit_status says a fatal signal: one error line at its last
// event; a clean exit adds none. A range written open (`record --watch`) is truncated.
TEST(BundleImporterTest, AFatalSignalIsALogLineAndAnOpenRangeIsTruncated) {
  std::string dir = base::TempDir("bundle_exit");
  wire::BundleMeta meta;
  meta.host = "h";
  auto writer = wire::BundleWriter::Create(dir, meta);
  ASSERT_TRUE(writer.ok());
  for (int64_t pid : {77, 78}) {
    auto w = (*writer)->OpenProcess(wire::ProcessInfoRecord{pid, -1, -1, -1, -1, "h", "srv", ""});
    ASSERT_TRUE(w.ok());
    const wire::Arg open[] = {wire::Arg::Int("open", 1)};
    wire::HostRangeRecord step;
    step.clock = wire::ClockDomain::kRealtime;
    step.tid = pid;
    step.start_ns = 1000;
    step.end_ns = 5000;
    step.layer = wire::RangeLayer::kStep;
    step.name = "step";
    if (pid == 77) step.args = open;
    ASSERT_TRUE((*w)->Append(step).ok());
  }
  ASSERT_TRUE((*writer)->Close().ok());
  ASSERT_TRUE(
      capture::WriteExitStatus((dir + "/proc-h-77").c_str(), capture::ExitKind::kSignal, SIGSEGV));
  ASSERT_TRUE(capture::WriteExitStatus((dir + "/proc-h-78").c_str(), capture::ExitKind::kExit, 0));
  model::Trace t;
  ASSERT_TRUE(ImportBundle(dir, {}, &t).ok());
  ASSERT_EQ(t.logs.size(), 1u);
  EXPECT_EQ(t.str(t.logs.text[0]), "teller record: process 77 was killed by signal 11 (SIGSEGV)");
  EXPECT_EQ(t.logs.ts_ns[0], 5000);
  EXPECT_EQ(t.logs.os_pid[0], 77);
  EXPECT_EQ(t.logs.level[0], model::LogLevel::kError);
  ASSERT_EQ(t.events.size(), 2u);
  for (uint32_t row = 0; row < 2; ++row) {
    const bool first = t.processes.os_pid[t.events.process[row].value()] == 77;
    EXPECT_EQ((t.events.flags[row] & model::kFlagTruncated) != 0, first);
  }
}

// A process killed without a word (exit_status "vanished" or "oom_killed", written by
// the recorder) and one whose hooks marked an uncaught exception: each a log line of
// its own process and rank, at its last event and at the mark.
TEST(BundleImporterTest, KilledProcessesAndUncaughtExceptionsAreLogLinesOfTheirRank) {
  std::string dir = base::TempDir("bundle_ends");
  wire::BundleMeta meta;
  meta.host = "h";
  auto writer = wire::BundleWriter::Create(dir, meta);
  ASSERT_TRUE(writer.ok());
  for (int64_t pid : {80, 81, 82}) {
    const int32_t rank = static_cast<int32_t>(pid - 80);
    auto w = (*writer)->OpenProcess(wire::ProcessInfoRecord{pid, rank, -1, 3, -1, "h", "srv", ""});
    ASSERT_TRUE(w.ok());
    wire::HostRangeRecord step;
    step.clock = wire::ClockDomain::kRealtime;
    step.tid = pid;
    step.start_ns = 1000;
    step.end_ns = 2000 + pid;
    step.layer = wire::RangeLayer::kStep;
    step.name = "step";
    ASSERT_TRUE((*w)->Append(step).ok());
    if (pid == 82) {
      wire::MarkRecord mark;
      mark.clock = wire::ClockDomain::kRealtime;
      mark.tid = pid;
      mark.ts_ns = 1500;
      const std::string name =
          std::string(wire::kUncaughtExceptionMark) + "RuntimeError: bad input";
      mark.name = name;
      ASSERT_TRUE((*w)->Append(mark).ok());
    }
  }
  ASSERT_TRUE((*writer)->Close().ok());
  ASSERT_TRUE(
      capture::WriteExitStatus((dir + "/proc-h-80").c_str(), capture::ExitKind::kVanished, 0));
  ASSERT_TRUE(
      capture::WriteExitStatus((dir + "/proc-h-81").c_str(), capture::ExitKind::kOomKilled, 0));
  ASSERT_TRUE(capture::WriteExitStatus((dir + "/proc-h-82").c_str(), capture::ExitKind::kExit, 1));
  model::Trace t;
  ASSERT_TRUE(ImportBundle(dir, {}, &t).ok());
  std::map<int64_t, std::tuple<std::string, int64_t, int32_t>> line_of_pid;
  for (size_t row = 0; row < t.logs.size(); ++row) {
    line_of_pid[t.logs.os_pid[row]] = std::make_tuple(std::string(t.str(t.logs.text[row])),
                                                      int64_t{t.logs.ts_ns[row]}, t.logs.rank[row]);
  }
  ASSERT_EQ(line_of_pid.size(), 3u);
  EXPECT_EQ(
      line_of_pid[80],
      std::make_tuple(
          std::string("teller record: process 80 ended without an "
                      "exit record while the command went on: killed by SIGKILL (the kernel log "
                      "names no OOM kill)"),
          int64_t{2080}, 0));
  EXPECT_EQ(line_of_pid[81], std::make_tuple(std::string("teller record: process 81 was killed by "
                                                         "the kernel's OOM killer (SIGKILL)"),
                                             int64_t{2081}, 1));
  EXPECT_EQ(line_of_pid[82], std::make_tuple(std::string("teller record: process 82 raised an "
                                                         "uncaught RuntimeError: bad input"),
                                             int64_t{1500}, 2));
}

// The recorded command's own failing exit (meta.json's note) is one line at the bundle's
// last moment; exit 0 and a stop on purpose (143: SIGTERM) make none.
TEST(BundleImporterTest, TheRecordedCommandsFailingExitIsALogLine) {
  const auto import_with_status = [](int status) {
    std::string dir = base::TempDir("bundle_command_exit_" + std::to_string(status));
    wire::BundleMeta meta;
    meta.host = "h";
    auto writer = wire::BundleWriter::Create(dir, meta);
    EXPECT_TRUE(writer.ok());
    auto w = (*writer)->OpenProcess(wire::ProcessInfoRecord{90, 0, -1, 3, -1, "h", "srv", ""});
    EXPECT_TRUE(w.ok());
    wire::HostRangeRecord step;
    step.clock = wire::ClockDomain::kRealtime;
    step.tid = 90;
    step.start_ns = 1000;
    step.end_ns = 5000;
    step.layer = wire::RangeLayer::kStep;
    step.name = "step";
    EXPECT_TRUE((*w)->Append(step).ok());
    (*writer)->mutable_meta()->notes.push_back("command exit status " + std::to_string(status));
    EXPECT_TRUE((*writer)->Close().ok());
    model::Trace t;
    EXPECT_TRUE(ImportBundle(dir, {}, &t).ok());
    std::vector<std::pair<std::string, int64_t>> lines;
    for (size_t row = 0; row < t.logs.size(); ++row) {
      lines.emplace_back(std::string(t.str(t.logs.text[row])), int64_t{t.logs.ts_ns[row]});
    }
    return lines;
  };
  using Lines = std::vector<std::pair<std::string, int64_t>>;
  EXPECT_EQ(import_with_status(3),
            (Lines{{"teller record: the recorded command exited with status 3", 5000}}));
  EXPECT_EQ(
      import_with_status(137),
      (Lines{{"teller record: the recorded command was killed by signal 9 (SIGKILL)", 5000}}));
  EXPECT_EQ(import_with_status(0), Lines{});
  EXPECT_EQ(import_with_status(143), Lines{});
}

}  // namespace
}  // namespace teller::import

namespace teller::import {
namespace {

// A bundle of processes on host h: (pid, rank the launcher said) each, with one STEP
// range when `steps` says so; a process's record restated with rank_source
// "torch.distributed" where `group` names a rank.
struct ProcessSpec {
  int64_t pid;
  int32_t rank = -1;
  bool steps = true;
  int32_t group = -1;
};

std::string WriteBundleOf(const std::string& name, const std::vector<ProcessSpec>& specs) {
  std::string dir = base::TempDir(name);
  wire::BundleMeta meta;
  meta.host = "h";
  auto writer = wire::BundleWriter::Create(dir, meta);
  EXPECT_TRUE(writer.ok());
  for (const ProcessSpec& spec : specs) {
    auto w = (*writer)->OpenProcess(
        wire::ProcessInfoRecord{spec.pid, spec.rank, -1, -1, -1, "h", "python3", ""});
    EXPECT_TRUE(w.ok());
    EXPECT_TRUE((*w)->Append(wire::ThreadInfoRecord{spec.pid, "MainThread"}).ok());
    if (spec.group >= 0) {
      wire::ProcessInfoRecord learned = (*w)->process_info();
      learned.rank = spec.group;
      learned.world_size = 2;
      learned.rank_source = "torch.distributed";
      EXPECT_TRUE((*w)->Restate(learned).ok());
    }
    if (!spec.steps) continue;
    for (int64_t step = 0; step < 2; ++step) {
      const wire::Arg args[] = {wire::Arg::Int(wire::kStepArgStep, step)};
      wire::HostRangeRecord range;
      range.clock = wire::ClockDomain::kRealtime;
      range.tid = spec.pid;
      range.start_ns = 1000 + step * 1000 + spec.pid;
      range.end_ns = range.start_ns + 500;
      range.layer = wire::RangeLayer::kStep;
      range.name = "train_step";
      range.args = args;
      EXPECT_TRUE((*w)->Append(range).ok());
    }
  }
  auto log = (*writer)->OpenLog("console");
  EXPECT_TRUE(log.ok());
  for (const ProcessSpec& spec : specs) {
    EXPECT_TRUE((*log)
                    ->Append({5000, wire::ClockDomain::kRealtime, spec.pid, "stdout", "loss 0.5",
                              -1, "", "", 0})
                    .ok());
  }
  EXPECT_TRUE((*writer)->Close().ok());
  return dir;
}

// pid -> (process rank, rank of its log line).
std::map<int64_t, std::pair<int32_t, int32_t>> RanksByPid(const model::Trace& t) {
  std::map<int64_t, std::pair<int32_t, int32_t>> ranks;
  for (size_t p = 0; p < t.processes.size(); ++p) {
    ranks[t.processes.os_pid[p]] = {t.processes.rank[p], -2};
  }
  for (size_t row = 0; row < t.logs.size(); ++row)
    ranks[t.logs.os_pid[row]].second = t.logs.rank[row];
  return ranks;
}

size_t NotesContaining(const model::Trace& t, std::string_view text) {
  return std::count_if(t.meta.notes.begin(), t.meta.notes.end(), [&](const std::string& note) {
    return note.find(text) != std::string::npos;
  });
}

using Ranks = std::map<int64_t, std::pair<int32_t, int32_t>>;

// Launched without RANK (torch.multiprocessing.spawn): each process with events gets its
// own rank in pid order (not folder-name order: 300 sorts before 40 there), its log
// lines follow, and a note says so. The parent, which only named a thread, stays -1.
TEST(BundleImporterTest, ProcessesWithoutRanksGetOneEachInPidOrder) {
  const std::string dir = WriteBundleOf("bundle_unranked", {{300}, {40}, {7, -1, /*steps=*/false}});
  model::Trace t;
  ASSERT_TRUE(ImportBundle(dir, {}, &t).ok());
  EXPECT_EQ(RanksByPid(t), (Ranks{{7, {-1, -1}}, {40, {0, 0}}, {300, {1, 1}}}));
  ASSERT_EQ(NotesContaining(t, "ranks assigned"), 1u);
  EXPECT_EQ(NotesContaining(t, dir + ": ranks assigned in (host, pid) order, since no launcher "
                                     "variable (RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK, "
                                     "SLURM_PROCID), process group or meta.json said the ranks "
                                     "of 2 processes: h pid 40 -> rank 0, h pid 300 -> rank 1"),
            1u);
  // The same on several threads.
  ImportOptions threads;
  threads.threads = 3;
  model::Trace parallel;
  ASSERT_TRUE(ImportBundle(dir, threads, &parallel).ok());
  EXPECT_EQ(RanksByPid(parallel), RanksByPid(t));
}

// Ranks a trace carries are never changed; unranked processes beside them are numbered
// after the highest; a lone unranked one (an engine's scheduler beside its ranked
// workers) stays -1 and nothing is noted.
TEST(BundleImporterTest, RanksTheBundleCarriesAreKept) {
  {
    model::Trace t;
    ASSERT_TRUE(ImportBundle(WriteBundleOf("bundle_ranked", {{10, 1}, {20, 0}}), {}, &t).ok());
    EXPECT_EQ(RanksByPid(t), (Ranks{{10, {1, 1}}, {20, {0, 0}}}));
    EXPECT_EQ(NotesContaining(t, "ranks assigned"), 0u);
  }
  {
    model::Trace t;
    ASSERT_TRUE(
        ImportBundle(WriteBundleOf("bundle_one_unranked", {{10, 1}, {20, 0}, {5}}), {}, &t).ok());
    EXPECT_EQ(RanksByPid(t), (Ranks{{5, {-1, -1}}, {10, {1, 1}}, {20, {0, 0}}}));
    EXPECT_EQ(NotesContaining(t, "ranks assigned"), 0u);
  }
  {
    model::Trace t;
    ASSERT_TRUE(
        ImportBundle(WriteBundleOf("bundle_mixed", {{10, 1}, {20, 0}, {5}, {6}}), {}, &t).ok());
    EXPECT_EQ(RanksByPid(t), (Ranks{{5, {2, 2}}, {6, {3, 3}}, {10, {1, 1}}, {20, {0, 0}}}));
    EXPECT_EQ(NotesContaining(t, "h pid 5 -> rank 2, h pid 6 -> rank 3"), 1u);
  }
  {
    // A rank hint (--rank, a file name) is a rank the user said.
    ImportOptions hint;
    hint.rank_hint = 4;
    model::Trace t;
    ASSERT_TRUE(ImportBundle(WriteBundleOf("bundle_hint", {{10}, {20}}), hint, &t).ok());
    EXPECT_EQ(RanksByPid(t), (Ranks{{10, {4, 4}}, {20, {4, 4}}}));
  }
}

// A process group's rank, restated after the first record (the Python hooks after
// init_process_group), is the process's rank; older readers read it the same way.
TEST(BundleImporterTest, ARankTheProcessGroupRestatedIsTheProcesssRank) {
  const std::string dir =
      WriteBundleOf("bundle_group", {{10, -1, true, 1}, {20, -1, true, 0}, {30, 5, true, 2}});
  model::Trace t;
  ASSERT_TRUE(ImportBundle(dir, {}, &t).ok());
  EXPECT_EQ(RanksByPid(t), (Ranks{{10, {1, 1}}, {20, {0, 0}}, {30, {2, 2}}}));
  EXPECT_EQ(NotesContaining(t, "ranks assigned"), 0u);
}

// Several bundles in one trace: the second's unranked processes continue after the first's.
TEST(BundleImporterTest, UnrankedProcessesOfASecondBundleContinueTheNumbering) {
  const std::string a = WriteBundleOf("bundle_node_a", {{10}, {11}});
  const std::string b = WriteBundleOf("bundle_node_b", {{10}, {11}});
  model::Trace t;
  ASSERT_TRUE(ImportBundle(a, {}, &t).ok());
  ASSERT_TRUE(ImportBundle(b, {}, &t).ok());
  ASSERT_EQ(t.processes.size(), 4u);
  EXPECT_EQ(t.processes.rank, (std::vector<int32_t>{0, 1, 2, 3}));
}

}  // namespace
}  // namespace teller::import
