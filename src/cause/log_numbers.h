// Numbers an engine's log line prints after a key ("SeqNum=812", "#queue-req: 3",
// "token usage: 0.41").
#pragma once

#include <cstdint>
#include <string_view>

namespace teller::cause {

// The whole number right after key, or -1 (none, or more than 12 digits).
int64_t NumberAfter(std::string_view text, std::string_view key);

// The decimal number right after key ("0.41"), or -1.
double DecimalAfter(std::string_view text, std::string_view key);

}  // namespace teller::cause
