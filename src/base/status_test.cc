#include "base/status.h"

#include <gtest/gtest.h>

namespace teller::base {
namespace {

StatusOr<int> Half(int x) {
  if (x % 2) return InvalidArgument("{} is odd", x);
  return x / 2;
}

StatusOr<int> Quarter(int x) {
  TELLER_ASSIGN_OR_RETURN(int half, Half(x));
  TELLER_ASSIGN_OR_RETURN(int quarter, Half(half));
  return quarter;
}

Status CheckEven(int x) {
  TELLER_RETURN_IF_ERROR(Half(x).status());
  return OkStatus();
}

TEST(StatusTest, MacrosPropagateTheFirstError) {
  EXPECT_EQ(*Quarter(8), 2);
  StatusOr<int> bad = Quarter(6);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "3 is odd");
  EXPECT_TRUE(CheckEven(4).ok());
  EXPECT_FALSE(CheckEven(5).ok());
}

TEST(StatusTest, ContextIsPrepended) {
  Status status = DataLoss("chunk {} truncated", 3).WithContext("events.bin");
  EXPECT_EQ(status.ToString(), "data loss: events.bin: chunk 3 truncated");
  EXPECT_TRUE(OkStatus().WithContext("x").ok());
}

TEST(StatusTest, OkStatusIntoStatusOrIsAnError) {
  StatusOr<int> value = OkStatus();
  EXPECT_FALSE(value.ok());
  EXPECT_EQ(value.status().code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace teller::base
