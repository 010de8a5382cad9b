#include "base/parallel_for.h"

#include <sched.h>

#include <algorithm>
#include <thread>
#include <vector>

namespace teller::base {

int ThreadCount(int threads) {
  if (threads > 0) return threads;
  // The cores this process may run on (taskset, a container's cpuset), else all.
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0 && CPU_COUNT(&allowed) > 0) {
    return CPU_COUNT(&allowed);
  }
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

void ParallelFor(size_t count, int threads, const std::function<void(size_t, size_t)>& body,
                 size_t min_chunk) {
  if (count == 0) return;
  const size_t workers = std::clamp<size_t>(count / std::max<size_t>(min_chunk, 1), 1,
                                            static_cast<size_t>(ThreadCount(threads)));
  std::vector<std::thread> pool;
  pool.reserve(workers - 1);
  for (size_t w = 1; w < workers; ++w) {
    pool.emplace_back(body, count * w / workers, count * (w + 1) / workers);
  }
  body(0, count / workers);
  for (std::thread& thread : pool) thread.join();
}

}  // namespace teller::base
