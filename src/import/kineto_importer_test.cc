#include "import/kineto_importer.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "base/file_util.h"
#include "base/testing.h"
#include "import/kineto_json_scanner.h"

namespace teller::import {
namespace {

using model::EventPhase;
using model::Layer;
using model::Trace;

constexpr int64_t kBase = 1700000000000000000;

// A ChunkReader over a string that hands out at most step bytes per read.
class StringReader : public base::ChunkReader {
 public:
  StringReader(std::string text, size_t step) : text_(std::move(text)), step_(step) {}
  base::StatusOr<size_t> Read(std::string* out, size_t max_bytes) override {
    size_t n = std::min({max_bytes, step_, text_.size() - offset_});
    out->append(text_, offset_, n);
    offset_ += n;
    return n;
  }
  uint64_t file_offset() const override { return offset_; }
  uint64_t file_size() const override { return text_.size(); }

 private:
  std::string text_;
  size_t step_;
  size_t offset_ = 0;
};

std::string Fixture(const std::string& name) {
  return base::SourceDir() + "/tests/fixtures/kineto/" + name;
}

std::string ReadText(const std::string& path) {
  base::StatusOr<std::string> text = base::ReadFile(path);
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return text.ok() ? *text : std::string();
}

base::Status ImportText(const std::string& text, Trace* trace, size_t step = 1 << 20,
                        size_t chunk_bytes = 1 << 20, int32_t rank_hint = -1) {
  StringReader reader(text, step);
  ImportOptions options;
  options.rank_hint = rank_hint;
  KinetoReadConfig config;
  config.chunk_bytes = chunk_bytes;
  return ImportKinetoFromReader(&reader, "memory.json", options, config, trace);
}

// The row of the first event with this name, or -1.
int64_t Find(const Trace& trace, std::string_view name, size_t nth = 0) {
  for (size_t i = 0; i < trace.events.size(); ++i) {
    if (trace.str(trace.events.name[i]) == name && nth-- == 0) return static_cast<int64_t>(i);
  }
  return -1;
}

std::string StringArg(const Trace& trace, int64_t row, std::string_view key) {
  base::StringId id;
  base::StringId key_id = trace.strings.Find(key);
  if (!key_id.valid() || !trace.FindStringArg(model::EventRow(row), key_id, &id)) return "<none>";
  return std::string(trace.str(id));
}

int64_t IntArg(const Trace& trace, int64_t row, std::string_view key) {
  int64_t value = INT64_MIN;
  base::StringId key_id = trace.strings.Find(key);
  if (key_id.valid()) trace.FindIntArg(model::EventRow(row), key_id, &value);
  return value;
}

// Every element of traceEvents is imported, metadata, a flow, or a named skip/error.
int64_t AccountedEvents(const model::Stats& stats) {
  int64_t total = 0;
  for (std::string_view name :
       {"kineto_events_imported", "kineto_metadata_events", "kineto_flow_events",
        "kineto_counter_events_skipped", "kineto_async_events_skipped",
        "kineto_profiler_span_skipped", "kineto_overhead_skipped", "kineto_global_instant_skipped",
        "kineto_event_not_object", "kineto_event_malformed", "kineto_event_missing_ph",
        "kineto_event_unknown_phase", "kineto_event_missing_name", "kineto_event_missing_ts",
        "kineto_event_bad_ts", "kineto_event_bad_dur", "kineto_event_bad_pid",
        "kineto_event_missing_tid"}) {
    total += stats.Get(name);
  }
  return total;
}

TEST(KinetoImporterTest, SmallModernTraceGolden) {
  Trace trace;
  ASSERT_TRUE(ImportKineto(Fixture("small_modern.json"), ImportOptions(), &trace).ok());
  const model::Stats& stats = trace.stats;
  EXPECT_EQ(stats.Get("kineto_events_read"), 36);
  EXPECT_EQ(stats.Get("kineto_events_imported"), 20);
  EXPECT_EQ(trace.events.size(), 20u);
  EXPECT_EQ(stats.Get("kineto_metadata_events"), 5);
  EXPECT_EQ(stats.Get("kineto_flow_events"), 5);
  EXPECT_EQ(stats.Get("kineto_counter_events_skipped"), 1);
  EXPECT_EQ(stats.Get("kineto_profiler_span_skipped"), 1);
  EXPECT_EQ(stats.Get("kineto_global_instant_skipped"), 1);
  EXPECT_EQ(stats.Get("kineto_overhead_skipped"), 1);
  EXPECT_EQ(stats.Get("kineto_event_missing_ts"), 1);
  EXPECT_EQ(stats.Get("kineto_event_bad_ts"), 1);
  EXPECT_EQ(stats.Get("kineto_flow_bound_correlation"), 1);
  EXPECT_EQ(stats.Get("kineto_truncated_file"), 0);
  EXPECT_EQ(AccountedEvents(stats), 36);
  EXPECT_EQ(trace.meta.format, model::TraceFormat::kKineto);

  // One process (host pid 100) owns the host threads and the device tracks.
  ASSERT_EQ(trace.processes.size(), 1u);
  EXPECT_EQ(trace.processes.os_pid[0], 100);
  EXPECT_EQ(trace.str(trace.processes.name[0]), "python3");
  EXPECT_EQ(trace.processes.rank[0], 1);

  struct Expected {
    std::string_view name;
    Layer layer;
    int64_t start_ns;
    int64_t dur_ns;
    int64_t correlation;  // -1 none
    bool device;
    int64_t os_tid;
  };
  const Expected expected[] = {
      {"execute_context_0(0)_generation_2(2)", Layer::kFe, kBase + 10000, 500000, -1, false, 101},
      {"torch/nn/\"mod\".py(3): forward", Layer::kFe, kBase + 10500, 400250, -1, false, 101},
      {"aten::mm", Layer::kBe, kBase + 20123, 30001, -1, false, 101},
      {"cudaLaunchKernel", Layer::kRt, kBase + 25000, 5500, 1001, false, 101},
      {"ampere_sgemm_128x64_tn", Layer::kK, kBase + 40001, 12345, 1001, true, 7},
      {"record_param_comms", Layer::kComm, kBase + 60000, 20000, -1, false, 101},
      {"nccl:all_reduce", Layer::kComm, kBase + 61000, 18000, -1, false, 101},
      {"cuLaunchKernelEx", Layer::kDrv, kBase + 62000, 3000, 1002, false, 101},
      {"ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", Layer::kComm,
       kBase + 70000, 100000, 1002, true, 20},
      {"cudaMemcpyAsync", Layer::kRt, kBase + 190000, 15000, 1003, false, 101},
      {"Memcpy HtoD (Pinned -> Device)", Layer::kMem, kBase + 200500, 1250, 1003, true, 7},
      {"Memset (Device)", Layer::kMem, kBase + 210000, 1000, 1004, true, 7},
      {"cudaStreamSynchronize", Layer::kSync, kBase + 220000, 30000, 1005, false, 101},
      {"Stream Sync", Layer::kSync, kBase + 221000, 28000, 1005, true, 7},
      {"void fused_kernel<float>(float*)", Layer::kK, kBase + 300000, 2000, 1010, true, 7},
      {"[memory]", Layer::kOther, kBase + 305000, 0, -1, false, 101},
      {"custom_range", Layer::kFe, kBase + 310000, 0, -1, false, -2},
      {"marker", Layer::kOther, kBase + 330000, 0, -1, false, 101},
  };
  for (const Expected& e : expected) {
    SCOPED_TRACE(std::string(e.name));
    int64_t row = Find(trace, e.name);
    ASSERT_GE(row, 0);
    EXPECT_EQ(trace.events.layer[row], e.layer);
    EXPECT_EQ(trace.events.start_ns[row], e.start_ns);
    EXPECT_EQ(trace.events.dur_ns[row], e.dur_ns);
    EXPECT_EQ(trace.events.correlation[row].valid() ? trace.events.correlation[row].value() : -1,
              e.correlation);
    uint32_t thread = trace.events.thread[row].value();
    EXPECT_EQ(trace.threads.is_device[thread] != 0, e.device);
    EXPECT_EQ(trace.threads.os_tid[thread], e.os_tid);
    EXPECT_EQ(trace.events.process[row].value(), 0u);
  }
  // The device-side copy of the step annotation is FE on the stream, name kept.
  int64_t gpu_step = Find(trace, "execute_context_0(0)_generation_2(2)", 1);
  ASSERT_GE(gpu_step, 0);
  EXPECT_EQ(trace.events.layer[gpu_step], Layer::kFe);
  EXPECT_EQ(trace.events.start_ns[gpu_step], kBase + 39999);
  EXPECT_EQ(trace.threads.is_device[trace.events.thread[gpu_step].value()], 1);

  // Ids, phases, args.
  int64_t kernel = Find(trace, "ampere_sgemm_128x64_tn");
  EXPECT_EQ(trace.events.id[kernel].value(), 2);
  EXPECT_EQ(StringArg(trace, kernel, "grid;block"), "4,2,1;128,1,1");
  uint32_t stream7 = trace.events.thread[kernel].value();
  EXPECT_EQ(trace.str(trace.threads.name[stream7]), "stream 7");
  EXPECT_EQ(trace.threads.device[stream7], 0);
  int64_t nccl_kernel =
      Find(trace, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)");
  EXPECT_EQ(trace.str(trace.threads.name[trace.events.thread[nccl_kernel].value()]), "stream 20");
  int64_t python = Find(trace, "torch/nn/\"mod\".py(3): forward");
  EXPECT_EQ(trace.events.id[python].value(), 5);
  EXPECT_EQ(IntArg(trace, python, "Python parent id"), 4);
  int64_t mm = Find(trace, "aten::mm");
  EXPECT_EQ(IntArg(trace, mm, "Sequence number"), 9);
  EXPECT_EQ(IntArg(trace, mm, "Fwd thread id"), 0);
  EXPECT_EQ(trace.events.args_count[mm], 2);  // Input Dims etc. are not kept
  EXPECT_EQ(IntArg(trace, Find(trace, "Memcpy HtoD (Pinned -> Device)"), "bytes"), 4096);
  EXPECT_EQ(StringArg(trace, Find(trace, "Stream Sync"), "cuda_sync_kind"), "Stream Sync");
  int64_t memory = Find(trace, "[memory]");
  EXPECT_EQ(trace.events.phase[memory], EventPhase::kInstant);
  EXPECT_EQ(IntArg(trace, memory, "Bytes"), 2048);
  EXPECT_EQ(IntArg(trace, memory, "Total Allocated"), 8192);
  int64_t begin = Find(trace, "custom_range");
  EXPECT_EQ(trace.events.phase[begin], EventPhase::kBegin);
  EXPECT_EQ(trace.events.phase[begin + 1], EventPhase::kEnd);
  EXPECT_EQ(trace.events.start_ns[begin + 1], kBase + 320000);
  EXPECT_EQ(trace.events.thread[begin + 1], trace.events.thread[begin]);
  EXPECT_EQ(trace.str(trace.threads.name[trace.events.thread[begin].value()]), "worker");
  EXPECT_EQ(trace.str(trace.threads.name[trace.events.thread[mm].value()]), "thread 101 (python3)");

  // Collectives: the host record and the kernel, rank in group from the rank list.
  ASSERT_EQ(trace.collectives.size(), 2u);
  const model::CollectiveTable& c = trace.collectives;
  EXPECT_EQ(c.event[0].value(), static_cast<uint32_t>(Find(trace, "record_param_comms")));
  EXPECT_EQ(c.event[1].value(), static_cast<uint32_t>(nccl_kernel));
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(trace.str(c.communicator[i]), "0");
    EXPECT_EQ(trace.str(c.op[i]), "allreduce");
    EXPECT_EQ(trace.str(c.dtype[i]), "BFloat16");
    EXPECT_EQ(c.size_bytes[i], 2048);
    EXPECT_EQ(c.group_size[i], 2);
    EXPECT_EQ(c.group_rank[i], 1);
  }
  EXPECT_EQ(c.sequence[0], 7);
  EXPECT_EQ(c.sequence[1], -1);
  EXPECT_EQ(StringArg(trace, Find(trace, "record_param_comms"), "Process Group Description"),
            "default_pg");

  // Notes: rank and GPU.
  bool rank_note = false, gpu_note = false;
  for (const std::string& note : trace.meta.notes) {
    rank_note |= note.find("rank 1 of 2 (nccl)") != std::string::npos;
    gpu_note |= note.find("NVIDIA H100 80GB HBM3") != std::string::npos;
  }
  EXPECT_TRUE(rank_note);
  EXPECT_TRUE(gpu_note);
}

TEST(KinetoImporterTest, LegacySchemaGolden) {
  Trace trace;
  ASSERT_TRUE(ImportKineto(Fixture("legacy_2021.json"), ImportOptions{nullptr, 4}, &trace).ok());
  EXPECT_EQ(trace.stats.Get("kineto_events_read"), 12);
  EXPECT_EQ(trace.events.size(), 6u);
  EXPECT_EQ(AccountedEvents(trace.stats), 12);
  ASSERT_EQ(trace.processes.size(), 1u);
  EXPECT_EQ(trace.processes.rank[0], 4);  // no distributedInfo: the hint
  EXPECT_EQ(trace.str(trace.processes.name[0]), "python");
  int64_t op = Find(trace, "aten::conv2d");
  EXPECT_EQ(trace.events.layer[op], Layer::kBe);
  EXPECT_EQ(trace.events.start_ns[op], 1606910596350400000);
  EXPECT_EQ(trace.events.id[op].value(), 862);
  uint32_t host = trace.events.thread[op].value();
  EXPECT_EQ(trace.threads.os_tid[host], 4093687616);
  EXPECT_EQ(trace.str(trace.threads.name[host]), "thread 1 (python)");
  int64_t launch = Find(trace, "cudaLaunchKernel");
  EXPECT_EQ(trace.events.layer[launch], Layer::kRt);
  EXPECT_EQ(trace.events.id[launch].value(), 862);  // lowercase "external id"
  EXPECT_EQ(trace.events.correlation[launch].value(), 65460);
  int64_t kernel = Find(trace,
                        "void cudnn::cnn::wgrad_alg0_engine<float, 128, 6, 7, 3, 3, 5, false, "
                        "512>(int, int, int, float const*, int, float*, float const*, "
                        "kernel_grad_params, unsigned long long, int, float, int, int, int, int)");
  ASSERT_GE(kernel, 0);
  EXPECT_EQ(trace.events.layer[kernel], Layer::kK);
  EXPECT_EQ(trace.events.correlation[kernel].value(), 65460);
  uint32_t stream = trace.events.thread[kernel].value();
  EXPECT_TRUE(trace.threads.is_device[stream]);
  EXPECT_EQ(trace.threads.os_tid[stream], 7);
  EXPECT_EQ(StringArg(trace, kernel, "grid;block"), "4,8,32;8,32,1");
  EXPECT_EQ(trace.events.layer[Find(trace, "Memcpy HtoD (Pageable -> Device)")], Layer::kMem);
  EXPECT_EQ(trace.events.layer[Find(trace, "Memset (Device)")], Layer::kMem);
}

// tests/fixtures/legacy_profiler/cpu_decode.json, written by Debian's torch 1.13 without
// Kineto: a bare array, "pid": "CPU functions", no categories, whole microseconds.
TEST(KinetoImporterTest, LegacyAutogradProfilerFromDebianTorch) {
  Trace trace;
  const std::string path = base::SourceDir() + "/tests/fixtures/legacy_profiler/cpu_decode.json";
  ASSERT_TRUE(ImportKineto(path, ImportOptions(), &trace).ok());
  EXPECT_EQ(trace.stats.Get("kineto_events_read"), 436);
  EXPECT_EQ(trace.stats.Get("kineto_events_imported"), 436);
  EXPECT_EQ(trace.stats.Get("kineto_event_named_pid"), 436);
  EXPECT_EQ(trace.stats.Get("kineto_event_bad_pid"), 0);
  EXPECT_EQ(trace.stats.Get("kineto_unknown_category"), 0);
  EXPECT_EQ(AccountedEvents(trace.stats), 436);
  ASSERT_EQ(trace.processes.size(), 1u);
  EXPECT_EQ(trace.str(trace.processes.name[0]), "CPU functions");
  EXPECT_EQ(trace.processes.os_pid[0], -2);  // a name, not an OS pid
  ASSERT_EQ(trace.threads.size(), 1u);
  EXPECT_EQ(trace.threads.os_tid[0], 1);
  EXPECT_FALSE(trace.threads.is_device[0]);
  int64_t step = Find(trace, "ProfilerStep#0");
  ASSERT_GE(step, 0);
  EXPECT_EQ(trace.events.layer[step], Layer::kFe);
  EXPECT_EQ(trace.events.phase[step], EventPhase::kComplete);
  EXPECT_EQ(trace.events.start_ns[step], 293000);  // relative to the profiler's start
  EXPECT_EQ(trace.events.dur_ns[step], 335000);
  for (int n = 1; n < 8; ++n) EXPECT_GE(Find(trace, "ProfilerStep#" + std::to_string(n)), 0);
  EXPECT_EQ(trace.events.layer[Find(trace, "train")], Layer::kFe);
  EXPECT_EQ(trace.events.layer[Find(trace, "Optimizer.step#SGD.step")], Layer::kFe);
  EXPECT_EQ(trace.events.layer[Find(trace, "aten::addmm")], Layer::kBe);
  EXPECT_EQ(trace.events.layer[Find(trace, "AddmmBackward0")], Layer::kBe);
  EXPECT_EQ(trace.events.layer[Find(trace, "autograd::engine::evaluate_function: AddmmBackward0")],
            Layer::kBe);
}

// Named pids and tids of either writer: each distinct name is a process or thread;
// "CUDA functions" (the legacy profiler before 1.13) holds kernels on the device of
// their tid; an instant on a named pid stays a global mark; a pid that is empty, null
// or an object is still kineto_event_bad_pid.
TEST(KinetoImporterTest, NamedPidsAndTids) {
  const std::string text = R"([
    {"name": "process_name", "ph": "M", "pid": "worker", "args": {"name": "engine worker"}},
    {"name": "ProfilerStep#4", "ph": "X", "ts": 10, "dur": 50, "tid": 1, "pid": "CPU functions", "args": {}},
    {"name": "aten::mm", "ph": "X", "ts": 12, "dur": 8, "tid": 1, "pid": "CPU functions", "args": {}},
    {"name": "aten::mm", "ph": "s", "ts": 12, "tid": 1, "pid": "CPU functions", "id": 0, "cat": "cpu_to_cuda", "args": {}},
    {"name": "gemm_kernel", "ph": "f", "ts": 30, "tid": 0, "pid": "CUDA functions", "id": 0, "cat": "cpu_to_cuda", "args": {}},
    {"name": "gemm_kernel", "ph": "X", "ts": 30, "dur": 5, "tid": 0, "pid": "CUDA functions", "args": {}},
    {"name": "nccl:all_reduce", "ph": "X", "ts": 40, "dur": 5, "tid": 1, "pid": "CPU functions", "args": {}},
    {"name": "rpc", "ph": "X", "ts": 41, "dur": 2, "tid": " node_id:1, thread_id:7 ", "pid": "CPU functions", "args": {}},
    {"name": "decode", "ph": "X", "cat": "user_annotation", "ts": 70, "dur": 5, "tid": "main", "pid": "worker"},
    {"name": "mark", "ph": "i", "s": "g", "ts": 80, "pid": "Traces", "tid": "Trace 0"},
    {"name": "e1", "ph": "X", "ts": 90, "dur": 1, "tid": 1, "pid": ""},
    {"name": "e2", "ph": "X", "ts": 91, "dur": 1, "tid": 1, "pid": null},
    {"name": "e3", "ph": "X", "ts": 92, "dur": 1, "tid": 1, "pid": {"a": 1}},
    {"name": "e4", "ph": "X", "ts": 93, "dur": 1, "tid": 1}
  ])";
  Trace trace;
  ASSERT_TRUE(ImportText(text, &trace).ok());
  EXPECT_EQ(trace.stats.Get("kineto_events_read"), 14);
  EXPECT_EQ(trace.stats.Get("kineto_events_imported"), 6);
  EXPECT_EQ(trace.stats.Get("kineto_event_named_pid"), 6);
  EXPECT_EQ(trace.stats.Get("kineto_flow_events"), 2);
  EXPECT_EQ(trace.stats.Get("kineto_global_instant_skipped"), 1);
  EXPECT_EQ(trace.stats.Get("kineto_event_bad_pid"), 4);
  EXPECT_EQ(AccountedEvents(trace.stats), 14);
  ASSERT_EQ(trace.processes.size(), 2u);
  EXPECT_EQ(trace.str(trace.processes.name[0]), "CPU functions");
  EXPECT_EQ(trace.str(trace.processes.name[1]), "engine worker");  // metadata wins
  EXPECT_EQ(trace.processes.os_pid[1], -2);  // "worker" was named first, by the metadata
  EXPECT_EQ(trace.processes.os_pid[0], -3);

  int64_t step = Find(trace, "ProfilerStep#4");
  EXPECT_EQ(trace.events.layer[step], Layer::kFe);
  EXPECT_EQ(trace.events.layer[Find(trace, "aten::mm")], Layer::kBe);
  EXPECT_EQ(trace.events.layer[Find(trace, "nccl:all_reduce")], Layer::kComm);
  int64_t kernel = Find(trace, "gemm_kernel");
  ASSERT_GE(kernel, 0);
  EXPECT_EQ(trace.events.layer[kernel], Layer::kK);
  uint32_t device = trace.events.thread[kernel].value();
  EXPECT_TRUE(trace.threads.is_device[device]);
  EXPECT_EQ(trace.threads.device[device], 0);
  EXPECT_EQ(trace.events.process[kernel].value(), 0u);  // the file's first process
  uint32_t remote = trace.events.thread[Find(trace, "rpc")].value();
  EXPECT_NE(remote, trace.events.thread[step].value());
  EXPECT_EQ(trace.str(trace.threads.name[remote]), " node_id:1, thread_id:7 ");
  int64_t decode = Find(trace, "decode");
  EXPECT_EQ(trace.events.process[decode].value(), 1u);
  EXPECT_EQ(trace.str(trace.threads.name[trace.events.thread[decode].value()]), "main");
}

TEST(KinetoImporterTest, RocmNamesInCudaCategories) {
  const std::string text = R"({"traceEvents": [
    {"ph": "X", "cat": "cuda_runtime", "name": "hipGraphLaunch", "pid": 851, "tid": 851, "ts": 1.5, "dur": 2, "args": {"cid": 60, "correlation": 9}},
    {"ph": "X", "cat": "cuda_runtime", "name": "hipExtModuleLaunchKernel", "pid": 851, "tid": 851, "ts": 4, "dur": 2, "args": {"correlation": 10}},
    {"ph": "X", "cat": "cuda_runtime", "name": "hipMemcpyAsync", "pid": 851, "tid": 851, "ts": 7, "dur": 2, "args": {"correlation": 11}},
    {"ph": "X", "cat": "kernel", "name": "Cijk_Alik_Bljk_BBS_BH_MT128x128x64", "pid": 2, "tid": 0, "ts": 10, "dur": 5, "args": {"device": 2, "stream": 0, "correlation": 9, "kind": "Dispatch Kernel"}}
  ]})";
  Trace trace;
  ASSERT_TRUE(ImportText(text, &trace).ok());
  ASSERT_EQ(trace.events.size(), 4u);
  EXPECT_EQ(trace.events.layer[0], Layer::kRt);
  EXPECT_EQ(trace.events.flags[0] & model::kFlagGraphLaunch, model::kFlagGraphLaunch);
  EXPECT_EQ(trace.events.layer[1], Layer::kDrv);
  EXPECT_EQ(trace.events.layer[2], Layer::kRt);
  EXPECT_EQ(trace.events.layer[3], Layer::kK);
  EXPECT_EQ(trace.events.correlation[3].value(), 9);
  EXPECT_EQ(trace.threads.device[trace.events.thread[3].value()], 2);
  EXPECT_EQ(trace.events.start_ns[0], 1500);  // no baseTimeNanoseconds: absolute microseconds
}

TEST(KinetoImporterTest, ExactNanosecondsFromThreeDecimals) {
  // Trace #4 style: relative ts with three decimals over a large base.
  const std::string text = R"({"baseTimeNanoseconds": 1711964646000000000, "traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 4458676522690.655, "dur": 156.777},
    {"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 1669783687464181.999, "dur": 0.001}
  ]})";
  Trace trace;
  ASSERT_TRUE(ImportText(text, &trace).ok());
  ASSERT_EQ(trace.events.size(), 2u);
  EXPECT_EQ(trace.events.start_ns[0], 1711964646000000000 + 4458676522690655);
  EXPECT_EQ(trace.events.dur_ns[0], 156777);
  EXPECT_EQ(trace.events.start_ns[1], 1711964646000000000 + 1669783687464181999);
  EXPECT_EQ(trace.events.dur_ns[1], 1);
}

TEST(KinetoImporterTest, BaseTimeBeforeOrAfterEventsGivesTheSameTimes) {
  std::string after = ReadText(Fixture("small_modern.json"));
  std::string before = after;
  const std::string key = ",\n  \"baseTimeNanoseconds\": 1700000000000000000";
  size_t at = before.find(key);
  ASSERT_NE(at, std::string::npos);
  before.erase(at, key.size());
  before.insert(1, "\"baseTimeNanoseconds\": 1700000000000000000,");
  Trace a, b;
  ASSERT_TRUE(ImportText(after, &a).ok());
  ASSERT_TRUE(ImportText(before, &b).ok());
  ASSERT_EQ(a.events.size(), 20u);
  EXPECT_EQ(a.events.start_ns, b.events.start_ns);
  EXPECT_EQ(a.events.start_ns[0], kBase + 10000);
}

TEST(KinetoImporterTest, ChunkBoundariesDoNotChangeTheResult) {
  std::string text = ReadText(Fixture("small_modern.json"));
  Trace whole;
  ASSERT_TRUE(ImportText(text, &whole).ok());
  for (size_t chunk : {1, 2, 3, 7, 16, 64, 100, 333, 1000}) {
    SCOPED_TRACE(chunk);
    Trace trace;
    ASSERT_TRUE(ImportText(text, &trace, chunk, chunk).ok());
    EXPECT_EQ(trace.events.start_ns, whole.events.start_ns);
    EXPECT_EQ(trace.events.name, whole.events.name);
    EXPECT_EQ(trace.events.correlation, whole.events.correlation);
    EXPECT_EQ(trace.args.size(), whole.args.size());
    EXPECT_EQ(trace.stats.entries().size(), whole.stats.entries().size());
    EXPECT_EQ(AccountedEvents(trace.stats), 36);
  }
}

TEST(KinetoImporterTest, BatchCutInsideAStringFallsBackToExactSplitting) {
  // Names that look like element ends ("}, {" and "},") inside strings.
  std::string text = R"({"traceEvents": [)";
  for (int i = 0; i < 50; ++i) {
    if (i) text += ",";
    text +=
        R"({"ph": "X", "cat": "cpu_op", "name": "x}, {\"y\": [1]},\n]", "pid": 1, "tid": 1, "ts": )" +
        std::to_string(i) + R"(, "dur": 1, "args": {"External id": )" + std::to_string(i) + "}}";
  }
  text += "]}";
  for (size_t chunk : {5, 17, 40, 97, 256, 100000}) {
    SCOPED_TRACE(chunk);
    Trace trace;
    ASSERT_TRUE(ImportText(text, &trace, chunk, chunk).ok());
    ASSERT_EQ(trace.events.size(), 50u);
    for (int i = 0; i < 50; ++i) EXPECT_EQ(trace.events.id[i].value(), i);
    EXPECT_EQ(trace.str(trace.events.name[0]), "x}, {\"y\": [1]},\n]");
  }
}

TEST(KinetoImporterTest, MalformedEventIsCountedAndTheRestImports) {
  const std::string text = R"({"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "ok1", "pid": 1, "tid": 1, "ts": 1, "dur": 1},
    {"ph": "X", "cat": "cpu_op", "name": "bad", "pid": 1, "tid": 1, "ts": 1, "dur": 1 "oops": 2},
    42,
    {"ph": "X", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 3, "dur": 1},
    {"ph": "Z", "name": "z", "pid": 1, "tid": 1, "ts": 3},
    {"ph": "X", "cat": "cpu_op", "name": "neg", "pid": 1, "tid": 1, "ts": 4, "dur": -2},
    {"ph": "X", "cat": "cpu_op", "name": "ok2", "pid": 1, "tid": 1, "ts": 5, "dur": 1}
  ]})";
  Trace trace;
  ASSERT_TRUE(ImportText(text, &trace).ok());
  EXPECT_EQ(trace.stats.Get("kineto_event_malformed"), 1);
  EXPECT_EQ(trace.stats.Get("kineto_event_not_object"), 1);
  EXPECT_EQ(trace.stats.Get("kineto_event_missing_name"), 1);
  EXPECT_EQ(trace.stats.Get("kineto_event_unknown_phase"), 1);
  EXPECT_EQ(trace.stats.Get("kineto_event_negative_dur"), 1);
  ASSERT_EQ(trace.events.size(), 3u);
  EXPECT_EQ(trace.str(trace.events.name[2]), "ok2");
  EXPECT_EQ(trace.events.dur_ns[1], 0);
  EXPECT_EQ(AccountedEvents(trace.stats), 7);
}

TEST(KinetoImporterTest, NotAChromeTraceIsAnError) {
  Trace trace;
  base::Status status = ImportText("hello world", &trace);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("memory.json: byte 0"), std::string::npos) << status.message();
  status = ImportText(R"({"schemaVersion": 1})", &trace);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("no traceEvents"), std::string::npos) << status.message();
  status = ImportKineto("/nonexistent/trace.json", ImportOptions(), &trace);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("/nonexistent/trace.json"), std::string::npos);
}

TEST(KinetoImporterTest, BareArrayWithoutClosingBracketIsComplete) {
  std::string text = ReadText(Fixture("legacy_2021.json"));
  text.erase(text.rfind(']'));
  Trace trace;
  ASSERT_TRUE(ImportText(text, &trace, 50, 50).ok());
  EXPECT_EQ(trace.events.size(), 6u);
  EXPECT_EQ(trace.stats.Get("kineto_truncated_file"), 0);
}

TEST(KinetoImporterTest, TruncatedJsonKeepsCompleteEvents) {
  std::string text = ReadText(Fixture("small_modern.json"));
  size_t cut = text.find("\"ph\": \"X\", \"cat\": \"gpu_memset\"");
  ASSERT_NE(cut, std::string::npos);
  Trace trace;
  ASSERT_TRUE(ImportText(text.substr(0, cut + 10), &trace).ok());
  EXPECT_EQ(trace.stats.Get("kineto_truncated_file"), 1);
  EXPECT_EQ(trace.stats.entries().at("kineto_truncated_file").severity,
            model::StatSeverity::kDataLoss);
  // The 18 elements before the memset, of which 11 are events (no base time: raw ts).
  EXPECT_EQ(trace.stats.Get("kineto_events_read"), 18);
  EXPECT_EQ(trace.events.size(), 11u);
  EXPECT_EQ(trace.events.start_ns[0], 10000);
  bool noted = false;
  for (const std::string& note : trace.meta.notes)
    noted |= note.find("truncated") != std::string::npos;
  EXPECT_TRUE(noted);
}

TEST(KinetoImporterTest, RandomTruncationsNeverCrashOrInvent) {
  std::string text = ReadText(Fixture("small_modern.json"));
  Trace whole;
  ASSERT_TRUE(ImportText(text, &whole).ok());
  std::mt19937 random(12345);
  for (int round = 0; round < 300; ++round) {
    size_t cut = random() % text.size();
    size_t chunk = 1 + random() % 300;
    Trace trace;
    base::Status status = ImportText(text.substr(0, cut), &trace, chunk, chunk);
    if (!status.ok()) {
      // Only a cut before the events begin may fail, and it says where.
      EXPECT_LT(cut, text.find("traceEvents") + 20) << status.message();
      // The byte it names lies inside the file.
      const std::string& message = status.message();
      const size_t at = message.find("truncated at byte ");
      if (at != std::string::npos) {
        EXPECT_LE(std::stoull(message.substr(at + 18)), cut) << message;
      }
      continue;
    }
    EXPECT_LE(trace.events.size(), whole.events.size());
    EXPECT_LE(trace.stats.Get("kineto_events_read"), 36);
    EXPECT_EQ(trace.stats.Get("kineto_truncated_file"), 1) << cut;
    // What was imported is a prefix of the whole (times are raw without the base).
    for (size_t i = 0; i < trace.events.size(); ++i) {
      ASSERT_EQ(trace.events.name[i], whole.events.name[i]) << cut;
    }
  }
}

std::string WriteGzip(const std::string& text, const std::string& path) {
  gzFile file = gzopen(path.c_str(), "wb");
  gzwrite(file, text.data(), static_cast<unsigned>(text.size()));
  gzclose(file);
  return path;
}

TEST(KinetoImporterTest, GzipAndTruncatedGzip) {
  std::string dir = base::TempDir("kineto_gzip");
  std::string text = ReadText(Fixture("small_modern.json"));
  std::string gz = WriteGzip(text, dir + "/trace.json.gz");
  Trace trace;
  ASSERT_TRUE(ImportKineto(gz, ImportOptions(), &trace).ok());
  EXPECT_EQ(trace.events.size(), 20u);
  EXPECT_EQ(trace.stats.Get("kineto_truncated_file"), 0);

  std::string bytes = ReadText(gz);
  std::string cut_path = dir + "/cut.json.gz";
  {
    std::ofstream out(cut_path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size() * 2 / 3));
  }
  Trace cut;
  base::Status status = ImportKineto(cut_path, ImportOptions(), &cut);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(cut.stats.Get("kineto_truncated_file"), 1);
  EXPECT_LT(cut.events.size(), 20u);
  EXPECT_GT(cut.events.size(), 0u);
}

TEST(KinetoImporterTest, ScannerFindsValueEnds) {
  auto end_of = [](std::string_view text) {
    const char* end = FindJsonValueEnd(text.data(), text.data() + text.size());
    return end ? static_cast<int64_t>(end - text.data()) : -1;
  };
  EXPECT_EQ(end_of(R"({"a": "}\"}"}, x)"), 13);
  EXPECT_EQ(end_of(R"([1, [2], {"b": "\\"}], y)"), 21);
  EXPECT_EQ(end_of(R"("ab\\", z)"), 6);
  EXPECT_EQ(end_of("123, "), 3);
  EXPECT_EQ(end_of(R"({"a": "unterminated)"), -1);
  EXPECT_EQ(end_of(R"({"a": [1, 2)"), -1);
}

// Real traces: counts must match ../shared/real-traces/MANIFEST.md.
struct ManifestRow {
  std::string file;
  int64_t events = 0;
  int64_t kernels = 0;
  int64_t nccl_kernels = 0;
};

int64_t ParseCount(std::string text) {
  text.erase(std::remove(text.begin(), text.end(), ','), text.end());
  text.erase(std::remove(text.begin(), text.end(), ' '), text.end());
  return std::atoll(text.c_str());
}

std::vector<ManifestRow> ReadManifest(const std::string& dir) {
  std::vector<ManifestRow> rows;
  std::ifstream in(dir + "/MANIFEST.md");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("| ", 0) != 0 || line.find(".json.gz") == std::string::npos) continue;
    std::vector<std::string> cells;
    std::stringstream stream(line);
    std::string cell;
    while (std::getline(stream, cell, '|')) cells.push_back(cell);
    // "", #, file, format, size, events, kernels, nccl, gpu, ranks
    if (cells.size() < 8) continue;
    ManifestRow row;
    row.file = cells[2];
    row.file.erase(std::remove(row.file.begin(), row.file.end(), ' '), row.file.end());
    row.events = ParseCount(cells[5]);
    row.kernels = ParseCount(cells[6]);
    row.nccl_kernels = ParseCount(cells[7]);
    rows.push_back(row);
  }
  return rows;
}

TEST(KinetoImporterTest, RealTracesMatchTheManifest) {
  std::string dir = base::RealTracesDir();
  if (dir.empty()) GTEST_SKIP() << "no ../shared/real-traces";
  std::vector<ManifestRow> rows = ReadManifest(dir);
  ASSERT_EQ(rows.size(), 11u);
  for (const ManifestRow& row : rows) {
    SCOPED_TRACE(row.file);
    Trace trace;
    base::Status status = ImportKineto(dir + "/" + row.file, ImportOptions(), &trace);
    ASSERT_TRUE(status.ok()) << status.message();
    EXPECT_EQ(trace.stats.Get("kineto_events_read"), row.events);
    EXPECT_EQ(AccountedEvents(trace.stats), row.events);
    int64_t kernels = 0, nccl = 0;
    for (size_t i = 0; i < trace.events.size(); ++i) {
      Layer layer = trace.events.layer[i];
      if (!trace.threads.is_device[trace.events.thread[i].value()]) continue;
      if (layer != Layer::kK && layer != Layer::kComm) continue;
      ++kernels;
      std::string_view name = trace.str(trace.events.name[i]);
      if (name.find("nccl") != std::string_view::npos ||
          name.find("all_reduce") != std::string_view::npos) {
        ++nccl;
      }
    }
    EXPECT_EQ(kernels, row.kernels);
    EXPECT_EQ(nccl, row.nccl_kernels);
    // No event was lost to an error in these files, and none is truncated.
    for (const auto& [name, entry] : trace.stats.entries()) {
      if (name.rfind("kineto_", 0) == 0) {
        EXPECT_NE(entry.severity, model::StatSeverity::kDataLoss) << name;
      }
    }
    EXPECT_EQ(trace.stats.Get("kineto_event_malformed"), 0);
    // Every kernel from the modern schema has a correlation.
    for (size_t i = 0; i < trace.events.size(); ++i) {
      if (trace.events.layer[i] == Layer::kK) {
        ASSERT_TRUE(trace.events.correlation[i].valid()) << trace.str(trace.events.name[i]);
      }
    }
  }
}

TEST(KinetoImporterTest, TwoRankFilesIntoOneTrace) {
  std::string dir = base::RealTracesDir();
  if (dir.empty()) GTEST_SKIP() << "no ../shared/real-traces";
  Trace trace;
  ASSERT_TRUE(
      ImportKineto(dir + "/hta__sampled_128rank_rank0.json.gz", ImportOptions(), &trace).ok());
  size_t first = trace.processes.size();
  ASSERT_TRUE(
      ImportKineto(dir + "/hta__sampled_128rank_rank1.json.gz", ImportOptions(), &trace).ok());
  ASSERT_EQ(first, 1u);
  ASSERT_EQ(trace.processes.size(), 2u);
  EXPECT_EQ(trace.processes.rank[0], 0);
  EXPECT_EQ(trace.processes.rank[1], 1);
  EXPECT_NE(trace.processes.source[0], trace.processes.source[1]);
  // Device tracks belong to the process of their own file.
  for (size_t i = 0; i < trace.threads.size(); ++i) {
    if (trace.threads.is_device[i]) {
      EXPECT_LT(trace.threads.process[i].value(), 2u);
    }
  }
  EXPECT_EQ(trace.stats.Get("kineto_events_read"), 4855 + 4720);
  EXPECT_EQ(trace.meta.sources.size(), 2u);
}

TEST(KinetoImporterTest, RealCollectiveMetadata) {
  std::string dir = base::RealTracesDir();
  if (dir.empty()) GTEST_SKIP() << "no ../shared/real-traces";
  Trace trace;
  ASSERT_TRUE(
      ImportKineto(dir + "/hta__a100_2rank_nccl_rank0.json.gz", ImportOptions(), &trace).ok());
  // 27 record_param_comms ops and 21 kernels carry "Collective name".
  EXPECT_EQ(trace.collectives.size(), 48u);
  ASSERT_GT(trace.collectives.size(), 0u);
  EXPECT_EQ(trace.str(trace.collectives.op[0]), "allreduce");
  EXPECT_EQ(trace.str(trace.collectives.communicator[0]), "0");
  EXPECT_EQ(trace.collectives.group_size[0], 2);
  EXPECT_EQ(trace.collectives.group_rank[0], 0);
  EXPECT_EQ(trace.collectives.size_bytes[0], 2049000 * 4);
  EXPECT_EQ(trace.processes.rank[0], 0);
  // ts 4458676522690.655 us after baseTimeNanoseconds 1711964646000000000.
  EXPECT_EQ(trace.events.start_ns[0], 1711964646000000000 + 4458676522690655);
}

}  // namespace
}  // namespace teller::import

namespace teller::import {
namespace {

// Found by tests/fuzz/kineto_fuzzer (a timeout): a stray '}' between events made the
// scanner hand out an empty element without moving on, forever.
TEST(KinetoImporterTest, StrayClosingBraceIsOneMalformedElementNotAStall) {
  std::string text =
      ReadText(base::SourceDir() + "/tests/fixtures/fuzz/kineto_fuzzer/stray_closing_brace.json");
  ASSERT_FALSE(text.empty());
  for (size_t chunk : {size_t{1} << 20, size_t{1}, size_t{7}, size_t{64}}) {
    SCOPED_TRACE(chunk);
    Trace trace;
    ASSERT_TRUE(ImportText(text, &trace, chunk, chunk).ok());
    ASSERT_EQ(trace.events.size(), 2u);
    EXPECT_EQ(trace.str(trace.events.name[1]), "b");
    EXPECT_EQ(trace.stats.Get("kineto_events_read"), 3);
    EXPECT_EQ(AccountedEvents(trace.stats), 3);
  }
}

// Found by tests/fuzz/kineto_fuzzer (whole and chunked imports disagreed): "[1, 2}}"
// closes an array with '}'. The batch parser (simdjson on demand) then skips the next
// event as part of the broken one, the exact splitter does not. Whatever the chunking,
// the import must go on and count every element it read.
TEST(KinetoImporterTest, MismatchedBracketsNeverStopTheImport) {
  for (const char* name : {"mismatched_brackets.json", "array_closed_by_brace.json"}) {
    std::string text = ReadText(base::SourceDir() + "/tests/fixtures/fuzz/kineto_fuzzer/" + name);
    ASSERT_FALSE(text.empty());
    for (size_t chunk : {size_t{1} << 20, size_t{1}, size_t{7}, size_t{64}}) {
      SCOPED_TRACE(std::string(name) + " chunk " + std::to_string(chunk));
      Trace trace;
      ASSERT_TRUE(ImportText(text, &trace, chunk, chunk).ok());
      EXPECT_EQ(AccountedEvents(trace.stats), trace.stats.Get("kineto_events_read"));
      if (name == std::string("mismatched_brackets.json")) {
        EXPECT_GE(Find(trace, "gemm"), 0);
        EXPECT_GE(Find(trace, "after"), 0);
      }
    }
  }
}

// The fuzz finding of docs/fuzzing.md: brackets are matched by kind, so the event
// after '[1, 2}}' is its own element, in one chunk (the batch path) or in small ones.
TEST(KinetoImporterTest, MismatchedBracketsLoseNoEventSilently) {
  std::string text =
      ReadText(base::SourceDir() + "/tests/fixtures/fuzz/kineto_fuzzer/mismatched_brackets.json");
  for (size_t chunk : {size_t{1} << 20, size_t{1}, size_t{13}}) {
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    Trace trace;
    ASSERT_TRUE(ImportText(text, &trace, chunk, chunk).ok());
    EXPECT_GE(Find(trace, "gemm"), 0);
    EXPECT_GE(Find(trace, "Memcpy HtoD"), 0);
    EXPECT_GE(Find(trace, "after"), 0);
    EXPECT_EQ(trace.stats.Get("kineto_event_brackets_mismatched"), 1);
    // The stray '}' left after the memcpy is one element that is not an object.
    EXPECT_EQ(trace.stats.Get("kineto_event_not_object"), 1);
    EXPECT_EQ(AccountedEvents(trace.stats), trace.stats.Get("kineto_events_read"));
  }
}

TEST(KinetoImporterTest, FindJsonValueEndMatchesBracketsByKind) {
  auto end_of = [](std::string_view text, bool* mismatched) {
    const char* end = FindJsonValueEnd(text.data(), text.data() + text.size(), mismatched);
    return end ? static_cast<int64_t>(end - text.data()) : -1;
  };
  bool mismatched = false;
  EXPECT_EQ(end_of(R"({"a": [1, {"b": "]}"}], "c": 2} tail)", &mismatched), 31);
  EXPECT_FALSE(mismatched);
  // '}' closes the array and the object holding it.
  EXPECT_EQ(end_of(R"({"a": {"g": [1, 2}}, {"x": 1})", &mismatched), 19);
  EXPECT_TRUE(mismatched);
  // A ']' with no '[' open is skipped.
  mismatched = false;
  EXPECT_EQ(end_of(R"({"a": 1]} x)", &mismatched), 9);
  EXPECT_TRUE(mismatched);
  // Unfinished values have no end.
  EXPECT_EQ(end_of(R"({"a": [1, 2)", nullptr), -1);
  EXPECT_EQ(end_of(R"({"a": "}])", nullptr), -1);
}

}  // namespace
}  // namespace teller::import
