// An NVTX-annotated CPU program for the RecordFaults tests (src/record/
// record_faults_test.cc), run under `teller record`. Modes (argv[1]):
//   flood N            100 pairs "early", a pause past a flush, then N push/pop pairs
//                      "flood-<i % 1000>", then prints "flood done N"
//   workers N L R      fork+exec N workers at once (a pipe holds them until all exist);
//                      worker i pushes "worker-i" with R ranges "step" inside and writes
//                      L lines "worker <i> line <j>", one write(2) each; exits 0
//   fork R             pushes "parent-before" x3 (flushed), opens "parent-open",
//                      forks without exec: the child pushes "child" R times and exits 0,
//                      the parent pushes "parent-after" x3, pops, waits, exits with the
//                      child's status
//   signal S           pushes "before" x100, sleeps past a flush, prints "ready", opens
//                      "unflushed", then raise(S)
#include <nvtx3/nvToolsExt.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

void WriteLine(const std::string& text) {
  std::string line = text + "\n";
  (void)!write(1, line.data(), line.size());  // one write: lines never interleave
}

int Flood(long pairs) {
  for (int i = 0; i < 100; ++i) {
    nvtxRangePushA("early");
    nvtxRangePop();
  }
  usleep(300 * 1000);  // past a timer flush: these are on disk before the flood
  char name[32];
  for (long i = 0; i < pairs; ++i) {
    std::snprintf(name, sizeof(name), "flood-%ld", i % 1000);
    nvtxRangePushA(name);
    nvtxRangePop();
  }
  WriteLine("flood done " + std::to_string(pairs));
  return 0;
}

int Worker(int index, int lines, int ranges, int gate_fd) {
  char byte;
  while (read(gate_fd, &byte, 1) > 0) {
  }  // EOF once the parent closed its end: every worker exists
  close(gate_fd);
  const std::string name = "worker-" + std::to_string(index);
  nvtxRangePushA(name.c_str());
  for (int j = 0; j < std::max(lines, ranges); ++j) {
    if (j < ranges) {
      nvtxRangePushA("step");
      nvtxRangePop();
    }
    if (j < lines) WriteLine("worker " + std::to_string(index) + " line " + std::to_string(j));
  }
  nvtxRangePop();
  return 0;
}

int Workers(const char* self, int count, const char* lines, const char* ranges) {
  int gate[2];
  if (pipe(gate) != 0) return 2;
  std::vector<pid_t> children;
  for (int i = 0; i < count; ++i) {
    pid_t child = fork();
    if (child < 0) return 2;
    if (child == 0) {
      close(gate[1]);
      std::string index = std::to_string(i), fd = std::to_string(gate[0]);
      execl(self, self, "worker", index.c_str(), lines, ranges, fd.c_str(),
            static_cast<char*>(nullptr));
      _exit(127);
    }
    children.push_back(child);
  }
  close(gate[0]);
  close(gate[1]);  // releases the workers
  int failed = 0;
  for (pid_t child : children) {
    int status = 0;
    waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  return failed == 0 ? 0 : 1;
}

int ForkWithoutExec(int child_ranges) {
  for (int i = 0; i < 3; ++i) {
    nvtxRangePushA("parent-before");
    nvtxRangePop();
  }
  usleep(200 * 1000);  // past a timer flush: the parent's file and writer thread exist
  nvtxRangePushA("parent-open");
  pid_t child = fork();
  if (child == 0) {
    for (int i = 0; i < child_ranges; ++i) {
      nvtxRangePushA("child");
      nvtxRangePop();
    }
    WriteLine("child done");
    std::exit(0);
  }
  for (int i = 0; i < 3; ++i) {
    nvtxRangePushA("parent-after");
    nvtxRangePop();
  }
  nvtxRangePop();
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

int Signal(int signal) {
  for (int i = 0; i < 100; ++i) {
    nvtxRangePushA("before");
    nvtxRangePop();
  }
  usleep(300 * 1000);  // past a timer flush (the tests set TELLER_FLUSH_MS=50)
  WriteLine("ready");
  nvtxRangePushA("unflushed");
  raise(signal);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "flood" && argc == 3) return Flood(std::atol(argv[2]));
  if (mode == "workers" && argc == 5) return Workers(argv[0], std::atoi(argv[2]), argv[3], argv[4]);
  if (mode == "worker" && argc == 6) {
    return Worker(std::atoi(argv[2]), std::atoi(argv[3]), std::atoi(argv[4]), std::atoi(argv[5]));
  }
  if (mode == "fork" && argc == 3) return ForkWithoutExec(std::atoi(argv[2]));
  if (mode == "signal" && argc == 3) return Signal(std::atoi(argv[2]));
  std::fprintf(stderr, "usage: %s flood N | workers N L R | fork R | signal S\n", argv[0]);
  return 2;
}
