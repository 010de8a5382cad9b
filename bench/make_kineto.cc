// Writes a synthetic Kineto chrome-trace JSON of a given size in the layout
// PyTorch's profiler writes (pretty-printed objects, schemaVersion 1,
// deviceProperties, distributedInfo, baseTimeNanoseconds), with the category mix
// of a serving step: python_function frames, cpu_op / aten ops, cuda_runtime
// launches, kernels on a stream with correlation ids, ac2g flows.
// Usage: make_kineto OUT.json TARGET_MEGABYTES [SEED]
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

uint64_t g_state = 0x9e3779b97f4a7c15ull;
uint64_t Next() {
  uint64_t z = (g_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

const char* kOps[] = {"aten::linear", "aten::mm",       "aten::add",   "aten::mul",
                      "aten::silu",   "aten::_softmax", "aten::copy_", "aten::index_select"};
const char* kKernels[] = {
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_"
    "segment_k_off_kernel__5x_cublas",
    "void flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, "
    "cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 4, cutlass::bfloat16_t> >, false, "
    "false, false, false, true, true, false, false>(Flash_fwd_params)",
    "void vllm::rms_norm_kernel<c10::BFloat16, 8, 4>(c10::BFloat16*, c10::BFloat16 const*, "
    "long, c10::BFloat16 const*, float, int, int)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
    "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, "
    "1> >)",
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: make_kineto OUT.json TARGET_MEGABYTES [SEED]\n");
    return 2;
  }
  FILE* out = std::fopen(argv[1], "wb");
  if (!out) {
    std::perror(argv[1]);
    return 1;
  }
  uint64_t target = std::strtoull(argv[2], nullptr, 10) << 20;
  if (argc > 3) g_state = std::strtoull(argv[3], nullptr, 10);
  std::fprintf(out,
               "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [\n    {\n      \"id\": 0, "
               "\"name\": \"NVIDIA H200\", \"totalGlobalMem\": 150754820096,\n      "
               "\"computeMajor\": 9, \"computeMinor\": 0, \"numSms\": 132\n    }\n  ],\n  "
               "\"distributedInfo\": {\"backend\": \"nccl\", \"rank\": 0, \"world_size\": 2},\n"
               "  \"traceEvents\": [\n");
  const int64_t pid = 4242, tid = 4242;
  int64_t ts_ns = 1000000;  // relative to baseTimeNanoseconds
  uint64_t id = 1, written = 0, events = 0;
  bool first = true;
  auto micros = [](int64_t ns) {
    return std::to_string(ns / 1000) + "." + std::to_string(1000 + ns % 1000).substr(1);
  };
  std::string buffer;
  while (written < target) {
    buffer.clear();
    int64_t step_start = ts_ns;
    for (int op = 0; op < 64; ++op) {
      uint64_t r = Next();
      const char* op_name = kOps[r % 8];
      const char* kernel = kKernels[(r >> 8) % 5];
      int64_t op_dur = 8000 + static_cast<int64_t>(r >> 40) % 20000;
      int64_t launch = ts_ns + 2000, launch_dur = 3000 + static_cast<int64_t>(r >> 50) % 4000;
      int64_t kstart = launch + 5000 + static_cast<int64_t>(r >> 20) % 9000;
      int64_t kdur = 2000 + static_cast<int64_t>(r >> 30) % 90000;
      uint64_t corr = id++;
      char text[4096];
      int n = std::snprintf(
          text, sizeof(text),
          "%s  {\n    \"ph\": \"X\", \"cat\": \"python_function\", \"name\": "
          "\"vllm/model_executor/layers/linear.py(%d): forward\", \"pid\": %ld, \"tid\": %ld,\n"
          "    \"ts\": %s, \"dur\": %s,\n    \"args\": {\n      \"Python parent id\": %lu, "
          "\"Python id\": %lu, \"Ev Idx\": %lu\n    }\n  },\n"
          "  {\n    \"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"%s\", \"pid\": %ld, \"tid\": "
          "%ld,\n    \"ts\": %s, \"dur\": %s,\n    \"args\": {\n      \"External id\": %lu,"
          "\"Record function id\": 0, \"Ev Idx\": %lu\n    }\n  },\n"
          "  {\n    \"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", "
          "\"pid\": %ld, \"tid\": %ld,\n    \"ts\": %s, \"dur\": %s,\n    \"args\": {\n      "
          "\"External id\": %lu, \"cbid\": 211, \"correlation\": %lu\n    }\n  },\n"
          "  {\n    \"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"%s\", \"pid\": 0, \"tid\": 7,\n"
          "    \"ts\": %s, \"dur\": %s,\n    \"args\": {\n      \"External id\": %lu,\n      "
          "\"queued\": 0, \"device\": 0, \"context\": 1,\n      \"stream\": 7, \"correlation\": "
          "%lu,\n      \"registers per thread\": 128,\n      \"shared memory\": 49152,\n      "
          "\"blocks per SM\": 1.5,\n      \"warps per SM\": 6,\n      \"grid\": [132, 1, 1],\n  "
          "    \"block\": [128, 1, 1],\n      \"est. achieved occupancy %%\": 9\n    }\n  },\n"
          "  {\n    \"ph\": \"s\", \"id\": %lu, \"pid\": %ld, \"tid\": %ld, \"ts\": %s,\n    "
          "\"cat\": \"ac2g\", \"name\": \"ac2g\"\n  },\n"
          "  {\n    \"ph\": \"f\", \"id\": %lu, \"pid\": 0, \"tid\": 7, \"ts\": %s,\n    \"cat\": "
          "\"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"\n  }",
          first ? "" : ",\n", 100 + op, pid, tid, micros(ts_ns).c_str(), micros(op_dur).c_str(),
          corr, corr, corr, op_name, pid, tid, micros(ts_ns + 500).c_str(),
          micros(op_dur - 1000).c_str(), corr, corr, pid, tid, micros(launch).c_str(),
          micros(launch_dur).c_str(), corr, corr, kernel, micros(kstart).c_str(),
          micros(kdur).c_str(), corr, corr, corr, pid, tid, micros(launch).c_str(), corr,
          micros(kstart).c_str());
      buffer.append(text, static_cast<size_t>(n));
      first = false;
      events += 6;
      ts_ns += op_dur + 1000;
    }
    char step[512];
    int n = std::snprintf(step, sizeof(step),
                          ",\n  {\n    \"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": "
                          "\"ProfilerStep#%lu\", \"pid\": %ld, \"tid\": %ld,\n    \"ts\": %s, "
                          "\"dur\": %s,\n    \"args\": {\n      \"External id\": %lu\n    }\n  }",
                          id, pid, tid, micros(step_start).c_str(),
                          micros(ts_ns - step_start).c_str(), id);
    ++id;
    buffer.append(step, static_cast<size_t>(n));
    ++events;
    std::fwrite(buffer.data(), 1, buffer.size(), out);
    written += buffer.size();
  }
  std::fprintf(out,
               "\n  ],\n  \"traceName\": \"synthetic\",\n  \"baseTimeNanoseconds\": "
               "1700000000000000000\n}\n");
  std::fclose(out);
  std::fprintf(stderr, "make_kineto: %lu events, %.1f MB\n", events, written / 1048576.0);
  return 0;
}
