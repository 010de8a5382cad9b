#include "import/nsys_importer.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "base/file_util.h"
#include "base/testing.h"
#include "import/importer.h"

namespace teller::import {
namespace {

using model::EventPhase;
using model::Layer;

constexpr int64_t kSessionStartNs = 1700000000000000000;

std::string FixtureSql() {
  std::ifstream in(base::SourceDir() + "/tests/fixtures/nsys/tiny_export.sql");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Builds an SQLite file from the fixture SQL plus `changes` (run after it).
std::string BuildDb(const std::string& name, const std::string& changes = "") {
  std::string path = base::TempDir("nsys_" + name) + "/export.sqlite";
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  std::string sql = FixtureSql();
  EXPECT_FALSE(sql.empty()) << "fixture not found; set TELLER_SOURCE_DIR";
  char* error = nullptr;
  // One transaction without a journal: a test database need not survive a crash.
  sql = "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; BEGIN;" + sql + changes + "COMMIT;";
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error), SQLITE_OK)
      << (error ? error : "");
  sqlite3_free(error);
  sqlite3_close(db);
  return path;
}

std::string PhaseName(EventPhase phase) {
  switch (phase) {
    case EventPhase::kComplete:
      return "X";
    case EventPhase::kInstant:
      return "i";
    case EventPhase::kBegin:
      return "B";
    case EventPhase::kEnd:
      return "E";
  }
  return "?";
}

// One line per event: layer phase name | thread | start (ns after session start) dur corr.
std::vector<std::string> EventLines(const model::Trace& trace) {
  std::vector<std::pair<int64_t, std::string>> lines;
  const model::EventTable& e = trace.events;
  for (size_t i = 0; i < e.size(); ++i) {
    std::string line =
        fmt::format("{} {} {} | {} | {} {} {}", model::LayerName(e.layer[i]), PhaseName(e.phase[i]),
                    trace.str(e.name[i]), trace.str(trace.threads.name[e.thread[i].value()]),
                    e.start_ns[i] - kSessionStartNs, e.dur_ns[i],
                    e.correlation[i].valid() ? std::to_string(e.correlation[i].value()) : "-");
    lines.emplace_back(e.start_ns[i], line);
  }
  std::stable_sort(lines.begin(), lines.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  for (auto& line : lines) out.push_back(line.second);
  return out;
}

int64_t FindEvent(const model::Trace& trace, std::string_view name) {
  for (size_t i = 0; i < trace.events.size(); ++i) {
    if (trace.str(trace.events.name[i]) == name) return static_cast<int64_t>(i);
  }
  return -1;
}

int64_t IntArg(model::Trace& trace, int64_t row, std::string_view key) {
  int64_t value = INT64_MIN;
  trace.FindIntArg(model::EventRow(static_cast<uint32_t>(row)), trace.strings.Intern(key), &value);
  return value;
}

std::string StringArg(model::Trace& trace, int64_t row, std::string_view key) {
  model::StringId value = model::StringId::Invalid();
  if (!trace.FindStringArg(model::EventRow(static_cast<uint32_t>(row)), trace.strings.Intern(key),
                           &value)) {
    return "<none>";
  }
  return std::string(trace.str(value));
}

TEST(NsysTiny, GoldenEvents) {
  model::Trace trace;
  ASSERT_TRUE(ImportNsys(BuildDb("golden"), {}, &trace).ok());
  // Expected from tests/fixtures/nsys/tiny_export.sql by hand: nsys times plus the
  // session start, runtime names without the _vNNNN suffix, kernels on the stream
  // track, NVTX ranges with an end as complete events.
  const std::vector<std::string> expected = {
      "FE X step | MainThread | 1000 8000 -",
      "FE X prefetch | worker-0 | 1200 4000 -",
      "FE X forward | MainThread | 1500 4500 -",
      "RT X cudaLaunchKernel | MainThread | 2000 500 10",
      "K X void gemm_bf16_kernel<128>(float *, const float *) | stream 7 (NVIDIA H200, device 0) "
      "| 2600 1000 10",
      "RT X cudaMemcpyAsync | MainThread | 3000 400 11",
      "MEM X Memcpy HtoD | stream 7 (NVIDIA H200, device 0) | 3700 200 11",
      "DRV X cuLaunchKernel | worker-0 | 4000 300 13",
      "COMM X ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm *, unsigned long, ncclWork *) "
      "| stream 7 (NVIDIA H200, device 0) | 4400 1000 13",
      "RT X cudaGraphLaunch | worker-0 | 4500 200 14",
      "K X void rms_norm_kernel<float>(float *, const float *, int) | stream 7 (NVIDIA H200, "
      "device 0) | 5500 700 14",
      "SYNC X cudaStreamSynchronize | MainThread | 6500 1500 12",
      "SYNC X Stream Sync | stream 7 (NVIDIA H200, device 0) | 6600 1300 12",
      "OTHER i checkpoint | MainThread | 7000 0 -",
      "FE B unclosed | worker-0 | 8500 0 -",
  };
  EXPECT_EQ(EventLines(trace), expected);

  ASSERT_EQ(trace.processes.size(), 1u);  // bash in PROCESSES has no events
  EXPECT_EQ(trace.processes.os_pid[0], 4242);
  EXPECT_EQ(trace.str(trace.processes.name[0]), "python3");
  EXPECT_EQ(trace.str(trace.processes.host[0]), "node-a");
  EXPECT_EQ(trace.processes.rank[0], -1);
  // Times are converted on import, as the bundle importer does: no offset left to apply.
  EXPECT_EQ(trace.processes.clock_offset_ns[0], 0);
  ASSERT_EQ(trace.threads.size(), 3u);
  std::set<std::tuple<int64_t, std::string, int, int>> threads;
  for (size_t i = 0; i < trace.threads.size(); ++i) {
    EXPECT_EQ(trace.threads.process[i].value(), 0u);
    threads.emplace(trace.threads.os_tid[i], std::string(trace.str(trace.threads.name[i])),
                    trace.threads.is_device[i], trace.threads.device[i]);
  }
  EXPECT_EQ(threads, (std::set<std::tuple<int64_t, std::string, int, int>>{
                         {4242, "MainThread", 0, -1},
                         {4250, "worker-0", 0, -1},
                         {7, "stream 7 (NVIDIA H200, device 0)", 1, 0}}));
  EXPECT_EQ(trace.meta.format, model::TraceFormat::kNsys);
}

TEST(NsysTiny, ArgsFlagsAndIds) {
  model::Trace trace;
  ASSERT_TRUE(ImportNsys(BuildDb("args"), {}, &trace).ok());
  int64_t gemm = FindEvent(trace, "void gemm_bf16_kernel<128>(float *, const float *)");
  ASSERT_GE(gemm, 0);
  // Argument names as the bundle importer writes them (docs/importers/bundle.md).
  EXPECT_EQ(StringArg(trace, gemm, "grid"), "128,1,1");
  EXPECT_EQ(StringArg(trace, gemm, "block"), "256,1,1");
  EXPECT_EQ(IntArg(trace, gemm, "dynamic_shared_memory_bytes"), 49152);
  EXPECT_EQ(IntArg(trace, gemm, "static_shared_memory_bytes"), INT64_MIN);  // 0: not kept
  EXPECT_EQ(IntArg(trace, gemm, "graph_node_id"), INT64_MIN);
  EXPECT_EQ(StringArg(trace, gemm, "short_name"), "gemm_bf16_kernel");
  int64_t nccl = FindEvent(
      trace, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm *, unsigned long, ncclWork *)");
  EXPECT_EQ(StringArg(trace, nccl, "grid"), "8,1,1");
  EXPECT_EQ(IntArg(trace, nccl, "static_shared_memory_bytes"), 1024);
  EXPECT_FALSE(trace.events.id[gemm].valid());

  int64_t graph_kernel =
      FindEvent(trace, "void rms_norm_kernel<float>(float *, const float *, int)");
  ASSERT_GE(graph_kernel, 0);
  EXPECT_EQ(trace.events.flags[graph_kernel] & model::kFlagGraphNode, model::kFlagGraphNode);
  EXPECT_EQ(trace.events.id[graph_kernel].value(), 77);
  EXPECT_EQ(IntArg(trace, graph_kernel, "graph_node_id"), 77);
  EXPECT_EQ(StringArg(trace, graph_kernel, "grid"), "64,2,1");
  int64_t graph_launch = FindEvent(trace, "cudaGraphLaunch");
  EXPECT_EQ(trace.events.flags[graph_launch] & model::kFlagGraphLaunch, model::kFlagGraphLaunch);
  // Its kernel has no globalPid: the process came through correlation id 14.
  EXPECT_EQ(trace.stats.Get("nsys_device_process_from_correlation"), 1);

  int64_t sync_call = FindEvent(trace, "cudaStreamSynchronize");
  EXPECT_EQ(IntArg(trace, sync_call, "result"), 700);
  EXPECT_EQ(IntArg(trace, FindEvent(trace, "cudaLaunchKernel"), "result"), INT64_MIN);
  int64_t memcpy = FindEvent(trace, "Memcpy HtoD");
  EXPECT_EQ(IntArg(trace, memcpy, "bytes"), 4096);
  EXPECT_EQ(StringArg(trace, memcpy, "kind"), "HtoD");
  int64_t sync = FindEvent(trace, "Stream Sync");
  EXPECT_EQ(IntArg(trace, sync, "event"), INT64_MIN);  // 0xFFFFFFFF = none

  int64_t prefetch = FindEvent(trace, "prefetch");
  EXPECT_EQ(StringArg(trace, prefetch, "domain"), "engine");
  EXPECT_EQ(trace.events.id[prefetch].value(), 5);
  EXPECT_EQ(StringArg(trace, FindEvent(trace, "step"), "domain"), "<none>");
  EXPECT_EQ(IntArg(trace, FindEvent(trace, "forward"), "category"), 3);

  EXPECT_EQ(trace.stats.Get("nsys_missing_table_CUPTI_ACTIVITY_KIND_MEMSET"), 1);
  EXPECT_EQ(trace.stats.entries().at("nsys_missing_table_CUPTI_ACTIVITY_KIND_MEMSET").severity,
            model::StatSeverity::kInfo);
  EXPECT_EQ(trace.stats.Get("nsys_nvtx_range_without_end"), 1);
  EXPECT_EQ(trace.stats.Get("nsys_nvtx_skipped_event_type"), 1);
  EXPECT_EQ(trace.stats.Get("nsys_unresolved_string_id"), 0);
}

TEST(NsysTiny, NestingInputs) {
  // What reconstruction needs to nest: on the main thread, step > forward > the
  // launch and the memcpy call; the sync call and the mark are in step, not in forward.
  model::Trace trace;
  ASSERT_TRUE(ImportNsys(BuildDb("nesting"), {}, &trace).ok());
  auto contains = [&](std::string_view outer, std::string_view inner) {
    int64_t o = FindEvent(trace, outer), i = FindEvent(trace, inner);
    const model::EventTable& e = trace.events;
    return e.thread[o] == e.thread[i] && e.start_ns[o] <= e.start_ns[i] &&
           e.end_ns(model::EventRow(i)) <= e.end_ns(model::EventRow(o));
  };
  EXPECT_TRUE(contains("step", "forward"));
  EXPECT_TRUE(contains("forward", "cudaLaunchKernel"));
  EXPECT_TRUE(contains("forward", "cudaMemcpyAsync"));
  EXPECT_TRUE(contains("step", "cudaStreamSynchronize"));
  EXPECT_TRUE(contains("step", "checkpoint"));
  EXPECT_FALSE(contains("forward", "cudaStreamSynchronize"));
  // The start/end range of the worker holds its driver call and its graph launch.
  EXPECT_TRUE(contains("prefetch", "cuLaunchKernel"));
  EXPECT_TRUE(contains("prefetch", "cudaGraphLaunch"));
  EXPECT_FALSE(contains("step", "prefetch"));  // other thread
}

TEST(NsysTiny, NeverEchoesRecordingEnvironment) {
  model::Trace trace;
  ASSERT_TRUE(ImportNsys(BuildDb("secrets"), {}, &trace).ok());
  for (size_t i = 0; i < trace.strings.size(); ++i) {
    std::string_view text = trace.strings.Get(model::StringId(static_cast<uint32_t>(i)));
    EXPECT_EQ(text.find("teller-must-not-echo"), std::string_view::npos) << text;
  }
  for (const std::string& note : trace.meta.notes) {
    EXPECT_EQ(note.find("teller-must-not-echo"), std::string::npos);
  }
}

TEST(NsysTiny, MissingDriverTable) {
  model::Trace trace;
  ASSERT_TRUE(
      ImportNsys(BuildDb("no_driver", "DROP TABLE CUPTI_ACTIVITY_KIND_DRIVER;"), {}, &trace).ok());
  EXPECT_EQ(trace.stats.Get("nsys_missing_table_CUPTI_ACTIVITY_KIND_DRIVER"), 1);
  EXPECT_EQ(FindEvent(trace, "cuLaunchKernel"), -1);
  // The NCCL kernel keeps its process from globalPid; 14 events remain.
  EXPECT_GE(FindEvent(trace,
                      "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm *, unsigned "
                      "long, ncclWork *)"),
            0);
  EXPECT_EQ(trace.events.size(), 14u);
}

TEST(NsysTiny, OlderTextColumnOnly) {
  model::Trace newer, older;
  ASSERT_TRUE(ImportNsys(BuildDb("text_newer"), {}, &newer).ok());
  ASSERT_TRUE(ImportNsys(BuildDb("text_older",
                                 "UPDATE NVTX_EVENTS SET text = (SELECT value FROM StringIds "
                                 "WHERE id = textId) WHERE textId IS NOT NULL;"
                                 "ALTER TABLE NVTX_EVENTS DROP COLUMN textId;"),
                         {}, &older)
                  .ok());
  EXPECT_EQ(EventLines(older), EventLines(newer));
  EXPECT_GE(FindEvent(older, "step"), 0);
}

TEST(NsysTiny, DriverCallsInRuntimeTableByEventClass) {
  // nsys 2024+ exports: no DRIVER table, driver calls in RUNTIME with eventClass 1.
  model::Trace trace;
  ASSERT_TRUE(
      ImportNsys(BuildDb("event_class",
                         "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME SELECT * FROM "
                         "CUPTI_ACTIVITY_KIND_DRIVER; DROP TABLE CUPTI_ACTIVITY_KIND_DRIVER;"),
                 {}, &trace)
          .ok());
  int64_t call = FindEvent(trace, "cuLaunchKernel");
  ASSERT_GE(call, 0);
  EXPECT_EQ(trace.events.layer[call], Layer::kDrv);
}

TEST(NsysTiny, MissingRequiredColumnSkipsTable) {
  model::Trace trace;
  ASSERT_TRUE(ImportNsys(BuildDb("no_stream",
                                 "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN streamId;"),
                         {}, &trace)
                  .ok());
  EXPECT_EQ(trace.stats.Get("nsys_missing_column_CUPTI_ACTIVITY_KIND_KERNEL_streamId"), 3);
  EXPECT_EQ(
      trace.stats.entries().at("nsys_missing_column_CUPTI_ACTIVITY_KIND_KERNEL_streamId").severity,
      model::StatSeverity::kDataLoss);
  for (size_t i = 0; i < trace.events.size(); ++i) {
    EXPECT_NE(trace.events.layer[i], Layer::kK);
    EXPECT_NE(trace.events.layer[i], Layer::kComm);
  }
  EXPECT_EQ(trace.events.size(), 15u - 3u);
}

TEST(NsysTiny, MissingSessionStartKeepsRelativeTimes) {
  model::Trace trace;
  ASSERT_TRUE(
      ImportNsys(BuildDb("no_start", "DROP TABLE TARGET_INFO_SESSION_START_TIME;"), {}, &trace)
          .ok());
  EXPECT_EQ(trace.stats.Get("nsys_session_start_unknown"), 1);
  EXPECT_EQ(trace.events.start_ns[FindEvent(trace, "step")], 1000);
  ASSERT_EQ(trace.meta.notes.size(), 1u);
}

TEST(NsysTiny, RankHintAndMixedFormat) {
  model::Trace trace;
  trace.meta.format = model::TraceFormat::kKineto;
  ImportOptions options;
  options.rank_hint = 3;
  ASSERT_TRUE(ImportNsys(BuildDb("mixed"), options, &trace).ok());
  EXPECT_EQ(trace.meta.format, model::TraceFormat::kMixed);
  EXPECT_EQ(trace.processes.rank[0], 3);
}

TEST(NsysBadInput, NotSqlite) {
  std::string path = base::TempDir("nsys_not_sqlite") + "/trace.sqlite";
  std::ofstream(path) << "{\"traceEvents\": []}\n";
  model::Trace trace;
  base::Status status = ImportNsys(path, {}, &trace);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find(path), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("not an SQLite database"), std::string::npos) << status.message();
  EXPECT_EQ(trace.events.size(), 0u);
}

TEST(NsysBadInput, EmptySqliteFile) {
  std::string path = base::TempDir("nsys_empty") + "/empty.sqlite";
  std::ofstream(path).flush();
  model::Trace trace;
  base::Status status = ImportNsys(path, {}, &trace);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find(path), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("not an Nsight Systems export"), std::string::npos)
      << status.message();
}

TEST(NsysBadInput, SqliteOfAnotherProgram) {
  std::string path = base::TempDir("nsys_other") + "/other.sqlite";
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(
      sqlite3_exec(db, "CREATE TABLE notes(id INTEGER, body TEXT);", nullptr, nullptr, nullptr),
      SQLITE_OK);
  sqlite3_close(db);
  model::Trace trace;
  base::Status status = ImportNsys(path, {}, &trace);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("not an Nsight Systems export"), std::string::npos);
  EXPECT_NE(status.message().find("found 1 tables"), std::string::npos) << status.message();
}

TEST(NsysBadInput, MissingFile) {
  model::Trace trace;
  base::Status status = ImportNsys("/nonexistent/report.sqlite", {}, &trace);
  EXPECT_EQ(status.code(), base::StatusCode::kNotFound);
  EXPECT_NE(status.message().find("/nonexistent/report.sqlite"), std::string::npos);
}

TEST(NsysNames, StripApiVersion) {
  EXPECT_EQ(StripNsysApiVersion("cudaLaunchKernel_v7000"), "cudaLaunchKernel");
  EXPECT_EQ(StripNsysApiVersion("cudaGetDeviceProperties_v2_v12000"), "cudaGetDeviceProperties_v2");
  EXPECT_EQ(StripNsysApiVersion("cuGetProcAddress_v2"), "cuGetProcAddress_v2");
  EXPECT_EQ(StripNsysApiVersion("cuLaunchKernel"), "cuLaunchKernel");
  EXPECT_EQ(StripNsysApiVersion("_v1234"), "_v1234");
  EXPECT_EQ(StripNsysApiVersion("x1234"), "x1234");
  EXPECT_EQ(NsysPidOf(282323165693308), 50556);
  EXPECT_EQ(NsysTidOf(282323165694058), 51306);
}

// The real export of MANIFEST.md section 12.
class NsysReal : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string dir = base::RealTracesDir();
    if (dir.empty()) GTEST_SKIP() << "no ../shared/real-traces";
    path_ = dir + "/nvfuser__h200_cross_entropy_report1.sqlite";
    if (!std::filesystem::exists(path_)) GTEST_SKIP() << path_ << " absent";
  }
  std::string path_;
};

TEST_F(NsysReal, RowCountsMatchManifest) {
  model::Trace trace;
  base::Status status = ImportNsys(path_, {}, &trace);
  ASSERT_TRUE(status.ok()) << status.message();
  const model::EventTable& e = trace.events;
  int kernels = 0, host_calls = 0, drivers = 0, memcpys = 0, memsets = 0, device_syncs = 0,
      nvtx = 0;
  for (size_t i = 0; i < e.size(); ++i) {
    bool device = trace.threads.is_device[e.thread[i].value()];
    std::string_view name = trace.str(e.name[i]);
    if (device && (e.layer[i] == Layer::kK || e.layer[i] == Layer::kComm)) ++kernels;
    if (!device && e.layer[i] != Layer::kFe && e.layer[i] != Layer::kOther) ++host_calls;
    if (!device && e.layer[i] == Layer::kDrv) ++drivers;
    if (device && name.starts_with("Memcpy")) ++memcpys;
    if (device && name == "Memset") ++memsets;
    if (device && e.layer[i] == Layer::kSync) ++device_syncs;
    if (e.layer[i] == Layer::kFe) ++nvtx;
  }
  EXPECT_EQ(kernels, 18);
  EXPECT_EQ(host_calls, 990);
  EXPECT_EQ(memcpys, 3);
  EXPECT_EQ(memsets, 3);
  EXPECT_EQ(device_syncs, 3);
  EXPECT_EQ(nvtx, 13513);
  EXPECT_EQ(e.size(), 18u + 990u + 3u + 3u + 3u + 13513u);
  // Driver calls sit in the runtime table with eventClass 1: 899 of the 990 rows
  // (sqlite3: SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass = 1).
  EXPECT_EQ(drivers, 899);
  EXPECT_EQ(trace.stats.Get("nsys_missing_table_CUPTI_ACTIVITY_KIND_DRIVER"), 1);
  EXPECT_EQ(trace.stats.Get("nsys_unresolved_string_id"), 0);
  EXPECT_EQ(trace.stats.Get("nsys_negative_duration"), 0);

  // pytest (50556) runs everything; python3 (50922) only probes the driver.
  ASSERT_EQ(trace.processes.size(), 2u);
  std::map<int64_t, std::string> processes;
  for (size_t i = 0; i < trace.processes.size(); ++i) {
    processes[trace.processes.os_pid[i]] = trace.str(trace.processes.name[i]);
    EXPECT_EQ(trace.str(trace.processes.host[i]), "ipp2-0047.nvidia.com");
  }
  EXPECT_EQ(processes, (std::map<int64_t, std::string>{{50556, "pytest"}, {50922, "python3"}}));
  int device_tracks = 0;
  for (size_t i = 0; i < trace.threads.size(); ++i) {
    if (!trace.threads.is_device[i]) continue;
    ++device_tracks;
    EXPECT_EQ(trace.processes.os_pid[trace.threads.process[i].value()], 50556);
  }
  // Stream 7 plus the context-wide track of the cudaDeviceSynchronize record.
  EXPECT_EQ(device_tracks, 2);

  // First kernel: start 5844617581 ns after the session start 1741793819042497997.
  int64_t first_kernel = INT64_MAX;
  for (size_t i = 0; i < e.size(); ++i) {
    if (e.layer[i] == Layer::kK) first_kernel = std::min(first_kernel, e.start_ns[i]);
  }
  EXPECT_EQ(first_kernel, 1741793819042497997 + 5844617581);

  // Binding inputs: every kernel, memcpy, memset and sync record has a host call
  // with the same correlation id in the same process (18 + 3 + 3 + 3 of 27).
  std::set<std::pair<uint32_t, int64_t>> host_correlations;
  for (size_t i = 0; i < e.size(); ++i) {
    if (!trace.threads.is_device[e.thread[i].value()] && e.correlation[i].valid()) {
      host_correlations.emplace(e.process[i].value(), e.correlation[i].value());
    }
  }
  int device_work = 0, bound = 0, kernels_bound = 0;
  for (size_t i = 0; i < e.size(); ++i) {
    if (!trace.threads.is_device[e.thread[i].value()]) continue;
    ++device_work;
    bool found = host_correlations.count({e.process[i].value(), e.correlation[i].value()}) > 0;
    bound += found;
    if (found && e.layer[i] == Layer::kK) ++kernels_bound;
  }
  EXPECT_EQ(device_work, 27);
  EXPECT_EQ(bound, 27);
  EXPECT_EQ(kernels_bound, 18);
}

TEST_F(NsysReal, NothingFromTheRecordingEnvironment) {
  model::Trace trace;
  ASSERT_TRUE(ImportNsys(path_, {}, &trace).ok());
  // META_DATA_CAPTURE, TARGET_INFO_SYSTEM_ENV.DeviceEnvironment and the environment
  // strings in StringIds must not reach the pool.
  for (size_t i = 0; i < trace.strings.size(); ++i) {
    std::string_view text = trace.strings.Get(model::StringId(static_cast<uint32_t>(i)));
    EXPECT_EQ(text.find("VSCODE_"), std::string_view::npos) << text;
    EXPECT_EQ(text.find("PATH="), std::string_view::npos) << text;
  }
}

// Throughput against a raw sqlite3_step scan of the same columns. Runs only when
// TELLER_NSYS_BENCH_ROWS is set (rows per table); see docs/importers/nsys.md.
TEST(NsysBench, RowsPerSecond) {
  const char* rows_env = std::getenv("TELLER_NSYS_BENCH_ROWS");
  if (rows_env == nullptr) GTEST_SKIP() << "set TELLER_NSYS_BENCH_ROWS to run";
  const int64_t rows = std::atoll(rows_env);
  // Kernel, runtime and NVTX rows shaped like the fixture's; times increase.
  std::string fill = fmt::format(
      "DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME; DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL;"
      "DELETE FROM NVTX_EVENTS;"
      "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < {0}) "
      "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME SELECT i * 1000, i * 1000 + 400, 0, "
      "281546145665170 + (i % 2) * 8, i, 1 + (i % 4), 0, NULL FROM n;"
      "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < {0}) "
      "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT i * 1000 + 500, i * 1000 + 900, 0, 1, NULL, "
      "7 + (i % 4), i, 281546145660928, 6 + (i % 3) * 3, 7, NULL, 64, 128, 1, 1, 256, 1, 1, 0, 0, "
      "i, NULL FROM n;"
      "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < {0}) "
      "INSERT INTO NVTX_EVENTS SELECT i * 1000, i * 1000 + 800, 59, NULL, NULL, NULL, "
      "CASE WHEN i % 2 = 0 THEN 'layer_' || (i % 64) END, 281546145665170, NULL, "
      "CASE WHEN i % 2 = 1 THEN 20 END, 0, NULL, NULL, NULL FROM n;",
      rows);
  std::string path = BuildDb("bench", fill);

  // Wall time moves with the load of a shared machine; CPU time of this process much less.
  struct Seconds {
    double wall = 1e9, cpu = 1e9;
  };
  auto cpu_now = [] {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
  };
  auto measure = [&](Seconds* best, const auto& work) {
    auto wall_begin = std::chrono::steady_clock::now();
    double cpu_begin = cpu_now();
    work();
    best->cpu = std::min(best->cpu, cpu_now() - cpu_begin);
    best->wall = std::min(
        best->wall,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_begin).count());
  };
  // The floor: step through the same columns the importer reads.
  const std::vector<std::string> scans = {
      "SELECT start, end, globalTid, nameId, eventClass, correlationId, returnValue "
      "FROM CUPTI_ACTIVITY_KIND_RUNTIME",
      "SELECT start, end, deviceId, streamId, correlationId, globalPid, demangledName, "
      "shortName, gridX, gridY, gridZ, blockX, blockY, blockZ, "
      "staticSharedMemory, dynamicSharedMemory, graphNodeId FROM CUPTI_ACTIVITY_KIND_KERNEL",
      "SELECT start, end, eventType, globalTid, text, textId, domainId, rangeId, category "
      "FROM NVTX_EVENTS"};
  Seconds scan, import;
  int64_t scanned = 0;
  for (int round = 0; round < 3; ++round) {
    int64_t sum = 0;
    measure(&scan, [&] {
      sqlite3* db = nullptr;
      ASSERT_EQ(
          sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nullptr),
          SQLITE_OK);
      // Same settings as the importer's.
      sqlite3_exec(db, "PRAGMA mmap_size = 68719476736", nullptr, nullptr, nullptr);
      scanned = 0;
      for (const std::string& sql : scans) {
        sqlite3_stmt* statement = nullptr;
        ASSERT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &statement, nullptr), SQLITE_OK);
        // One call per column: the text column's bytes, every other column's int64.
        int columns = sqlite3_column_count(statement);
        std::vector<bool> is_text(columns);
        for (int c = 0; c < columns; ++c) {
          const char* type = sqlite3_column_decltype(statement, c);
          is_text[c] = type != nullptr && std::string_view(type) == "TEXT";
        }
        while (sqlite3_step(statement) == SQLITE_ROW) {
          for (int c = 0; c < columns; ++c) {
            sum += is_text[c] ? sqlite3_column_bytes(statement, c)
                              : sqlite3_column_int64(statement, c);
          }
          ++scanned;
        }
        sqlite3_finalize(statement);
      }
      sqlite3_close(db);
    });
    EXPECT_NE(sum, 0);
    model::Trace trace;  // freed outside the measurement
    measure(&import, [&] { ASSERT_TRUE(ImportNsys(path, {}, &trace).ok()); });
    // Rows of the bench tables plus the fixture's driver, memcpy and sync rows.
    EXPECT_EQ(static_cast<int64_t>(trace.events.size()), 3 * rows + 3);
  }
  auto rate = [&](double seconds) { return scanned / seconds / 1e6; };
  std::string report = fmt::format(
      "nsys bench: {} rows (best of 3)\n"
      "  raw sqlite3_step scan: {:.2f} M rows/s CPU ({:.3f} s), {:.2f} M rows/s wall\n"
      "  ImportNsys:            {:.2f} M rows/s CPU ({:.3f} s), {:.2f} M rows/s wall\n"
      "  import/scan (CPU):     {:.2f}",
      scanned, rate(scan.cpu), scan.cpu, rate(scan.wall), rate(import.cpu), import.cpu,
      rate(import.wall), scan.cpu / import.cpu);
  std::printf("%s\n", report.c_str());
  RecordProperty("report", report);
}

}  // namespace
}  // namespace teller::import
