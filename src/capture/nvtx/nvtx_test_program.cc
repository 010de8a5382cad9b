// An NVTX-annotated CPU program for the injection tests (label nvtx). What it emits
// is fixed, so tests can check the bundle exactly:
//   main thread, named "main-loop": 3 x push "outer" { push "inner" x2 }, a mark
//   "tick", a domain "engine" push "engine.step" (registered string) / pop, and a
//   start/end range "async" started here and ended on the worker thread.
//   worker thread, named "worker": 5 x push "work" / pop.
// Mode (argv[1]): "basic"; "fork": then forks one child that emits push "child" / pop
// and exits; "segv", "abort", "exit3": after the above, sleep past a flush, emit
// push "last" (unflushed), then crash / abort / exit(3); "stream S": steps of 64 inner
// ranges for S seconds, back to back (`record --watch` memory); "hang S": steps 1 ms
// apart for S seconds, then a step that never ends.
#include <nvtx3/nvToolsExt.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace {

constexpr int kRingPairs = 5000;

void NameThisThread(const char* name) {
  nvtxNameOsThreadA(static_cast<uint32_t>(syscall(SYS_gettid)), name);
}

void Basic() {
  NameThisThread("main-loop");
  nvtxDomainHandle_t engine = nvtxDomainCreateA("engine");
  nvtxStringHandle_t step_name = nvtxDomainRegisterStringA(engine, "engine.step");
  nvtxRangeId_t async = nvtxRangeStartA("async");
  std::thread worker([async] {
    NameThisThread("worker");
    for (int i = 0; i < 5; ++i) {
      nvtxRangePushA("work");
      nvtxRangePop();
    }
    nvtxRangeEnd(async);
  });
  for (int i = 0; i < 3; ++i) {
    nvtxRangePushA("outer");
    for (int j = 0; j < 2; ++j) {
      nvtxRangePushA("inner");
      nvtxRangePop();
    }
    nvtxRangePop();
  }
  nvtxMarkA("tick");
  nvtxEventAttributes_t attributes{};
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attributes.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  attributes.message.registered = step_name;
  nvtxDomainRangePushEx(engine, &attributes);
  nvtxDomainRangePop(engine);
  worker.join();
}

// Names the ring test predicts: one stack buffer reused for changing text (the
// injection's pointer cache must notice), some longer than the cached size.
void RingName(int i, char* out, size_t size) {
  if (i % 7 == 0) {
    std::snprintf(out, size, "long-%d-%s", i,
                  "0123456789012345678901234567890123456789012345678901234567");
  } else {
    std::snprintf(out, size, "r%d", i % 50);
  }
}

// Many events through a small ring (the test sets TELLER_THREAD_BUFFER_KB=16):
// wraps, full-ring waits and name redefinitions.
void Ring() {
  std::thread ring([] {
    NameThisThread("ring");
    char name[128];
    for (int i = 0; i < kRingPairs; ++i) {
      RingName(i, name, sizeof(name));
      nvtxRangePushA(name);
      if (i % 5 == 0) nvtxMarkA("m");
      nvtxRangePop();
    }
  });
  ring.join();
}

// A real SIGSEGV; a UBSan build (scripts/asan.sh) must not turn it into a report.
__attribute__((no_sanitize("undefined"))) void Segfault() {
  volatile int* null_pointer = nullptr;
  *null_pointer = 1;
}

// Steps ("step" { 64 x "layer" }) for `seconds`, about 20 us each, `pause_us` apart.
void Stream(double seconds, int pause_us) {
  NameThisThread("engine");
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    nvtxRangePushA("step");
    for (int layer = 0; layer < 64; ++layer) {
      nvtxRangePushA("layer");
      nvtxRangePop();
    }
    nvtxRangePop();
    if (pause_us > 0) usleep(pause_us);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "basic";
  Basic();
  if (std::strcmp(mode, "ring") == 0) Ring();
  if (std::strcmp(mode, "fork") == 0) {
    pid_t child = fork();
    if (child == 0) {
      nvtxRangePushA("child");
      nvtxRangePop();
      std::exit(0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  }
  if (std::strcmp(mode, "segv") == 0 || std::strcmp(mode, "abort") == 0 ||
      std::strcmp(mode, "exit3") == 0) {
    usleep(300 * 1000);  // past a timer flush (tests set TELLER_FLUSH_MS=50)
    nvtxRangePushA("last");
    if (std::strcmp(mode, "segv") == 0) Segfault();
    if (std::strcmp(mode, "abort") == 0) std::abort();
    std::exit(3);
  }
  const double seconds = argc > 2 ? std::atof(argv[2]) : 1.0;
  if (std::strcmp(mode, "stream") == 0) Stream(seconds, 0);
  if (std::strcmp(mode, "hang") == 0) {
    Stream(seconds, 1000);  // an engine's pace: a step a millisecond
    std::printf("nvtx-test-program hang %lld\n",
                static_cast<long long>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                           std::chrono::system_clock::now().time_since_epoch())
                                           .count()));
    std::fflush(stdout);
    nvtxRangePushA("step");
    pause();
  }
  if (std::strcmp(mode, "sleep") == 0) {  // for SIGKILL: flushed, then waits
    usleep(300 * 1000);
    nvtxRangePushA("last");
    std::puts("ready");
    std::fflush(stdout);
    pause();
  }
  return 0;
}
