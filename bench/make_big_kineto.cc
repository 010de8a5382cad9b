// Writes a Kineto (PyTorch profiler) chrome-trace JSON of a given size, streaming to
// disk in constant memory, for the bounded-memory check of issue 8 (scripts/big_inputs.sh).
// The shape follows the real vLLM trace of ../shared/real-traces (manifest #1): the
// same top-level keys (schemaVersion, deviceProperties, cupti/cuda versions,
// distributedInfo, traceEvents, baseTimeNanoseconds, traceName), 4-space pretty
// printing with one key per line, microsecond `ts`/`dur` with three decimals relative
// to baseTimeNanoseconds, and per engine step: a user_annotation (engine step) and its
// gpu_user_annotation, python_function frames with Python ids, cpu_op with External id,
// cuda_runtime launches (cudaLaunchKernel, cudaMemcpyAsync) with cbid and correlation,
// kernels / gpu_memcpy on streams with device, context, stream, correlation, grid and
// block, NCCL kernels on a second stream, and ac2g flow start/finish pairs.
// Usage: teller_make_big_kineto OUT.json TARGET_MEGABYTES [SEED]
// Prints one JSON line: bytes, events, seconds, megabytes_per_second.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

namespace {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  int64_t Uniform(int64_t low, int64_t high) {  // [low, high)
    return low + static_cast<int64_t>(Next() % static_cast<uint64_t>(high - low));
  }

 private:
  uint64_t state_;
};

// Appends JSON text to a fixed buffer flushed to a FILE when full.
class JsonOut {
 public:
  explicit JsonOut(FILE* file) : file_(file) {}
  ~JsonOut() { Flush(); }
  void Raw(std::string_view text) {
    Reserve(text.size());
    std::memcpy(buffer_ + used_, text.data(), text.size());
    used_ += text.size();
  }
  void Int(int64_t value) {
    Reserve(24);
    used_ = std::to_chars(buffer_ + used_, buffer_ + kBufferBytes, value).ptr - buffer_;
  }
  // Nanoseconds as microseconds with exactly three decimals ("1365627862757.064").
  void Micros(int64_t ns) {
    Int(ns / 1000);
    char frac[4] = {'.', static_cast<char>('0' + ns / 100 % 10),
                    static_cast<char>('0' + ns / 10 % 10), static_cast<char>('0' + ns % 10)};
    Raw(std::string_view(frac, 4));
  }
  void Key(std::string_view key) {
    Raw(",\n                \"");
    Raw(key);
    Raw("\": ");
  }
  void Flush() {
    if (used_ > 0) written_ += std::fwrite(buffer_, 1, used_, file_);
    used_ = 0;
  }
  uint64_t bytes() const { return written_ + used_; }

 private:
  static constexpr size_t kBufferBytes = 1 << 20;
  void Reserve(size_t bytes) {
    if (used_ + bytes > kBufferBytes) Flush();
  }
  FILE* file_;
  char buffer_[kBufferBytes];
  size_t used_ = 0;
  uint64_t written_ = 0;
};

constexpr int64_t kPid = 6583;
constexpr int64_t kComputeStream = 7;
constexpr int64_t kCommStream = 20;

struct Kernel {
  const char* name;
  int64_t grid_x;
  int64_t block_x;
};
constexpr Kernel kKernels[] = {
    {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_"
     "segment_k_off_kernel__5x_cublas",
     132, 384},
    {"void flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, "
     "cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 4, cutlass::bfloat16_t> >, false, "
     "false, false, false, true, true, false, false>(Flash_fwd_params)",
     264, 128},
    {"void vllm::rms_norm_kernel<c10::BFloat16, 8, 4>(c10::BFloat16*, c10::BFloat16 const*, "
     "long, c10::BFloat16 const*, float, int, int)",
     32, 1024},
    {"void vllm::act_and_mul_kernel<c10::BFloat16, &(c10::BFloat16 vllm::silu_kernel<"
     "c10::BFloat16>(c10::BFloat16 const&)), true>(c10::BFloat16*, c10::BFloat16 const*, int)",
     32, 1024},
    {"void at::native::unrolled_elementwise_kernel<at::native::CUDAFunctorOnSelf_add<int>, "
     "std::array<char*, 2ul>, 4, TrivialOffsetCalculator<1, unsigned int>, "
     "TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithoutCast, "
     "at::native::memory::StoreWithoutCast>(int, at::native::CUDAFunctorOnSelf_add<int>, "
     "std::array<char*, 2ul>, TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, "
     "unsigned int>, at::native::memory::LoadWithoutCast, at::native::memory::StoreWithoutCast)",
     1, 128},
};
constexpr const char* kNcclKernel =
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
constexpr const char* kOps[] = {"aten::linear", "aten::mm",          "vllm::unified_attention",
                                "aten::add",    "aten::silu",        "_C::rms_norm",
                                "aten::copy_",  "aten::index_select"};
constexpr const char* kFrames[] = {
    "vllm/model_executor/layers/linear.py(548): forward",
    "vllm/attention/layer.py(314): forward",
    "vllm/model_executor/layers/layernorm.py(193): forward_cuda",
    "vllm/model_executor/layers/activation.py(84): forward_cuda",
    "torch/nn/modules/module.py(1773): _call_impl",
};

class TraceWriter {
 public:
  TraceWriter(FILE* file, uint64_t seed) : out_(file), random_(seed) {}

  void Header() {
    out_.Raw("{\n    \"schemaVersion\": 1,\n    \"deviceProperties\": [");
    for (int device = 0; device < 8; ++device) {
      out_.Raw(device ? ",\n        {\n" : "\n        {\n");
      out_.Raw("            \"id\": ");
      out_.Int(device);
      out_.Raw(
          ",\n            \"name\": \"NVIDIA H200\",\n            \"totalGlobalMem\": "
          "150754820096,\n            \"computeMajor\": 9,\n            \"computeMinor\": 0,\n"
          "            \"maxThreadsPerBlock\": 1024,\n            \"maxThreadsPerMultiprocessor\": "
          "2048,\n            \"regsPerBlock\": 65536,\n            \"warpSize\": 32,\n"
          "            \"sharedMemPerBlock\": 49152,\n            \"numSms\": 132,\n"
          "            \"regsPerMultiprocessor\": 65536,\n            \"sharedMemPerBlockOptin\": "
          "232448,\n            \"sharedMemPerMultiprocessor\": 233472\n        }");
    }
    out_.Raw(
        "\n    ],\n    \"cupti_version\": 24,\n    \"cuda_runtime_version\": 12080,\n"
        "    \"cuda_driver_version\": 12080,\n    \"distributedInfo\": {\"backend\": \"nccl\", "
        "\"rank\": 0, \"world_size\": 8, \"pg_count\": 3, \"pg_config\": [], \"nccl_version\": "
        "\"2.26.2\"},\n    \"record_shapes\": 0,\n    \"with_stack\": 1,\n    \"trace_id\": "
        "\"A1B2C3D4E5F60718\",\n    \"displayTimeUnit\": \"ms\",\n    \"traceEvents\": [");
  }

  void Footer() {
    out_.Raw(
        "\n    ],\n    \"baseTimeNanoseconds\": 1767189312000000000,\n    \"traceName\": "
        "\"/tmp/teller_make_big_kineto.json\"\n}\n");
    out_.Flush();
  }

  // One engine step: 48 operator groups on the compute stream, then an all-reduce.
  void Step() {
    int64_t step_start = now_ns_;
    uint64_t step_external = NextExternal();
    size_t ops = 48;
    int64_t gpu_start = now_ns_ + 40'000;
    int64_t gpu_ns = gpu_start;
    struct Pending {
      int64_t corr;
      int64_t external;
      int kind;  // 0..4 kernel index, 5 memcpy, 6 nccl
      int64_t launch_ns;
    };
    Pending pending[64];
    size_t pending_count = 0;
    now_ns_ += 5'000;
    for (size_t op = 0; op <= ops; ++op) {
      bool is_nccl = op == ops;
      bool is_memcpy = op == 0;
      int kind = is_nccl ? 6 : is_memcpy ? 5 : static_cast<int>(random_.Uniform(0, 5));
      int64_t frame_start = now_ns_;
      int64_t python_id = next_python_id_++;
      uint64_t external = NextExternal();
      int64_t op_start = frame_start + random_.Uniform(500, 3'000);
      int64_t launch_start = op_start + random_.Uniform(1'000, 6'000);
      int64_t launch_dur = random_.Uniform(3'000, 9'000);
      int64_t op_end = launch_start + launch_dur + random_.Uniform(500, 2'000);
      int64_t frame_end = op_end + random_.Uniform(300, 1'500);
      int64_t corr = next_correlation_++;
      const char* frame = kFrames[python_id % 5];
      const char* op_name = is_nccl ? "c10d::allreduce_" : is_memcpy ? "aten::copy_" : kOps[kind];
      const char* api = is_memcpy ? "cudaMemcpyAsync" : "cudaLaunchKernel";
      Complete("python_function", frame, kPid, kPid, frame_start, frame_end - frame_start);
      out_.Key("args");
      out_.Raw("{\n                    \"Python parent id\": ");
      out_.Int(python_parent_);
      out_.Raw(",\n                    \"Python id\": ");
      out_.Int(python_id);
      out_.Raw(",\n                    \"Ev Idx\": ");
      out_.Int(static_cast<int64_t>(events_));
      EndArgs();
      Complete("cpu_op", op_name, kPid, kPid, op_start, op_end - op_start);
      out_.Key("args");
      out_.Raw("{\n                    \"External id\": ");
      out_.Int(static_cast<int64_t>(external));
      out_.Raw(
          ",\n                    \"Record function id\": 0,\n                    \"Ev Idx\": ");
      out_.Int(static_cast<int64_t>(events_));
      EndArgs();
      Complete("cuda_runtime", api, kPid, kPid, launch_start, launch_dur);
      out_.Key("args");
      out_.Raw("{\n                    \"External id\": ");
      out_.Int(static_cast<int64_t>(external));
      out_.Raw(is_memcpy ? ",\n                    \"cbid\": 41"
                         : ",\n                    \"cbid\": 211");
      out_.Raw(",\n                    \"correlation\": ");
      out_.Int(corr);
      EndArgs();
      Flow('s', corr, kPid, kPid, launch_start);
      pending[pending_count++] = {corr, static_cast<int64_t>(external), kind, launch_start};
      now_ns_ = frame_end + random_.Uniform(200, 2'000);
    }
    // Device side: in launch order, each no earlier than its launch.
    for (size_t i = 0; i < pending_count; ++i) {
      const Pending& work = pending[i];
      int64_t start = std::max(gpu_ns, work.launch_ns + random_.Uniform(4'000, 12'000));
      int64_t stream = work.kind == 6 ? kCommStream : kComputeStream;
      int64_t dur = work.kind == 5   ? random_.Uniform(1'000, 4'000)
                    : work.kind == 6 ? random_.Uniform(20'000, 120'000)
                                     : random_.Uniform(2'000, 90'000);
      if (work.kind == 5) {
        Complete("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 0, stream, start, dur);
      } else {
        Complete("kernel", work.kind == 6 ? kNcclKernel : kKernels[work.kind].name, 0, stream,
                 start, dur);
      }
      out_.Key("args");
      out_.Raw("{\n                    \"External id\": ");
      out_.Int(work.external);
      if (work.kind != 5) out_.Raw(",\n                    \"queued\": 0");
      out_.Raw(
          ",\n                    \"device\": 0,\n                    \"context\": 1,\n"
          "                    \"stream\": ");
      out_.Int(stream);
      out_.Raw(",\n                    \"correlation\": ");
      out_.Int(work.corr);
      if (work.kind == 5) {
        out_.Raw(
            ",\n                    \"bytes\": 2048,\n                    \"memory bandwidth "
            "(GB/s)\": 1.28");
      } else {
        int64_t grid = work.kind == 6 ? 8 : kKernels[work.kind].grid_x;
        int64_t block = work.kind == 6 ? 640 : kKernels[work.kind].block_x;
        out_.Raw(
            ",\n                    \"registers per thread\": 128,\n                    "
            "\"shared memory\": 49152,\n                    \"blocks per SM\": 1.5,\n"
            "                    \"warps per SM\": 6,\n                    \"grid\": [");
        out_.Int(grid);
        out_.Raw(", 1, 1],\n                    \"block\": [");
        out_.Int(block);
        out_.Raw(", 1, 1],\n                    \"est. achieved occupancy %\": 9");
      }
      EndArgs();
      Flow('f', work.corr, 0, stream, start);
      gpu_ns = start + dur + random_.Uniform(500, 3'000);
    }
    // The step annotation on the CPU and its mirror on the GPU.
    int64_t step_end = std::max(now_ns_, gpu_ns);
    char step_name[96];
    int length = std::snprintf(
        step_name, sizeof(step_name), "execute_context_0(0)_generation_%llu(%llu)",
        static_cast<unsigned long long>(step_), static_cast<unsigned long long>(step_ * 32));
    std::string_view name(step_name, static_cast<size_t>(length));
    Complete("user_annotation", name, kPid, kPid, step_start, step_end - step_start);
    out_.Key("args");
    out_.Raw("{\n                    \"External id\": ");
    out_.Int(static_cast<int64_t>(step_external));
    out_.Raw(",\n                    \"Record function id\": 0,\n                    \"Ev Idx\": ");
    out_.Int(static_cast<int64_t>(events_));
    EndArgs();
    Complete("gpu_user_annotation", name, 0, kComputeStream, gpu_start, gpu_ns - gpu_start);
    out_.Key("args");
    out_.Raw("{\n                    \"External id\": ");
    out_.Int(static_cast<int64_t>(step_external));
    EndArgs();
    now_ns_ = step_end + random_.Uniform(20'000, 200'000);
    ++step_;
  }

  uint64_t bytes() const { return out_.bytes(); }
  uint64_t events() const { return events_; }

 private:
  uint64_t NextExternal() { return next_external_++; }

  void Begin() {
    out_.Raw(events_ ? ",\n        {\n                \"ph\": "
                     : "\n        {\n                \"ph\": ");
    ++events_;
  }
  // Opens an "X" event; the caller adds args and EndArgs closes it.
  void Complete(std::string_view cat, std::string_view name, int64_t pid, int64_t tid,
                int64_t start_ns, int64_t dur_ns) {
    Begin();
    out_.Raw("\"X\"");
    out_.Key("cat");
    out_.Raw("\"");
    out_.Raw(cat);
    out_.Raw("\"");
    out_.Key("name");
    out_.Raw("\"");
    out_.Raw(name);
    out_.Raw("\"");
    out_.Key("pid");
    out_.Int(pid);
    out_.Key("tid");
    out_.Int(tid);
    out_.Key("ts");
    out_.Micros(start_ns);
    out_.Key("dur");
    out_.Micros(dur_ns);
  }
  void EndArgs() { out_.Raw("\n                }\n        }"); }
  void Flow(char phase, int64_t id, int64_t pid, int64_t tid, int64_t ts_ns) {
    Begin();
    out_.Raw(phase == 's' ? "\"s\"" : "\"f\"");
    out_.Key("id");
    out_.Int(id);
    out_.Key("pid");
    out_.Int(pid);
    out_.Key("tid");
    out_.Int(tid);
    out_.Key("ts");
    out_.Micros(ts_ns);
    out_.Key("cat");
    out_.Raw("\"ac2g\"");
    out_.Key("name");
    out_.Raw("\"ac2g\"");
    if (phase == 'f') {
      out_.Key("bp");
      out_.Raw("\"e\"");
    }
    out_.Raw("\n        }");
  }

  JsonOut out_;
  SplitMix64 random_;
  int64_t now_ns_ = 1'365'627'862'757'064;  // ns after baseTimeNanoseconds, as the real trace
  uint64_t events_ = 0;
  uint64_t step_ = 0;
  uint64_t next_external_ = 1;
  int64_t next_correlation_ = 16;
  int64_t next_python_id_ = 29'937'668;
  int64_t python_parent_ = 29'937'646;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: teller_make_big_kineto OUT.json TARGET_MEGABYTES [SEED]\n");
    return 2;
  }
  FILE* file = std::fopen(argv[1], "wb");
  if (!file) {
    std::perror(argv[1]);
    return 1;
  }
  uint64_t target_bytes = std::strtoull(argv[2], nullptr, 10) << 20;
  uint64_t seed = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 42;
  auto start = std::chrono::steady_clock::now();
  auto* writer = new TraceWriter(file, seed);  // ~1 MB buffer: keep it off the stack
  writer->Header();
  while (writer->bytes() < target_bytes) writer->Step();
  writer->Footer();
  uint64_t bytes = writer->bytes(), events = writer->events();
  delete writer;
  if (std::fclose(file) != 0) {
    std::perror(argv[1]);
    return 1;
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("{\"bytes\":%llu,\"events\":%llu,\"seconds\":%.3f,\"megabytes_per_second\":%.1f}\n",
              static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(events),
              seconds, bytes / 1048576.0 / seconds);
  return 0;
}
