#include "capture/redaction.h"

#include <array>
#include <cctype>

namespace teller::capture {
namespace {

char Upper(char c) { return static_cast<char>(std::toupper(static_cast<unsigned char>(c))); }
bool IsAlpha(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }
bool IsAlnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

std::string ToUpper(std::string_view text) {
  std::string upper(text);
  for (char& c : upper) c = Upper(c);
  return upper;
}

constexpr std::array<std::string_view, 5> kEnvironmentWords = {"TOKEN", "KEY", "SECRET", "PASSWORD",
                                                               "CREDENTIAL"};

// Credential prefixes and the body that must follow (at least min_body characters of
// the allowed set) for the text to count as one.
struct TokenShape {
  std::string_view prefix;
  size_t min_body;
  bool upper_digits_only;  // AWS key ids
};
constexpr std::array<TokenShape, 12> kTokenShapes = {{
    {"hf_", 20, false},
    {"sk-", 20, false},
    {"ghp_", 20, false},
    {"gho_", 20, false},
    {"ghs_", 20, false},
    {"ghu_", 20, false},
    {"ghr_", 20, false},
    {"github_pat_", 20, false},
    {"xoxb-", 10, false},
    {"xoxp-", 10, false},
    {"xoxa-", 10, false},
    {"AKIA", 16, true},
}};

bool IsTokenBodyChar(char c, bool upper_digits_only) {
  if (upper_digits_only)
    return std::isupper(static_cast<unsigned char>(c)) ||
           std::isdigit(static_cast<unsigned char>(c));
  return IsAlnum(c) || c == '_' || c == '-';
}

// Length of a credential starting at text[i] (0: none).
size_t TokenLength(std::string_view text, size_t i) {
  if (i > 0 && (IsAlnum(text[i - 1]) || text[i - 1] == '_' || text[i - 1] == '-')) return 0;
  for (const TokenShape& shape : kTokenShapes) {
    if (text.substr(i, shape.prefix.size()) != shape.prefix) continue;
    size_t end = i + shape.prefix.size();
    while (end < text.size() && IsTokenBodyChar(text[end], shape.upper_digits_only)) ++end;
    if (end - i - shape.prefix.size() >= shape.min_body) return end - i;
  }
  return 0;
}

bool StartsWithNoCase(std::string_view text, size_t i, std::string_view word) {
  if (text.size() - i < word.size()) return false;
  for (size_t k = 0; k < word.size(); ++k) {
    if (Upper(text[i + k]) != word[k]) return false;
  }
  return true;
}

}  // namespace

bool IsSecretEnvironmentName(std::string_view name) {
  const std::string upper = ToUpper(name);
  for (std::string_view word : kEnvironmentWords) {
    if (upper.find(word) != std::string::npos) return true;
  }
  return false;
}

bool IsSecretOptionName(std::string_view name) {
  const std::string upper = ToUpper(name);
  static constexpr std::array<std::string_view, 8> kWords = {
      "TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTHORIZATION", "AUTH"};
  for (std::string_view word : kWords) {
    for (size_t at = upper.find(word); at != std::string::npos; at = upper.find(word, at + 1)) {
      size_t end = at + word.size();
      if (word != "TOKEN" && end < upper.size() && upper[end] == 'S') ++end;  // plural
      if (end == upper.size() || !IsAlpha(upper[end])) return true;
    }
  }
  return false;
}

std::string RedactCredentialText(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (size_t n = TokenLength(text, i); n > 0) {
      out += kRedacted;
      i += n;
      continue;
    }
    // "Bearer <credential>" (an Authorization header value).
    if ((i == 0 || !IsAlnum(text[i - 1])) && StartsWithNoCase(text, i, "BEARER ")) {
      size_t start = i + 7;
      while (start < text.size() && text[start] == ' ') ++start;
      size_t end = start;
      while (end < text.size() && !std::isspace(static_cast<unsigned char>(text[end])) &&
             text[end] != '"' && text[end] != '\'') {
        ++end;
      }
      if (end > start) {
        out.append(text.substr(i, start - i));
        out += kRedacted;
        i = end;
        continue;
      }
    }
    // scheme://user:password@host: the password.
    if (text.substr(i, 3) == "://") {
      size_t authority_end = text.find_first_of("/?#", i + 3);
      if (authority_end == std::string_view::npos) authority_end = text.size();
      size_t at = text.rfind('@', authority_end);
      if (at != std::string_view::npos && at > i + 3) {
        size_t colon = text.find(':', i + 3);
        if (colon != std::string_view::npos && colon < at) {
          out.append(text.substr(i, colon + 1 - i));
          out += kRedacted;
          i = at;
          continue;
        }
      }
    }
    out.push_back(text[i]);
    ++i;
  }
  return out;
}

std::vector<std::string> RedactCommandLine(std::vector<std::string> argv) {
  bool redact_next = false;
  for (std::string& arg : argv) {
    if (redact_next && !arg.starts_with("--")) {
      arg = kRedacted;
      redact_next = false;
      continue;
    }
    redact_next = false;
    const size_t eq = arg.find('=');
    if (arg.size() > 1 && arg[0] == '-') {
      const size_t name_start = arg.find_first_not_of('-');
      std::string_view name(arg);
      name = name.substr(0, eq).substr(std::min(name_start, name.size()));
      if (!name.empty() && IsSecretOptionName(name)) {
        if (eq == std::string::npos) {
          redact_next = true;
        } else {
          arg = arg.substr(0, eq + 1) + std::string(kRedacted);
          continue;
        }
      }
    } else if (eq != std::string::npos && eq > 0) {
      // NAME=value (e.g. `env HF_TOKEN=... cmd`)
      std::string_view name(arg.data(), eq);
      bool is_name = true;
      for (char c : name) is_name = is_name && (IsAlnum(c) || c == '_');
      if (is_name && (IsSecretEnvironmentName(name) || IsSecretOptionName(name))) {
        arg = arg.substr(0, eq + 1) + std::string(kRedacted);
        continue;
      }
    }
    arg = RedactCredentialText(arg);
  }
  return argv;
}

}  // namespace teller::capture
