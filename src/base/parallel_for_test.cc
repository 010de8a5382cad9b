#include "base/parallel_for.h"

#include <gtest/gtest.h>

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

TEST(ParallelFor, SmallWorkStaysOnOneThread) {
  std::atomic<int> chunks = 0;
  ParallelFor(
      10, 8, [&](size_t, size_t) { ++chunks; }, 64);
  EXPECT_EQ(chunks.load(), 1);
}

}  // namespace
}  // namespace teller::base
