#include "base/parallel_for.h"

#include <algorithm>
#include <thread>
#include <vector>

namespace teller::base {

void ParallelFor(size_t count, int threads, const std::function<void(size_t, size_t)>& body,
                 size_t min_chunk) {
  if (count == 0) return;
  size_t workers = threads > 0 ? static_cast<size_t>(threads)
                               : std::max<size_t>(1, std::thread::hardware_concurrency());
  workers = std::clamp<size_t>(count / std::max<size_t>(min_chunk, 1), 1, workers);
  std::vector<std::thread> pool;
  pool.reserve(workers - 1);
  for (size_t w = 1; w < workers; ++w) {
    pool.emplace_back(body, count * w / workers, count * (w + 1) / workers);
  }
  body(0, count / workers);
  for (std::thread& thread : pool) thread.join();
}

}  // namespace teller::base
