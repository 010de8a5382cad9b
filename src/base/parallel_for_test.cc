#include "base/parallel_for.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <atomic>
#include <vector>

namespace teller::base {
namespace {

TEST(ParallelFor, EveryItemOnceWhateverTheThreads) {
  for (int threads : {0, 1, 2, 3, 16}) {
    for (size_t count : {0u, 1u, 2u, 7u, 1000u}) {
      std::vector<int> seen(count, 0);
      std::atomic<int> chunks = 0;
      ParallelFor(count, threads, [&](size_t begin, size_t end) {
        ++chunks;
        for (size_t i = begin; i < end; ++i) ++seen[i];
      });
      for (size_t i = 0; i < count; ++i) EXPECT_EQ(seen[i], 1) << threads << " " << count;
      if (threads > 0) {
        EXPECT_LE(chunks.load(), threads);
      }
    }
  }
}

// `taskset -c 0 teller ...` (scripts/bench.sh pins its runs so) gets one thread.
TEST(ParallelFor, ThreadCountIsTheCoresThisProcessMayRunOn) {
  EXPECT_EQ(ThreadCount(3), 3);
  cpu_set_t saved;
  ASSERT_EQ(sched_getaffinity(0, sizeof saved, &saved), 0);
  EXPECT_EQ(ThreadCount(0), CPU_COUNT(&saved));
  cpu_set_t one;
  CPU_ZERO(&one);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &saved)) {
      CPU_SET(cpu, &one);
      break;
    }
  }
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
  EXPECT_EQ(ThreadCount(0), 1);
  ASSERT_EQ(sched_setaffinity(0, sizeof saved, &saved), 0);
}

TEST(ParallelFor, SmallWorkStaysOnOneThread) {
  std::atomic<int> chunks = 0;
  ParallelFor(
      10, 8, [&](size_t, size_t) { ++chunks; }, 64);
  EXPECT_EQ(chunks.load(), 1);
}

}  // namespace
}  // namespace teller::base
