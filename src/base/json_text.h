// JSON string literals for the files teller writes by hand (bundle logs, exports).
#pragma once

#include <string>
#include <string_view>

namespace teller::base {

// Appends text as a JSON string literal, quotes included. Control characters are
// escaped, '<', '>' and '&' too (so the output can sit inside HTML), and bytes that
// are not valid UTF-8 become U+FFFD, so any parser accepts the result.
void AppendJsonString(std::string_view text, std::string* out);

}  // namespace teller::base
