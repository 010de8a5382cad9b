// An NVTX-annotated CPU program for the injection tests (label nvtx). What it emits
// is fixed, so tests can check the bundle exactly:
//   main thread, named "main-loop": 3 x push "outer" { push "inner" x2 }, a mark
//   "tick", a domain "engine" push "engine.step" (registered string) / pop, and a
//   start/end range "async" started here and ended on the worker thread.
//   worker thread, named "worker": 5 x push "work" / pop.
// Mode (argv[1]): "basic"; "fork": then forks one child that emits push "child" / pop
// and exits; "segv", "abort", "exit3": after the above, sleep past a flush, emit
// push "last" (unflushed), then crash / abort / exit(3).
#include <nvtx3/nvToolsExt.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace {

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

}  // namespace

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "basic";
  Basic();
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
    if (std::strcmp(mode, "segv") == 0) {
      volatile int* null_pointer = nullptr;
      *null_pointer = 1;
    }
    if (std::strcmp(mode, "abort") == 0) std::abort();
    std::exit(3);
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
