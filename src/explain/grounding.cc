#include "explain/grounding.h"

#include <fmt/format.h>

#include <cctype>
#include <set>

namespace teller::explain {
namespace {

bool IsWordChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool IsNameChar(char c) { return IsWordChar(c) || c == ':'; }
bool IsDigit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool StartsWithWord(std::string_view lower, size_t i, std::string_view word) {
  return lower.substr(i, word.size()) == word && (i == 0 || !IsWordChar(lower[i - 1]));
}

// After "step"/"rank" at `i` (lowercased text): the numbers of "steps 3, 4 and 7-9".
std::vector<int64_t> NumbersAfter(std::string_view lower, size_t i) {
  std::vector<int64_t> numbers;
  if (i < lower.size() && lower[i] == 's') ++i;                  // plural
  if (i < lower.size() && IsWordChar(lower[i])) return numbers;  // "stepping", "ranked"
  auto skip = [&](std::string_view separators) {
    while (i < lower.size() && separators.find(lower[i]) != std::string_view::npos) ++i;
  };
  skip(" #:");
  while (i < lower.size() && IsDigit(lower[i])) {
    int64_t value = 0;
    size_t digits = 0;
    while (i < lower.size() && IsDigit(lower[i])) {
      if (digits++ < 15) value = value * 10 + (lower[i] - '0');
      ++i;
    }
    if (i < lower.size() &&
        (std::isalpha(static_cast<unsigned char>(lower[i])) || lower[i] == '.') &&
        i + 1 < lower.size() && IsWordChar(lower[i + 1])) {
      break;  // "3.5", "3rd", "2x": not a step or rank number
    }
    numbers.push_back(value);
    const size_t before = i;
    skip(" ,-#");
    for (std::string_view word : {"and ", "or ", "to ", "through "}) {
      if (lower.substr(i, word.size()) == word) {
        i += word.size();
        skip(" #");
        break;
      }
    }
    if (i == before) break;
  }
  return numbers;
}

// A token that reads as a kernel or operator name rather than an English word.
bool LooksLikeOperatorName(std::string_view token) {
  if (token.size() < 4) return false;
  bool has_alpha = false;
  for (char c : token) has_alpha |= std::isalpha(static_cast<unsigned char>(c)) != 0;
  if (!has_alpha) return false;
  if (token.find('_') != std::string_view::npos || token.find("::") != std::string_view::npos) {
    return true;
  }
  const std::string lower = Lower(token);
  if (lower.rfind("nccl", 0) == 0 || lower.rfind("cuda", 0) == 0 || lower.rfind("aten", 0) == 0) {
    return true;
  }
  return token.size() > 2 && token[0] == 'c' && token[1] == 'u' &&
         std::isupper(static_cast<unsigned char>(token[2]));
}

}  // namespace

std::vector<std::string> UnverifiedMentions(std::string_view reply,
                                            const NarrativeRequest& request) {
  std::vector<std::string> mentions;
  std::set<std::string> seen;
  auto flag = [&](std::string mention) {
    if (seen.insert(mention).second) mentions.push_back(std::move(mention));
  };
  const std::string lower = Lower(reply);
  const std::string prompt = Lower(request.system + "\n" + request.user);
  for (size_t i = 0; i < lower.size(); ++i) {
    if (StartsWithWord(lower, i, "step")) {
      for (int64_t number : NumbersAfter(lower, i + 4)) {
        if (!request.step_numbers.count(number)) flag(fmt::format("step {}", number));
      }
    } else if (StartsWithWord(lower, i, "rank")) {
      for (int64_t number : NumbersAfter(lower, i + 4)) {
        if (number > INT32_MAX || !request.ranks.count(static_cast<int32_t>(number))) {
          flag(fmt::format("rank {}", number));
        }
      }
    }
  }
  for (size_t i = 0; i < reply.size();) {
    if (!IsNameChar(reply[i])) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < reply.size() && IsNameChar(reply[end])) ++end;
    std::string_view token = reply.substr(i, end - i);
    i = end;
    while (!token.empty() && (token.front() == ':' || token.front() == '_')) token.remove_prefix(1);
    while (!token.empty() && (token.back() == ':' || token.back() == '_')) token.remove_suffix(1);
    if (LooksLikeOperatorName(token) && prompt.find(Lower(token)) == std::string::npos) {
      flag(std::string(token));
    }
  }
  return mentions;
}

}  // namespace teller::explain
