#include "wire/example_bundle.h"

#include <array>

#include "wire/bundle_writer.h"

namespace teller::wire {
namespace {

constexpr int64_t kMs = 1000000;

// One rank's host clocks: node1's monotonic clock runs 1 ppm fast and its CUPTI
// clock 1 ppm slow against realtime, so the importer has drift to correct.
struct RankClocks {
  std::string host;
  int64_t pid;
  int32_t rank;
  int64_t monotonic_base_ns;
  int64_t gpu_base_ns;
  int64_t monotonic_ppm;  // drift of the monotonic clock against realtime
  int64_t gpu_ppm;

  int64_t Monotonic(int64_t offset_ns) const {
    return monotonic_base_ns + offset_ns + offset_ns / 1000000 * monotonic_ppm;
  }
  int64_t Gpu(int64_t offset_ns) const {
    return gpu_base_ns + offset_ns + offset_ns / 1000000 * gpu_ppm;
  }
  std::vector<ClockPair> Pairs() const {
    std::vector<ClockPair> pairs;
    for (int64_t offset : {int64_t{0}, 500 * kMs, 1000 * kMs}) {
      pairs.push_back({kExampleRealtimeBaseNs + offset, Monotonic(offset), Gpu(offset)});
    }
    return pairs;
  }
};

base::Status WriteRank(BundleWriter* bundle, const RankClocks& c, ExampleRanks ranks) {
  const bool said = ranks == ExampleRanks::kSaid;
  ProcessInfoRecord info;
  info.pid = c.pid;
  info.rank = said ? c.rank : -1;
  info.local_rank = said ? 0 : -1;
  info.world_size = said ? 2 : -1;
  info.device = 0;
  info.host = c.host;
  info.name = "python3";
  info.command = "python3 -m vllm.entrypoints.openai.api_server --tensor-parallel-size 2";
  TELLER_ASSIGN_OR_RETURN(ProcessWriter * w, bundle->OpenProcess(info));
  const int64_t tid = c.pid;
  TELLER_RETURN_IF_ERROR(w->Append(ThreadInfoRecord{tid, "MainThread"}));

  // Engine step 7: decode of two requests, from the Python hook (monotonic clock).
  std::array<std::string_view, 2> requests = {"cmpl-a1", "cmpl-b2"};
  std::array<Arg, 3> step_args = {Arg::Int(kStepArgStep, 7), Arg::String(kStepArgPhase, "decode"),
                                  Arg::StringList(kStepArgRequests, requests)};
  HostRangeRecord step;
  step.clock = ClockDomain::kMonotonic;
  step.tid = tid;
  step.start_ns = c.Monotonic(100 * kMs);
  step.end_ns = c.Monotonic(130 * kMs);
  step.range_id = 1;
  step.layer = RangeLayer::kStep;
  step.name = "execute_model";
  step.args = step_args;
  TELLER_RETURN_IF_ERROR(w->Append(step));

  HostRangeRecord forward;
  forward.clock = ClockDomain::kMonotonic;
  forward.tid = tid;
  forward.start_ns = c.Monotonic(101 * kMs);
  forward.end_ns = c.Monotonic(128 * kMs);
  forward.range_id = 2;
  forward.layer = RangeLayer::kFe;
  forward.name = "LlamaForCausalLM.forward";
  TELLER_RETURN_IF_ERROR(w->Append(forward));

  // NVTX ranges around the backend op (monotonic clock).
  TELLER_RETURN_IF_ERROR(w->Append(RangePushRecord{
      ClockDomain::kMonotonic, tid, c.Monotonic(102 * kMs), RangeLayer::kBe, "torch", "aten::mm"}));
  // CUPTI runtime calls and device work (GPU clock).
  ApiCallRecord launch;
  launch.tid = tid;
  launch.start_ns = c.Gpu(102 * kMs + 100000);
  launch.end_ns = c.Gpu(102 * kMs + 108000);
  launch.correlation = 11;
  launch.cbid = 211;
  launch.name = "cudaLaunchKernel";
  TELLER_RETURN_IF_ERROR(w->Append(launch));
  TELLER_RETURN_IF_ERROR(w->Append(ExternalCorrelationRecord{ExternalKind::kCustom0, 501, 11}));
  TELLER_RETURN_IF_ERROR(
      w->Append(RangePopRecord{ClockDomain::kMonotonic, tid, c.Monotonic(104 * kMs), "torch"}));

  KernelRecord gemm;
  gemm.start_ns = c.Gpu(103 * kMs);
  gemm.end_ns = c.Gpu(105 * kMs);
  gemm.device = 0;
  gemm.context = 1;
  gemm.stream = 7;
  gemm.correlation = 11;
  gemm.grid = {128, 1, 1};
  gemm.block = {256, 1, 1};
  gemm.registers_per_thread = 128;
  gemm.name = "ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_nn";
  TELLER_RETURN_IF_ERROR(w->Append(gemm));

  ApiCallRecord copy_call = launch;
  copy_call.start_ns = c.Gpu(106 * kMs);
  copy_call.end_ns = c.Gpu(106 * kMs + 20000);
  copy_call.correlation = 12;
  copy_call.cbid = 41;
  copy_call.name = "cudaMemcpyAsync";
  TELLER_RETURN_IF_ERROR(w->Append(copy_call));
  MemcpyRecord copy;
  copy.start_ns = c.Gpu(106 * kMs + 50000);
  copy.end_ns = c.Gpu(106 * kMs + 90000);
  copy.device = 0;
  copy.context = 1;
  copy.stream = 7;
  copy.correlation = 12;
  copy.size_bytes = 4096;
  copy.copy_kind = CopyKind::kHtoD;
  TELLER_RETURN_IF_ERROR(w->Append(copy));

  // The tensor-parallel all-reduce: NCCL kernel plus its collective record.
  ApiCallRecord nccl_launch = launch;
  nccl_launch.start_ns = c.Gpu(110 * kMs);
  nccl_launch.end_ns = c.Gpu(110 * kMs + 9000);
  nccl_launch.correlation = 13;
  TELLER_RETURN_IF_ERROR(w->Append(nccl_launch));
  KernelRecord nccl;
  nccl.start_ns = c.Gpu(111 * kMs);
  nccl.end_ns = c.Gpu(115 * kMs + 250000 * c.rank);
  nccl.device = 0;
  nccl.context = 1;
  nccl.stream = 13;
  nccl.correlation = 13;
  nccl.grid = {2, 1, 1};
  nccl.block = {512, 1, 1};
  nccl.name = "ncclDevKernel_AllReduce_Sum_f16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)";
  TELLER_RETURN_IF_ERROR(w->Append(nccl));
  CollectiveRecord all_reduce;
  all_reduce.communicator = "0x7f3a5e1c00000001";
  all_reduce.sequence = 42;
  all_reduce.op = "all_reduce";
  all_reduce.size_bytes = 8192;
  all_reduce.dtype = "float16";
  all_reduce.group_size = 2;
  all_reduce.group_rank = c.rank;
  all_reduce.correlation = 13;
  TELLER_RETURN_IF_ERROR(w->Append(all_reduce));

  SyncRecord sync;
  sync.tid = tid;
  sync.start_ns = c.Gpu(116 * kMs);
  sync.end_ns = c.Gpu(117 * kMs);
  sync.type = SyncType::kStreamSynchronize;
  sync.device = 0;
  sync.context = 1;
  sync.stream = 7;
  sync.correlation = 14;
  TELLER_RETURN_IF_ERROR(w->Append(sync));
  TELLER_RETURN_IF_ERROR(w->Append(
      MarkRecord{ClockDomain::kMonotonic, tid, c.Monotonic(129 * kMs), "vllm", "sampled"}));
  return w->Close();
}

}  // namespace

base::Status WriteExampleBundle(const std::string& directory, ExampleRanks ranks) {
  const bool said = ranks == ExampleRanks::kSaid;
  RankClocks node0{"node0", 1001, 0, kExampleMonotonicBaseNs, kExampleGpuBaseNs, 0, 0};
  RankClocks node1{"node1", 2002, 1, 7000000000, kExampleGpuBaseNs + 250000, 1, -1};

  BundleMeta meta;
  meta.tool_version = "0.1.0";
  meta.host = node0.host;
  meta.command = {"teller", "sim", "--example", said ? "two_ranks" : "two_unranked"};
  meta.start_time_ns = kExampleRealtimeBaseNs;
  meta.clock_pairs = node0.Pairs();
  meta.hosts.push_back({node1.host, node1.Pairs()});
  if (said) meta.ranks = {{0, 0, node0.host, node0.pid, 0}, {1, 0, node1.host, node1.pid, 0}};
  meta.devices = {
      {node0.host, 0, "NVIDIA H100 80GB HBM3", "GPU-00000000-0000-0000-0000-000000000000"},
      {node1.host, 0, "NVIDIA H100 80GB HBM3", "GPU-11111111-1111-1111-1111-111111111111"}};
  meta.capture = {{"cupti_activity", true, ""},
                  {"nvtx", true, ""},
                  {"python_hooks", true, ""},
                  {"nccl_profiler", false, "synthetic example: collectives come from the sim"}};
  meta.notes = {said ? "synthetic example written by teller::wire::WriteExampleBundle"
                     : "synthetic example written by teller::wire::WriteExampleBundle, "
                       "launched without ranks"};

  WriterOptions options;
  options.chunk_bytes = 512;  // several chunks per file, so crash tests have something to cut
  TELLER_ASSIGN_OR_RETURN(std::unique_ptr<BundleWriter> bundle,
                          BundleWriter::Create(directory, std::move(meta), options));
  TELLER_RETURN_IF_ERROR(WriteRank(bundle.get(), node0, ranks));
  TELLER_RETURN_IF_ERROR(WriteRank(bundle.get(), node1, ranks));

  TELLER_ASSIGN_OR_RETURN(LogWriter * log, bundle->OpenLog("stdout"));
  const int64_t t = kExampleRealtimeBaseNs;
  TELLER_RETURN_IF_ERROR(
      log->Append({t + 99 * kMs, ClockDomain::kRealtime, node0.pid, "stdout",
                   "INFO 11-14 22:13:20 engine.py:267] Added request cmpl-a1.", 0, "", "", 0}));
  TELLER_RETURN_IF_ERROR(
      log->Append({t + 99 * kMs + 500, ClockDomain::kRealtime, node0.pid, "stdout",
                   "INFO 11-14 22:13:20 engine.py:267] Added request cmpl-b2.", 0, "", "", 0}));
  TELLER_RETURN_IF_ERROR(
      log->Append({t + 112 * kMs, ClockDomain::kRealtime, node1.pid, "stderr",
                   "node1:2002:2002 [0] NCCL INFO comm 0x7f3a5e1c00000001 rank 1 "
                   "nRanks 2 - Init COMPLETE",
                   said ? 1 : -1, "node1", "", 0}));
  TELLER_RETURN_IF_ERROR(log->Append({t + 131 * kMs, ClockDomain::kRealtime, node0.pid, "stdout",
                                      "INFO 11-14 22:13:20 metrics.py:341] Avg generation "
                                      "throughput: 66.7 tokens/s, \"quoted\" \t tab",
                                      0, "", "vllm_server.log", 1234}));
  TELLER_RETURN_IF_ERROR(
      bundle->WriteLabels("{\"fault\": null, \"requests\": {\"cmpl-a1\": {\"is_anomaly\": false}, "
                          "\"cmpl-b2\": {\"is_anomaly\": false}}}\n"));
  return bundle->Close();
}

}  // namespace teller::wire
