#include "base/string_pool.h"

#include <gtest/gtest.h>

#include <string>

namespace teller::base {
namespace {

TEST(StringPoolTest, InternsOnceAndKeepsViewsStable) {
  StringPool pool;
  EXPECT_EQ(pool.Intern(""), StringPool::kEmpty);
  StringId a = pool.Intern("cudaLaunchKernel");
  std::string_view first = pool.Get(a);
  for (int i = 0; i < 200000; ++i) pool.Intern("name_" + std::to_string(i));
  EXPECT_EQ(pool.Intern("cudaLaunchKernel"), a);
  EXPECT_EQ(pool.Get(a).data(), first.data());
  EXPECT_EQ(pool.Get(pool.Find("name_12345")), "name_12345");
  EXPECT_FALSE(pool.Find("never").valid());
  EXPECT_EQ(pool.size(), 200002u);
}

TEST(StringPoolTest, LargeStringsDoNotDisturbSmallOnes) {
  StringPool pool;
  StringId small = pool.Intern("small");
  std::string big(3 << 20, 'x');
  StringId large = pool.Intern(big);
  StringId after = pool.Intern("after");
  EXPECT_EQ(pool.Get(small), "small");
  EXPECT_EQ(pool.Get(large), big);
  EXPECT_EQ(pool.Get(after), "after");
}

}  // namespace
}  // namespace teller::base
