// Tests of teller's binary formats (byte_io.h): what every decoder must do with a buffer
// cut short, and how its errors name the offset.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "base/status.h"

namespace teller::base {

// The decoded value; a failure (and a default value) when it did not decode.
template <typename T>
T Decoded(const StatusOr<T>& decoded) {
  EXPECT_TRUE(decoded.ok()) << decoded.status().ToString();
  return decoded.ok() ? *decoded : T{};
}

// `bytes` decodes; every prefix of it, and it with one byte more, is an error naming an offset.
template <typename Decode>
void ExpectEveryTruncationFails(const std::string& bytes, Decode decode) {
  ASSERT_TRUE(decode(bytes).ok());
  for (size_t size = 0; size < bytes.size(); ++size) {
    const auto decoded = decode(std::string_view(bytes).substr(0, size));
    ASSERT_FALSE(decoded.ok()) << "prefix of " << size << " bytes";
    EXPECT_NE(decoded.status().message().find("offset "), std::string::npos)
        << decoded.status().ToString();
  }
  EXPECT_FALSE(decode(bytes + '\0').ok()) << "a trailing byte";
}

// Each buffer with one byte flipped, every byte in turn, given to `decode_all`, which
// returns how many of its decoders refused it: none may crash, and some must refuse.
template <typename DecodeAll>
void ExpectFlippedBytesDecodeOrFail(std::initializer_list<const std::string*> buffers,
                                    DecodeAll decode_all) {
  int64_t refused = 0;
  for (const std::string* encoded : buffers) {
    for (size_t at = 0; at < encoded->size(); ++at) {
      std::string bytes = *encoded;
      bytes[at] = static_cast<char>(bytes[at] ^ 0xff);
      refused += decode_all(bytes);
    }
  }
  EXPECT_GT(refused, 0);
}

// A decoder's damage test: `bytes` decodes, every cut of it (and it with a byte more) is
// an error naming an offset, and it with any one byte flipped decodes or is refused, never
// crashes (the flipped magic at least is refused).
template <typename Decode>
void ExpectDamageRefused(const std::string& bytes, Decode decode) {
  ExpectEveryTruncationFails(bytes, decode);
  ExpectFlippedBytesDecodeOrFail({&bytes},
                                 [&](std::string_view b) { return decode(b).ok() ? 0 : 1; });
}

// An error at `offset` that says `what`.
inline void ExpectError(const Status& status, const std::string& offset, const std::string& what) {
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("offset " + offset + ":"), std::string::npos)
      << status.ToString();
  EXPECT_NE(status.message().find(what), std::string::npos) << status.ToString();
}

}  // namespace teller::base
