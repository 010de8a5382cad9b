#include "base/tuning.h"

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace teller::base {
namespace {

TEST(TuningTest, EveryValueHasAUniqueNameAMeaningAndAnOrigin) {
  std::set<std::string> names;
  for (const TunedValue& value : TunedValues()) {
    EXPECT_TRUE(names.insert(value.Name()).second) << value.Name();
    EXPECT_FALSE(value.meaning.empty()) << value.Name();
    EXPECT_FALSE(value.chosen.empty()) << value.Name();
    EXPECT_EQ(FindTunedValue(value.Name()), &value);
  }
  EXPECT_GE(names.size(), 30u);
  EXPECT_EQ(FindTunedValue("cause"), nullptr);
  EXPECT_EQ(FindTunedValue("cause.drift.x"), nullptr);
}

TEST(TuningTest, ParsesAnOverride) {
  StatusOr<TuningOverride> parsed = ParseTuningOverride("cause.min_score=12.5");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->name, "cause.min_score");
  EXPECT_EQ(parsed->value, 12.5);
  EXPECT_TRUE(ParseTuningOverride("diagnose.sustained_steps=3").ok());
}

TEST(TuningTest, RejectsBadOverridesWithTheReason) {
  const auto message = [](std::string_view text) {
    StatusOr<TuningOverride> parsed = ParseTuningOverride(text);
    return parsed.ok() ? std::string("ok") : std::string(parsed.status().message());
  };
  EXPECT_NE(message("cause.min_score").find("expected NAME=VALUE"), std::string::npos);
  EXPECT_NE(message("cause.min_scor=3").find("no tuned value is named 'cause.min_scor'"),
            std::string::npos);
  EXPECT_NE(message("cause.min_score=").find("not a finite number"), std::string::npos);
  EXPECT_NE(message("cause.min_score=3x").find("not a finite number"), std::string::npos);
  EXPECT_NE(message("cause.min_score=nan").find("not a finite number"), std::string::npos);
  EXPECT_NE(message("diagnose.sustained_steps=2.5").find("whole number"), std::string::npos);
  EXPECT_NE(message("diagnose.sustained_steps=-1").find("whole number"), std::string::npos);
}

// docs/tuning.md is `teller tuning --markdown`; regenerate it when the list changes.
TEST(TuningTest, DocsPageMatchesTheList) {
  std::ifstream file(std::string(TELLER_DEFAULT_SOURCE_DIR) + "/docs/tuning.md");
  ASSERT_TRUE(file) << "docs/tuning.md is missing";
  std::stringstream text;
  text << file.rdbuf();
  EXPECT_EQ(text.str(), RenderTunedValues(true))
      << "docs/tuning.md is stale: run `build/teller tuning --markdown > docs/tuning.md`";
}

}  // namespace
}  // namespace teller::base
