#include "base/json_text.h"

#include <gtest/gtest.h>

namespace teller::base {
namespace {

TEST(JsonTextTest, EscapesAndReplacesInvalidUtf8) {
  std::string out;
  AppendJsonString("a\"b\\c\n\t\x01 \xC3\xA9 \xFF end", &out);
  EXPECT_EQ(out, "\"a\\\"b\\\\c\\n\\t\\u0001 \xC3\xA9 \xEF\xBF\xBD end\"");
}

TEST(JsonTextTest, MarkupNeverAppearsRaw) {
  std::string out;
  AppendJsonString("<script>alert(1)</script>&", &out);
  EXPECT_EQ(out, "\"\\u003cscript\\u003ealert(1)\\u003c/script\\u003e\\u0026\"");
}

TEST(JsonTextTest, TruncatedAndOverlongSequencesAreReplaced) {
  std::string out;
  AppendJsonString(std::string("\xE2\x82", 2), &out);      // cut 3-byte sequence
  AppendJsonString(std::string("\xC0\xAF", 2), &out);      // overlong '/'
  AppendJsonString(std::string("\xED\xA0\x80", 3), &out);  // surrogate
  EXPECT_EQ(out,
            "\"\xEF\xBF\xBD\xEF\xBF\xBD\"\"\xEF\xBF\xBD\xEF\xBF\xBD\"\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF"
            "\xBF\xBD\"");
}

}  // namespace
}  // namespace teller::base
