// NVTX push/pop overhead, side by side in one run: no tool, a minimal tool that only
// stores the message pointer, and teller's injection. Usage:
//   capture_nvtx_bench TELLER_NVTX_INJECTION MINIMAL_TOOL [pairs]
// re-runs itself once per mode (NVTX reads NVTX_INJECTION64_PATH once per process)
// and prints one JSON object: ns per pair per mode, teller/minimal ratio, and the
// bytes teller wrote per event.
#include <nvtx3/nvToolsExt.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace {

double MeasureNsPerPair(long pairs) {
  nvtxRangePushA("warmup");
  nvtxRangePop();
  auto start = std::chrono::steady_clock::now();
  for (long i = 0; i < pairs; ++i) {
    nvtxRangePushA("bench.range");
    nvtxRangePop();
  }
  auto end = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::nano>(end - start).count() / pairs;
}

// What one timestamp costs here (teller reads the TSC where it is invariant): a tool
// that times ranges pays it twice per pair, the minimal tool never.
double MeasureTimestampNs() {
  constexpr long kReads = 10'000'000;
  uint64_t sink = 0;
  auto start = std::chrono::steady_clock::now();
  for (long i = 0; i < kReads; ++i) {
#if defined(__x86_64__)
    sink += __rdtsc();
#else
    sink += std::chrono::steady_clock::now().time_since_epoch().count();
#endif
  }
  auto end = std::chrono::steady_clock::now();
  if (sink == 1) std::fputs("", stderr);  // keep the loop
  return std::chrono::duration<double, std::nano>(end - start).count() / kReads;
}

double RunChild(const char* self, const std::string& tool, const std::string& out_dir, long pairs) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    if (tool.empty())
      unsetenv("NVTX_INJECTION64_PATH");
    else
      setenv("NVTX_INJECTION64_PATH", tool.c_str(), 1);
    setenv("TELLER_OUTPUT_DIR", out_dir.c_str(), 1);
    std::string count = std::to_string(pairs);
    execl(self, self, "--child", count.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  char buffer[64] = {};
  ssize_t n = read(fds[0], buffer, sizeof(buffer) - 1);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return n > 0 ? std::atof(buffer) : -1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::string(argv[1]) == "--child") {
    std::printf("%.3f\n", MeasureNsPerPair(std::atol(argv[2])));
    return 0;
  }
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s TELLER_NVTX_INJECTION MINIMAL_TOOL [pairs]\n", argv[0]);
    return 2;
  }
  long pairs = argc > 3 ? std::atol(argv[3]) : 2000000;
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("teller_nvtx_bench_" + std::to_string(getpid()));
  fs::create_directories(dir);
  double none = RunChild(argv[0], "", dir.string(), pairs);
  double minimal = RunChild(argv[0], argv[2], dir.string(), pairs);
  double teller = RunChild(argv[0], argv[1], dir.string(), pairs);
  uint64_t bytes = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file() && entry.path().extension() == ".bin") bytes += entry.file_size();
  }
  fs::remove_all(dir);
  const double events = 2.0 * (pairs + 1);
  std::printf(
      "{\"pairs\":%ld,\"no_tool_ns_per_pair\":%.2f,\"minimal_tool_ns_per_pair\":%.2f,"
      "\"teller_ns_per_pair\":%.2f,\"teller_over_minimal\":%.2f,"
      "\"teller_bytes_per_event\":%.2f,\"timestamp_ns\":%.2f}\n",
      pairs, none, minimal, teller, teller / minimal, bytes / events, MeasureTimestampNs());
  return 0;
}
