#include "base/phase_timer.h"

#include <thread>

#include <gtest/gtest.h>

namespace teller::base {
namespace {

class CountingSink : public ProgressSink {
 public:
  void Update(std::string_view, uint64_t, uint64_t) override { ++updates; }
  void Finish(std::string_view) override { ++finishes; }
  int updates = 0, finishes = 0;
};

// Phases keep their first-seen order, pass everything on, and a phase that did not
// finish runs until it is read.
TEST(PhaseTimerTest, RecordsEachStageAndPassesItOn) {
  CountingSink inner;
  PhaseTimer timer(&inner);
  timer.Update("kineto", 0, 10);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  timer.Update("kineto", 10, 10);
  timer.Finish("kineto");
  timer.Begin("diagnose");
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const auto phases = timer.phases();
  ASSERT_EQ(phases.size(), 2u);
  EXPECT_EQ(phases[0].name, "kineto");
  EXPECT_EQ(phases[1].name, "diagnose");
  EXPECT_GE(phases[0].seconds, 0.02);
  EXPECT_GE(phases[1].seconds, 0.005);
  EXPECT_GE(timer.total_seconds(), phases[0].seconds + phases[1].seconds);
  EXPECT_EQ(inner.updates, 2);
  EXPECT_EQ(inner.finishes, 1);
  timer.End("never began");
  EXPECT_EQ(timer.phases().size(), 2u);
  PhaseTimer alone(nullptr);  // without a sink to pass on to
  alone.Update("x", 1, 2);
  alone.Finish("x");
  EXPECT_EQ(alone.phases().size(), 1u);
}

}  // namespace
}  // namespace teller::base
