#include "base/time.h"

#include <gtest/gtest.h>

namespace teller::base {
namespace {

TEST(TimeTest, ParsesMicrosecondDecimalsExactly) {
  EXPECT_EQ(*ParseDecimalMicrosAsNs("1700000000123456.789"), 1700000000123456789);
  EXPECT_EQ(*ParseDecimalMicrosAsNs("12"), 12000);
  EXPECT_EQ(*ParseDecimalMicrosAsNs("12.5"), 12500);
  EXPECT_EQ(*ParseDecimalMicrosAsNs("-3.25"), -3250);
  EXPECT_EQ(*ParseDecimalMicrosAsNs("0.0014"), 1);  // rounds below a nanosecond
  EXPECT_EQ(*ParseDecimalMicrosAsNs("0.0015"), 2);
  EXPECT_EQ(*ParseDecimalMicrosAsNs(".5"), 500);
  EXPECT_EQ(*ParseDecimalMicrosAsNs("1.5e3"), 1500000);
}

TEST(TimeTest, RejectsWhatIsNotANumber) {
  EXPECT_FALSE(ParseDecimalMicrosAsNs("").ok());
  EXPECT_FALSE(ParseDecimalMicrosAsNs("-").ok());
  EXPECT_FALSE(ParseDecimalMicrosAsNs("12a").ok());
  EXPECT_FALSE(ParseDecimalMicrosAsNs("99999999999999999999").ok());
  EXPECT_FALSE(ParseInt64("1.5").ok());
  EXPECT_EQ(*ParseInt64("-42"), -42);
}

TEST(TimeTest, DecimalParsingMatchesIntegerArithmetic) {
  // Property: for every micro value with 3 decimals, text round trips exactly.
  for (int64_t ns = 1700000000000000000; ns < 1700000000000000000 + 5000; ns += 7) {
    std::string text = std::to_string(ns / 1000) + "." + std::to_string(1000 + ns % 1000).substr(1);
    EXPECT_EQ(*ParseDecimalMicrosAsNs(text), ns) << text;
  }
}

}  // namespace
}  // namespace teller::base
