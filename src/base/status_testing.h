// Tests only: ASSERT_OK(expr) stops the test with the status's message when expr fails.
#pragma once

#include <gtest/gtest.h>

#include "base/status.h"

#define ASSERT_OK(expr)                              \
  do {                                               \
    ::teller::base::Status status_ = (expr);         \
    ASSERT_TRUE(status_.ok()) << status_.ToString(); \
  } while (false)
