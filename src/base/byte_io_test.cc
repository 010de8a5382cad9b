// Varints (byte_io.h): every value survives the round trip in as few bytes as its bits
// need, and a varint cut short, past 64 bits or over its bound is an error naming the
// offset of its first byte.
#include "base/byte_io.h"

#include <gtest/gtest.h>

#include <limits>

#include "base/byte_io_testing.h"

namespace teller::base {
namespace {

const std::string kWhat = "varints";

TEST(ByteIoTest, VarintsSurviveTheRoundTripInAsFewBytesAsTheyNeed) {
  const uint64_t values[] = {0, 1, 127, 128, 16383, 16384, uint64_t{1} << 63,
                             std::numeric_limits<uint64_t>::max()};
  const size_t sizes[] = {1, 1, 1, 2, 2, 3, 10, 10};
  for (size_t i = 0; i < std::size(values); ++i) {
    ByteWriter out;
    out.Varint(values[i]);
    const std::string bytes = out.Take();
    EXPECT_EQ(bytes.size(), sizes[i]) << values[i];
    ByteReader in(bytes, kWhat);
    uint64_t back = 0;
    ASSERT_TRUE(in.Varint(&back, "a value").ok());
    EXPECT_EQ(back, values[i]);
    EXPECT_EQ(in.left(), 0u);
  }
}

TEST(ByteIoTest, SignedVarintsNearZeroTakeOneByte) {
  const int64_t values[] = {0, -1, 1, -64, 63, -65, 64, std::numeric_limits<int64_t>::min(),
                            std::numeric_limits<int64_t>::max()};
  const size_t sizes[] = {1, 1, 1, 1, 1, 2, 2, 10, 10};
  for (size_t i = 0; i < std::size(values); ++i) {
    EXPECT_EQ(UnZigZag(ZigZag(values[i])), values[i]);
    ByteWriter out;
    out.SignedVarint(values[i]);
    const std::string bytes = out.Take();
    EXPECT_EQ(bytes.size(), sizes[i]) << values[i];
    ByteReader in(bytes, kWhat);
    int64_t back = 0;
    ASSERT_TRUE(in.SignedVarint(&back, "a value").ok());
    EXPECT_EQ(back, values[i]);
  }
}

TEST(ByteIoTest, AVarintCutShortPastSixtyFourBitsOrOverItsBoundIsAnError) {
  ByteWriter out;
  out.Value<uint8_t>(7);
  out.Varint(300);
  const std::string bytes = out.Take();
  uint64_t value = 0;
  ByteReader short_in(std::string_view(bytes).substr(0, 2), kWhat);
  uint8_t first = 0;
  ASSERT_TRUE(short_in.Value(&first, "a byte").ok());
  ExpectError(short_in.Varint(&value, "the count"), "1", "ends inside the count");
  // Eleven bytes with the top bit set, and ten whose last holds more than bit 63.
  const std::string endless(11, '\xff');
  ByteReader long_in(endless, kWhat);
  ExpectError(long_in.Varint(&value, "the count"), "0", "past 64 bits");
  std::string wide(9, '\x80');
  wide += '\x02';
  ByteReader wide_in(wide, kWhat);
  ExpectError(wide_in.Varint(&value, "the count"), "0", "past 64 bits");
  ByteReader bound_in(bytes, kWhat);
  ASSERT_TRUE(bound_in.Value(&first, "a byte").ok());
  uint16_t small = 0;
  ExpectError(bound_in.VarintAtMost(&small, 299, "the depth"), "1", "the depth is 300, at most 299");
  ByteReader fits_in(bytes, kWhat);
  ASSERT_TRUE(fits_in.Value(&first, "a byte").ok());
  ASSERT_TRUE(fits_in.VarintAtMost(&small, 300, "the depth").ok());
  EXPECT_EQ(small, 300);
  uint8_t tiny = 0;
  ByteReader narrow_in(std::string_view(bytes).substr(1), kWhat);
  ExpectError(narrow_in.VarintAtMost(&tiny, 1000, "the depth"), "0", "at most 255");
}

}  // namespace
}  // namespace teller::base
