#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "model/stats.h"

namespace teller::model {
namespace {

TEST(DeclaredStatsTest, NamesAreUniqueSnakeCase) {
  std::set<std::string> names;
  for (const StatDef& stat : DeclaredStats()) {
    std::string name(stat.name);
    EXPECT_TRUE(names.insert(name + std::string(stat.suffix)).second) << name;
    EXPECT_FALSE(stat.description.empty()) << name;
    for (char c : name) {
      EXPECT_TRUE((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_') << name;
    }
    if (stat.family()) {
      EXPECT_EQ(name.back(), '_') << name;
    }
  }
  EXPECT_GT(names.size(), 90u);
}

TEST(DeclaredStatsTest, DeclaredSeverityIsUsed) {
  Stats stats;
  stats.Increment(stat::kKinetoEventBadTs);
  stats.Increment(stat::kKinetoTruncatedFile, 2);
  stats.Set(stat::kReconstructClockUnalignedHosts, 3);
  stats.Set(FamilyStatName(stat::kReconstructStepsBySource, "profiler_step"), 4,
            stat::kReconstructStepsBySource.severity);
  EXPECT_EQ(stats.entries().at("kineto_event_bad_ts").severity, StatSeverity::kError);
  EXPECT_EQ(stats.Get(stat::kKinetoTruncatedFile), 2);
  EXPECT_EQ(stats.entries().at("kineto_truncated_file").severity, StatSeverity::kDataLoss);
  EXPECT_EQ(stats.entries().at("reconstruct_clock_unaligned_hosts").severity,
            StatSeverity::kDataLoss);
  EXPECT_EQ(stats.Get("reconstruct_steps_profiler_step"), 4);
}

// `teller stats --describe` finds a counter's declaration by name or family prefix.
TEST(DeclaredStatsTest, FindsDeclarationsOfNamesAndFamilies) {
  EXPECT_EQ(FindDeclaredStat("kineto_event_bad_ts"),
            &*std::find_if(DeclaredStats().begin(), DeclaredStats().end(),
                           [](const StatDef& stat) { return stat.name == "kineto_event_bad_ts"; }));
  const StatDef* family = FindDeclaredStat("reconstruct_steps_profiler_step");
  ASSERT_NE(family, nullptr);
  EXPECT_EQ(family->name, stat::kReconstructStepsBySource.name);
  EXPECT_EQ(FindDeclaredStat("no_such_counter"), nullptr);
  for (const StatDef& stat : DeclaredStats()) {
    if (!stat.family()) {
      EXPECT_EQ(FindDeclaredStat(stat.name)->name, stat.name);
    }
  }
}

// docs/counters.md is `teller counters --markdown`; regenerate it when the list changes.
TEST(DeclaredStatsTest, DocsPageMatchesTheList) {
  std::ifstream file(std::string(TELLER_DEFAULT_SOURCE_DIR) + "/docs/counters.md");
  ASSERT_TRUE(file) << "docs/counters.md is missing";
  std::stringstream text;
  text << file.rdbuf();
  EXPECT_EQ(text.str(), RenderDeclaredStats(true))
      << "docs/counters.md is stale: run `build/teller counters --markdown > docs/counters.md`";
}

}  // namespace
}  // namespace teller::model
