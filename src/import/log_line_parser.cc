#include "import/log_line_parser.h"

#include <array>

namespace teller::import {
namespace {

using model::LogLevel;

constexpr int64_t kNsPerSecond = 1'000'000'000;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsUpper(char c) { return c >= 'A' && c <= 'Z'; }
bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || IsUpper(c); }
bool IsHexDigit(char c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool IsIdChar(char c) { return IsAlpha(c) || IsDigit(c) || c == '-' || c == '_'; }

bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// Reads exactly n digits at *i.
bool ReadDigits(std::string_view s, size_t* i, int n, int* value) {
  if (*i + n > s.size()) return false;
  int v = 0;
  for (int k = 0; k < n; ++k) {
    char c = s[*i + k];
    if (!IsDigit(c)) return false;
    v = v * 10 + (c - '0');
  }
  *value = v;
  *i += n;
  return true;
}

// Reads 1..max_n digits at *i.
bool ReadNumber(std::string_view s, size_t* i, int max_n, int64_t* value) {
  size_t start = *i;
  int64_t v = 0;
  while (*i < s.size() && IsDigit(s[*i]) && static_cast<int>(*i - start) < max_n) {
    v = v * 10 + (s[*i] - '0');
    ++*i;
  }
  if (*i == start) return false;
  *value = v;
  return true;
}

bool Expect(std::string_view s, size_t* i, char c) {
  if (*i < s.size() && s[*i] == c) {
    ++*i;
    return true;
  }
  return false;
}

struct Clock {
  int hour = 0, minute = 0, second = 0;
  int64_t frac_ns = 0;
};

// "hh:mm:ss" with an optional ".fff" or ",fff" fraction (up to 9 digits used).
bool ReadClock(std::string_view s, size_t* i, Clock* clock) {
  size_t j = *i;
  if (!ReadDigits(s, &j, 2, &clock->hour) || !Expect(s, &j, ':') ||
      !ReadDigits(s, &j, 2, &clock->minute) || !Expect(s, &j, ':') ||
      !ReadDigits(s, &j, 2, &clock->second)) {
    return false;
  }
  if (clock->hour > 23 || clock->minute > 59 || clock->second > 60) return false;
  clock->frac_ns = 0;
  if (j + 1 < s.size() && (s[j] == '.' || s[j] == ',') && IsDigit(s[j + 1])) {
    ++j;
    int digits = 0;
    while (j < s.size() && IsDigit(s[j])) {
      if (digits < 9) clock->frac_ns = clock->frac_ns * 10 + (s[j] - '0');
      ++digits;
      ++j;
    }
    for (; digits < 9; ++digits) clock->frac_ns *= 10;
  }
  *i = j;
  return true;
}

bool MakeTime(int64_t year, int month, int day, const Clock& clock, int offset_minutes,
              base::TimeNs* ts_ns) {
  if (month < 1 || month > 12 || day < 1 || day > 31 || year < 1900 || year > 2200) return false;
  int64_t days = DaysFromCivil(year, static_cast<unsigned>(month), static_cast<unsigned>(day));
  int64_t seconds = days * 86400 + clock.hour * 3600 + clock.minute * 60 + clock.second -
                    static_cast<int64_t>(offset_minutes) * 60;
  *ts_ns = seconds * kNsPerSecond + clock.frac_ns;
  return true;
}

// A zone after an ISO time: "Z", "+08:00", "+0800", "-05". Returns false when absent.
bool ReadZone(std::string_view s, size_t* i, int* offset_minutes) {
  size_t j = *i;
  if (j < s.size() && s[j] == 'Z') {
    *offset_minutes = 0;
    *i = j + 1;
    return true;
  }
  if (j >= s.size() || (s[j] != '+' && s[j] != '-')) return false;
  int sign = s[j] == '-' ? -1 : 1;
  ++j;
  int hours = 0, minutes = 0;
  if (!ReadDigits(s, &j, 2, &hours)) return false;
  size_t k = j;
  Expect(s, &k, ':');
  if (ReadDigits(s, &k, 2, &minutes)) j = k;
  if (hours > 23 || minutes > 59) return false;
  *offset_minutes = sign * (hours * 60 + minutes);
  *i = j;
  return true;
}

// "YYYY-MM-DD[T ]hh:mm:ss[.frac][zone]" at *i.
bool ReadIsoTime(std::string_view s, size_t* i, const LogParseContext& context, base::TimeNs* ts_ns,
                 bool* has_fraction_or_zone) {
  size_t j = *i;
  int year, month, day;
  Clock clock;
  if (!ReadDigits(s, &j, 4, &year) || !Expect(s, &j, '-') || !ReadDigits(s, &j, 2, &month) ||
      !Expect(s, &j, '-') || !ReadDigits(s, &j, 2, &day)) {
    return false;
  }
  if (j >= s.size() || (s[j] != 'T' && s[j] != ' ')) return false;
  ++j;
  size_t clock_start = j;
  if (!ReadClock(s, &j, &clock)) return false;
  bool fraction = j > clock_start + 8;
  int offset = context.utc_offset_minutes;
  bool zone = ReadZone(s, &j, &offset);
  if (!MakeTime(year, month, day, clock, offset, ts_ns)) return false;
  *has_fraction_or_zone = fraction || zone;
  *i = j;
  return true;
}

constexpr std::array<std::string_view, 12> kMonths = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                      "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

// Syslog "Nov 29 12:00:01" / "Nov  9 12:00:01".
bool ReadSyslogTime(std::string_view s, size_t* i, const LogParseContext& context,
                    base::TimeNs* ts_ns) {
  size_t j = *i;
  if (j + 15 > s.size()) return false;
  int month = 0;
  for (size_t m = 0; m < kMonths.size(); ++m) {
    if (s.substr(j, 3) == kMonths[m]) month = static_cast<int>(m) + 1;
  }
  if (month == 0 || s[j + 3] != ' ') return false;
  j += 4;
  if (s[j] == ' ') ++j;
  int64_t day = 0;
  if (!ReadNumber(s, &j, 2, &day) || !Expect(s, &j, ' ')) return false;
  Clock clock;
  if (!ReadClock(s, &j, &clock)) return false;
  if (!MakeTime(context.year, month, static_cast<int>(day), clock, context.utc_offset_minutes,
                ts_ns)) {
    return false;
  }
  *i = j;
  return true;
}

struct LevelWord {
  std::string_view word;
  LogLevel level;
};
constexpr std::array<LevelWord, 11> kLevelWords = {{
    {"DEBUG", LogLevel::kDebug},
    {"INFO", LogLevel::kInfo},
    {"WARNING", LogLevel::kWarning},
    {"WARN", LogLevel::kWarning},
    {"ERROR", LogLevel::kError},
    {"CRITICAL", LogLevel::kCritical},
    {"FATAL", LogLevel::kCritical},
    {"TRACE", LogLevel::kDebug},
    {"NOTICE", LogLevel::kInfo},
    {"ERR", LogLevel::kError},
    {"EXCEPTION", LogLevel::kError},
}};

// An upper-case level word that is the whole of word.
bool LevelOfWord(std::string_view word, LogLevel* level) {
  if (word.size() < 3 || word.size() > 9) return false;
  for (const LevelWord& entry : kLevelWords) {
    if (word == entry.word) {
      *level = entry.level;
      return true;
    }
  }
  return false;
}

// A level word at *i followed by the character after; advances past the word.
bool ReadLevelWord(std::string_view s, size_t* i, LogLevel* level) {
  size_t j = *i;
  while (j < s.size() && IsUpper(s[j])) ++j;
  if (!LevelOfWord(s.substr(*i, j - *i), level)) return false;
  *i = j;
  return true;
}

size_t SkipSpaces(std::string_view s, size_t i) {
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return i;
}

// vLLM v1 / Ray process prefixes: "(EngineCore_0 pid=1234) ", "(VllmWorker rank=1 pid=4567) ",
// "(RayWorkerWrapper pid=12, ip=10.0.0.1) ".
bool ReadProcessPrefix(std::string_view s, size_t* i, ParsedLogLine* out) {
  size_t j = *i;
  if (!Expect(s, &j, '(')) return false;
  size_t close = s.find(')', j);
  if (close == std::string_view::npos || close - j > 96) return false;
  std::string_view inside = s.substr(j, close - j);
  size_t pid_at = inside.find("pid=");
  if (pid_at == std::string_view::npos || (pid_at > 0 && inside[pid_at - 1] != ' ')) {
    return false;
  }
  size_t k = pid_at + 4;
  int64_t pid = 0;
  if (!ReadNumber(inside, &k, 10, &pid)) return false;
  out->pid = pid;
  std::string_view label = inside.substr(0, pid_at);
  while (!label.empty() && label.back() == ' ') label.remove_suffix(1);
  out->process_label = label;
  size_t rank_at = inside.find("rank=");
  if (rank_at != std::string_view::npos) {
    size_t r = rank_at + 5;
    int64_t rank = 0;
    if (ReadNumber(inside, &r, 6, &rank)) out->rank = static_cast<int32_t>(rank);
  } else if (StartsWith(label, "Worker_TP")) {
    // vLLM >= 0.10 names TP-only workers "Worker_TP<n>"; with PP/DP the rank is not global.
    size_t r = 9;
    int64_t rank = 0;
    if (ReadNumber(label, &r, 6, &rank) && r == label.size())
      out->rank = static_cast<int32_t>(rank);
  }
  j = close + 1;
  if (j < s.size() && s[j] == ' ') ++j;
  *i = j;
  return true;
}

// torch's "[rank0]:" line prefix.
bool ReadTorchRankPrefix(std::string_view s, size_t* i, ParsedLogLine* out) {
  size_t j = *i;
  if (!StartsWith(s.substr(j), "[rank")) return false;
  j += 5;
  int64_t rank = 0;
  if (!ReadNumber(s, &j, 6, &rank) || !Expect(s, &j, ']') || !Expect(s, &j, ':')) return false;
  out->rank = static_cast<int32_t>(rank);
  if (j < s.size() && s[j] == ' ') ++j;
  *i = j;
  return true;
}

// vLLM: "INFO 11-29 12:00:01 [engine.py:123] msg" (v0.6+); older releases print
// "engine.py:123]" without the '['.
bool ParseVllm(std::string_view s, size_t i, const LogParseContext& context, ParsedLogLine* out) {
  LogLevel level;
  if (!ReadLevelWord(s, &i, &level) || !Expect(s, &i, ' ')) return false;
  int month, day;
  Clock clock;
  if (!ReadDigits(s, &i, 2, &month) || !Expect(s, &i, '-') || !ReadDigits(s, &i, 2, &day) ||
      !Expect(s, &i, ' ') || !ReadClock(s, &i, &clock)) {
    return false;
  }
  base::TimeNs ts;
  if (!MakeTime(context.year, month, day, clock, context.utc_offset_minutes, &ts)) return false;
  i = SkipSpaces(s, i);
  // The file:line token ends with ']'.
  size_t end = s.find(' ', i);
  std::string_view token = s.substr(i, end == std::string_view::npos ? s.size() - i : end - i);
  if (token.size() >= 3 && token.back() == ']' && token.find(':') != std::string_view::npos) {
    i = end == std::string_view::npos ? s.size() : end + 1;
  }
  out->has_ts = true;
  out->year_inferred = true;
  out->ts_ns = ts;
  out->level = level;
  out->format = LogFormat::kVllm;
  out->message = s.substr(i);
  return true;
}

// torch c10 (glog style): "[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] msg",
// "[W1129 12:00:01.123 1234 socket.cpp:752] msg", older "[E ProcessGroupNCCL.cpp:737] msg",
// and unbracketed "E1206 18:44:12.715298 12345 file.cc:12] msg".
bool ParseTorchGlog(std::string_view s, size_t i, const LogParseContext& context,
                    ParsedLogLine* out) {
  bool bracket = Expect(s, &i, '[');
  if (i >= s.size()) return false;
  LogLevel level;
  switch (s[i]) {
    case 'I':
      level = LogLevel::kInfo;
      break;
    case 'W':
      level = LogLevel::kWarning;
      break;
    case 'E':
      level = LogLevel::kError;
      break;
    case 'F':
      level = LogLevel::kCritical;
      break;
    default:
      return false;
  }
  ++i;
  bool has_ts = false;
  base::TimeNs ts = 0;
  // c10 prints the month unpadded and the day padded: "E321" is March 21, "E1206" Dec 6.
  size_t date_start = i;
  int64_t date;
  if (ReadNumber(s, &i, 4, &date)) {
    Clock clock;
    int month = static_cast<int>(date / 100), day = static_cast<int>(date % 100);
    if (i - date_start < 3 || !Expect(s, &i, ' ') || !ReadClock(s, &i, &clock)) return false;
    if (!MakeTime(context.year, month, day, clock, context.utc_offset_minutes, &ts)) return false;
    has_ts = true;
  } else if (!bracket) {
    return false;
  }
  if (!Expect(s, &i, ' ')) return false;
  // Optional thread id, then "file:line]".
  size_t k = i;
  int64_t tid;
  if (ReadNumber(s, &k, 12, &tid) && Expect(s, &k, ' ')) i = k;
  size_t close = s.find(']', i);
  if (close == std::string_view::npos) return false;
  std::string_view file_line = s.substr(i, close - i);
  size_t colon = file_line.rfind(':');
  if (colon == std::string_view::npos || colon + 1 >= file_line.size() ||
      file_line.find(' ') != std::string_view::npos) {
    return false;
  }
  for (size_t d = colon + 1; d < file_line.size(); ++d) {
    if (!IsDigit(file_line[d])) return false;
  }
  i = close + 1;
  if (i < s.size() && s[i] == ' ') ++i;
  out->has_ts = has_ts;
  out->year_inferred = has_ts;
  out->ts_ns = ts;
  out->level = level;
  out->format = LogFormat::kTorch;
  out->message = s.substr(i);
  // "[Rank 0] ..." / "[PG 1 Rank 0] ..." / "[PG ID 0 PG GUID 0(default_pg) Rank 1] ...".
  if (out->rank < 0 && StartsWith(out->message, "[")) {
    size_t end = out->message.find(']');
    size_t at = out->message.find("Rank ");
    if (end != std::string_view::npos && at != std::string_view::npos && at < end) {
      size_t r = at + 5;
      int64_t rank;
      if (ReadNumber(out->message, &r, 6, &rank) && r == end)
        out->rank = static_cast<int32_t>(rank);
    }
  }
  return true;
}

// NCCL: "host:pid:tid [dev] NCCL INFO msg", "host:pid:tid [dev] file.cc:12 NCCL WARN msg",
// "host:pid:tid [dev] 12.345 file.cc:12 NCCL TRACE msg".
bool ParseNcclBody(std::string_view s, size_t i, ParsedLogLine* out) {
  size_t space = s.find(' ', i);
  if (space == std::string_view::npos) return false;
  std::string_view id = s.substr(i, space - i);
  size_t colon2 = id.rfind(':');
  if (colon2 == std::string_view::npos || colon2 == 0) return false;
  size_t colon1 = id.rfind(':', colon2 - 1);
  if (colon1 == std::string_view::npos || colon1 == 0) return false;
  size_t p = colon1 + 1;
  int64_t pid, tid;
  if (!ReadNumber(id, &p, 10, &pid) || p != colon2) return false;
  size_t t = colon2 + 1;
  if (!ReadNumber(id, &t, 10, &tid) || t != id.size()) return false;
  size_t j = space + 1;
  int64_t device;
  if (!Expect(s, &j, '[') || !ReadNumber(s, &j, 4, &device) || !Expect(s, &j, ']') ||
      !Expect(s, &j, ' ')) {
    return false;
  }
  // "NCCL <LEVEL> " within the next three tokens.
  size_t at = s.find("NCCL ", j);
  if (at == std::string_view::npos || at - j > 96) return false;
  size_t k = at + 5;
  LogLevel level;
  if (StartsWith(s.substr(k), "INFO")) {
    level = LogLevel::kInfo;
    k += 4;
  } else if (StartsWith(s.substr(k), "WARN")) {
    level = LogLevel::kWarning;
    k += 4;
  } else if (StartsWith(s.substr(k), "TRACE")) {
    level = LogLevel::kDebug;
    k += 5;
  } else {
    return false;
  }
  if (k < s.size() && s[k] != ' ') return false;
  if (k < s.size()) ++k;
  out->pid = pid;
  out->cuda_device = static_cast<int32_t>(device);
  out->level = level;
  out->format = LogFormat::kNccl;
  out->message = s.substr(k);
  return true;
}

// "127.0.0.1:50000 - "POST /v1/completions HTTP/1.1" 200 OK".
bool IsAccessLine(std::string_view message) {
  size_t dash = message.find(" - \"");
  if (dash == std::string_view::npos || dash == 0 || dash > 64) return false;
  for (size_t k = 0; k < dash; ++k) {
    char c = message[k];
    if (!IsHexDigit(c) && c != '.' && c != ':' && c != '[' && c != ']') return false;
  }
  size_t http = message.find(" HTTP/", dash);
  if (http == std::string_view::npos) return false;
  size_t quote = message.find("\" ", http);
  return quote != std::string_view::npos && quote + 2 < message.size() &&
         IsDigit(message[quote + 2]);
}

// uvicorn "INFO:     msg" and Python's basicConfig "WARNING:root:msg".
bool ParseLevelPrefix(std::string_view s, size_t i, ParsedLogLine* out) {
  LogLevel level;
  if (!ReadLevelWord(s, &i, &level) || !Expect(s, &i, ':')) return false;
  if (i < s.size() && s[i] == ' ') {
    i = SkipSpaces(s, i);
  } else {
    size_t colon = s.find(':', i);
    if (colon == std::string_view::npos || colon - i > 64) return false;
    for (size_t k = i; k < colon; ++k) {
      if (s[k] == ' ') return false;
    }
    i = colon + 1;
  }
  out->level = level;
  out->message = s.substr(i);
  out->format = IsAccessLine(out->message) ? LogFormat::kHttpAccess : LogFormat::kPlain;
  return true;
}

// A level word among the first tokens after a timestamp: "- vllm - INFO - msg",
// "| INFO     | msg", "[INFO] msg", "INFO msg". Sets the message after it.
bool ScanLevelWord(std::string_view s, size_t i, ParsedLogLine* out) {
  size_t j = i;
  for (int token = 0; token < 6 && j < s.size(); ++token) {
    j = SkipSpaces(s, j);
    size_t end = j;
    while (end < s.size() && s[end] != ' ' && s[end] != '\t') ++end;
    std::string_view word = s.substr(j, end - j);
    while (!word.empty() && (word.front() == '[' || word.front() == '(' || word.front() == '<')) {
      word.remove_prefix(1);
    }
    while (!word.empty() && (word.back() == ']' || word.back() == ')' || word.back() == ':' ||
                             word.back() == '>' || word.back() == ',')) {
      word.remove_suffix(1);
    }
    LogLevel level;
    if (LevelOfWord(word, &level)) {
      out->level = level;
      size_t k = SkipSpaces(s, end);
      // Skip one separator after the level ("- msg", "| msg").
      if (k + 1 < s.size() && (s[k] == '-' || s[k] == '|' || s[k] == ':') && s[k + 1] == ' ') {
        k = SkipSpaces(s, k + 1);
      }
      out->message = s.substr(k);
      return true;
    }
    j = end;
  }
  return false;
}

// What follows a timestamp: an NCCL line, a level prefix, or a plain message.
void ParseBodyAfterTime(std::string_view s, size_t i, ParsedLogLine* out) {
  i = SkipSpaces(s, i);
  if (ParseNcclBody(s, i, out)) return;
  if (ParseLevelPrefix(s, i, out)) return;
  if (ScanLevelWord(s, i, out)) return;
  out->message = s.substr(i);
}

// SGLang and NCCL >= 2.26: "[2025-03-01 10:00:00 TP0] msg", "[2025-03-01 10:00:00] msg".
bool ParseBracketedDate(std::string_view s, size_t i, const LogParseContext& context,
                        ParsedLogLine* out) {
  if (!Expect(s, &i, '[')) return false;
  base::TimeNs ts;
  bool fraction_or_zone = false;
  if (!ReadIsoTime(s, &i, context, &ts, &fraction_or_zone)) return false;
  size_t close = s.find(']', i);
  if (close == std::string_view::npos || close - i > 48) return false;
  // SGLang's rank prefix: " TP0", " DP1 TP0", " PP0 TP3 EP3".
  std::string_view tags = s.substr(i, close - i);
  int32_t tp = -1;
  bool other_parallel = false;
  size_t k = 0;
  while (k < tags.size()) {
    if (tags[k] != ' ') return false;
    ++k;
    size_t start = k;
    while (k < tags.size() && IsUpper(tags[k])) ++k;
    std::string_view name = tags.substr(start, k - start);
    int64_t number;
    if (name.empty() || !ReadNumber(tags, &k, 6, &number)) return false;
    if (name == "TP") {
      tp = static_cast<int32_t>(number);
    } else if (name != "EP") {
      other_parallel = true;
    }
  }
  out->has_ts = true;
  out->ts_ns = ts;
  if (!tags.empty()) out->process_label = tags.substr(1);
  ParseBodyAfterTime(s, close + 1, out);
  if (out->format == LogFormat::kUnknown) {
    out->format = (!tags.empty() || !fraction_or_zone) ? LogFormat::kSglang : LogFormat::kPlain;
  }
  if (out->rank < 0 && tp >= 0 && !other_parallel) out->rank = tp;
  return true;
}

// TensorRT-LLM: "[TensorRT-LLM][ERROR] msg", "[TRT-LLM] [W] msg", either after an optional
// "[MM/DD/YYYY-hh:mm:ss] " time.
bool ParseTensorRtLlm(std::string_view s, size_t i, const LogParseContext& context,
                      ParsedLogLine* out) {
  base::TimeNs ts = 0;
  bool has_ts = false;
  {
    size_t j = i;
    int month, day, year;
    Clock clock;
    if (Expect(s, &j, '[') && ReadDigits(s, &j, 2, &month) && Expect(s, &j, '/') &&
        ReadDigits(s, &j, 2, &day) && Expect(s, &j, '/') && ReadDigits(s, &j, 4, &year) &&
        Expect(s, &j, '-') && ReadClock(s, &j, &clock) && Expect(s, &j, ']') &&
        MakeTime(year, month, day, clock, context.utc_offset_minutes, &ts)) {
      has_ts = true;
      i = SkipSpaces(s, j);
    }
  }
  size_t j = i;
  if (StartsWith(s.substr(j), "[TensorRT-LLM]")) {
    j += 14;
  } else if (StartsWith(s.substr(j), "[TRT-LLM]")) {
    j += 9;
  } else {
    return false;
  }
  j = SkipSpaces(s, j);
  if (!Expect(s, &j, '[')) return false;
  const size_t close = s.find(']', j);
  if (close == std::string_view::npos || close - j > 8) return false;
  const std::string_view word = s.substr(j, close - j);
  static constexpr std::pair<std::string_view, LogLevel> kLevels[] = {
      {"E", LogLevel::kError},         {"ERROR", LogLevel::kError}, {"W", LogLevel::kWarning},
      {"WARNING", LogLevel::kWarning}, {"I", LogLevel::kInfo},      {"INFO", LogLevel::kInfo},
      {"D", LogLevel::kDebug},         {"DEBUG", LogLevel::kDebug}, {"V", LogLevel::kDebug},
      {"VERBOSE", LogLevel::kDebug},   {"F", LogLevel::kCritical},  {"FATAL", LogLevel::kCritical}};
  bool known = false;
  for (const auto& [name, level] : kLevels) {
    if (word == name) {
      out->level = level;
      known = true;
    }
  }
  if (!known) return false;
  out->has_ts = has_ts;
  out->ts_ns = ts;
  out->format = LogFormat::kTensorRtLlm;
  out->message = s.substr(SkipSpaces(s, close + 1));
  return true;
}

// The kernel ring buffer (dmesg): "[ 1234.567890] msg", seconds since boot, no wall clock.
bool ParseKernelRing(std::string_view s, size_t i, ParsedLogLine* out) {
  if (!Expect(s, &i, '[')) return false;
  i = SkipSpaces(s, i);
  int64_t seconds;
  if (!ReadNumber(s, &i, 10, &seconds) || !Expect(s, &i, '.')) return false;
  int64_t fraction;
  if (!ReadNumber(s, &i, 9, &fraction) || !Expect(s, &i, ']')) return false;
  out->format = LogFormat::kKernel;
  out->message = s.substr(SkipSpaces(s, i));
  return true;
}

bool ContainsAny(std::string_view text, std::initializer_list<std::string_view> needles) {
  for (std::string_view needle : needles) {
    if (text.find(needle) != std::string_view::npos) return true;
  }
  return false;
}

constexpr std::string_view kPythonTracebackHead = "Traceback (most recent call last):";

bool IsTracebackHead(std::string_view message) {
  if (message.find(kPythonTracebackHead) != std::string_view::npos) return true;
  // C++ (c10) reports: "Exception raised from checkTimeout at ...:609 (most recent call first):"
  // and libstdc++'s "terminate called after throwing an instance of 'c10::DistBackendError'".
  std::string_view trimmed = message;
  while (!trimmed.empty() && trimmed.back() == ' ') trimmed.remove_suffix(1);
  constexpr std::string_view kCallFirst = "(most recent call first):";
  if (trimmed.size() >= kCallFirst.size() &&
      trimmed.substr(trimmed.size() - kCallFirst.size()) == kCallFirst) {
    return true;
  }
  return StartsWith(message, "terminate called after throwing an instance of");
}

}  // namespace

std::string_view LogFormatName(LogFormat format) {
  switch (format) {
    case LogFormat::kUnknown:
      return "unknown";
    case LogFormat::kVllm:
      return "vllm";
    case LogFormat::kSglang:
      return "sglang";
    case LogFormat::kNccl:
      return "nccl";
    case LogFormat::kTorch:
      return "torch";
    case LogFormat::kTraceback:
      return "traceback";
    case LogFormat::kHttpAccess:
      return "http_access";
    case LogFormat::kPlain:
      return "plain";
    case LogFormat::kTensorRtLlm:
      return "tensorrt_llm";
    case LogFormat::kKernel:
      return "kernel";
  }
  return "unknown";
}

int64_t DaysFromCivil(int64_t year, unsigned month, unsigned day) {
  year -= month <= 2;
  const int64_t era = (year >= 0 ? year : year - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(year - era * 400);
  const unsigned doy = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

int YearOfTimeNs(base::TimeNs ts_ns) {
  int64_t days = ts_ns / (86400 * kNsPerSecond);
  if (ts_ns < 0 && ts_ns % (86400 * kNsPerSecond) != 0) --days;
  days += 719468;
  const int64_t era = (days >= 0 ? days : days - 146096) / 146097;
  const unsigned doe = static_cast<unsigned>(days - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  const unsigned month = mp < 10 ? mp + 3 : mp - 9;
  return static_cast<int>(static_cast<int64_t>(yoe) + era * 400 + (month <= 2));
}

std::string_view FindRequestId(std::string_view message) {
  // vLLM ids: "cmpl-<hex>-0", "chatcmpl-<hex>" (also inside "request_id='cmpl-...'").
  size_t at = message.find("cmpl-");
  while (at != std::string_view::npos) {
    size_t start = at;
    if (at >= 4 && message.substr(at - 4, 4) == "chat") start = at - 4;
    if (start == 0 || !IsIdChar(message[start - 1])) {
      size_t end = at + 5;
      while (end < message.size() && IsIdChar(message[end])) ++end;
      std::string_view id = message.substr(start, end - start);
      while (!id.empty() && (id.back() == '-' || id.back() == '_')) id.remove_suffix(1);
      if (id.size() >= (at - start) + 5 + 4) return id;  // at least 4 id characters
    }
    at = message.find("cmpl-", at + 5);
  }
  // key=value forms: SGLang "rid=...", "request_id=...", "req_id=...".
  for (std::string_view key : {"rid=", "request_id=", "req_id="}) {
    size_t k = message.find(key);
    while (k != std::string_view::npos) {
      if (k == 0 || !IsIdChar(message[k - 1])) {
        size_t start = k + key.size();
        if (start < message.size() && (message[start] == '\'' || message[start] == '"')) ++start;
        size_t end = start;
        while (end < message.size() && (IsIdChar(message[end]) || message[end] == '.')) ++end;
        std::string_view id = message.substr(start, end - start);
        while (!id.empty() && id.back() == '.') id.remove_suffix(1);
        if (!id.empty() && id != "None") return id;
      }
      k = message.find(key, k + key.size());
    }
  }
  // vLLM engine messages name the request after a fixed verb, whatever its id looks like
  // (offline LLM uses "0", "1", ...; servers may pass X-Request-Id through).
  for (std::string_view verb : {"Added request ", "Finished request ", "Aborted request ",
                                "Received request ", "Aborted requests "}) {
    size_t k = message.find(verb);
    if (k == std::string_view::npos) continue;
    size_t start = k + verb.size();
    if (start < message.size() && message[start] == '[') ++start;
    if (start < message.size() && (message[start] == '\'' || message[start] == '"')) ++start;
    size_t end = start;
    while (end < message.size() && (IsIdChar(message[end]) || message[end] == '.')) ++end;
    std::string_view id = message.substr(start, end - start);
    while (!id.empty() && id.back() == '.') id.remove_suffix(1);
    if (!id.empty()) return id;
  }
  return {};
}

bool IsTracebackFrameLine(std::string_view text) {
  if (text.empty()) return true;
  if (text[0] == ' ' || text[0] == '\t') return true;
  return StartsWith(text, "During handling of the above exception") ||
         StartsWith(text, "The above exception was the direct cause") ||
         StartsWith(text, "frame #") || StartsWith(text, kPythonTracebackHead);
}

bool IsExceptionLine(std::string_view text) {
  // "[pkg.]Name[: message]" where Name ends like an exception class or is dotted.
  size_t i = 0;
  bool dotted = false;
  while (i < text.size() && (IsIdChar(text[i]) || text[i] == '.')) {
    if (text[i] == '.') dotted = true;
    if (text[i] == '-') return false;
    ++i;
  }
  if (i == 0 || (!IsAlpha(text[0]) && text[0] != '_')) return false;
  if (i < text.size() && text[i] != ':') return false;
  // "serve.py:88 - msg" is a file and line, not "pkg.Name: msg".
  if (i + 1 < text.size() && IsDigit(text[i + 1])) return false;
  std::string_view name = text.substr(0, i);
  for (std::string_view suffix : {"Error", "Exception", "Interrupt", "Exit", "Warning", "Fault"}) {
    if (name.size() >= suffix.size() && name.substr(name.size() - suffix.size()) == suffix) {
      return true;
    }
  }
  return dotted && i < text.size();
}

ParsedLogLine ParseLogLine(std::string_view text, const LogParseContext& context) {
  ParsedLogLine out;
  size_t i = 0;
  // Outer prefixes added by process launchers: vLLM v1 / Ray "(Name pid=N) ", torch "[rankN]:".
  for (int round = 0; round < 3; ++round) {
    if (i < text.size() && text[i] == '(' && ReadProcessPrefix(text, &i, &out)) continue;
    if (i < text.size() && text[i] == '[' && ReadTorchRankPrefix(text, &i, &out)) continue;
    break;
  }
  out.message = text.substr(i);
  bool explicit_level = true;
  if (i < text.size()) {
    char c = text[i];
    bool parsed = false;
    if (IsUpper(c)) {
      parsed = ParseVllm(text, i, context, &out) || ParseTorchGlog(text, i, context, &out) ||
               ParseLevelPrefix(text, i, &out);
      if (!parsed) {
        base::TimeNs ts;
        size_t j = i;
        if (ReadSyslogTime(text, &j, context, &ts)) {
          out.has_ts = true;
          out.year_inferred = true;
          out.ts_ns = ts;
          out.format = LogFormat::kPlain;
          // "host prog[123]: msg".
          size_t colon = text.find("]: ", j);
          if (colon != std::string_view::npos && colon - j < 96) {
            size_t open = text.rfind('[', colon);
            size_t p = open + 1;
            int64_t pid;
            if (open != std::string_view::npos && open > j && ReadNumber(text, &p, 10, &pid) &&
                p == colon) {
              out.pid = pid;
            }
            out.message = text.substr(colon + 3);
          } else {
            out.message = text.substr(SkipSpaces(text, j));
          }
          ScanLevelWord(out.message, 0, &out);
          parsed = true;
        }
      }
    } else if (c == '[') {
      parsed = ParseBracketedDate(text, i, context, &out) ||
               ParseTorchGlog(text, i, context, &out) || ParseTensorRtLlm(text, i, context, &out) ||
               ParseKernelRing(text, i, &out);
    } else if (IsDigit(c)) {
      base::TimeNs ts;
      bool fraction_or_zone;
      size_t j = i;
      if (ReadIsoTime(text, &j, context, &ts, &fraction_or_zone)) {
        out.has_ts = true;
        out.ts_ns = ts;
        ParseBodyAfterTime(text, j, &out);
        if (out.format == LogFormat::kUnknown) out.format = LogFormat::kPlain;
        parsed = true;
      }
    }
    if (!parsed && ParseNcclBody(text, i, &out)) parsed = true;
    if (out.format == LogFormat::kSglang && out.level == LogLevel::kUnknown) {
      // SGLang's format prints no level name; infer one from the words of the message.
      explicit_level = false;
      if (ContainsAny(out.message, {"Traceback", "Exception", "exception",
                                    "Error:", "error:", "out of memory"})) {
        out.level = LogLevel::kError;
      } else if (ContainsAny(out.message, {"Warning", "WARNING", "warning:"})) {
        out.level = LogLevel::kWarning;
      } else {
        out.level = LogLevel::kInfo;
      }
    }
  }
  if (IsTracebackHead(out.message)) {
    out.traceback_head = true;
    if (out.format == LogFormat::kUnknown) out.format = LogFormat::kTraceback;
    if (out.level == LogLevel::kUnknown || !explicit_level) out.level = LogLevel::kError;
  }
  if (out.format != LogFormat::kHttpAccess) out.request_id = FindRequestId(out.message);
  return out;
}

std::string_view SanitizeLogLine(std::string_view raw, std::string* out, uint8_t* flags) {
  *flags = kSanitizeNone;
  while (!raw.empty() && raw.back() == '\r') raw.remove_suffix(1);
  size_t cr = raw.rfind('\r');
  if (cr != std::string_view::npos) {
    raw.remove_prefix(cr + 1);
    *flags |= kSanitizeCarriageReturn;
  }
  bool clean = true;
  for (char c : raw) {
    unsigned char b = static_cast<unsigned char>(c);
    if (b < 0x20 ? c != '\t' : b >= 0x7f) {
      clean = false;
      break;
    }
  }
  if (clean) return raw;
  out->clear();
  out->reserve(raw.size() + 8);
  const auto* s = reinterpret_cast<const unsigned char*>(raw.data());
  size_t n = raw.size();
  size_t i = 0;
  auto replacement = [&] {
    out->append("\xEF\xBF\xBD");
    *flags |= kSanitizeInvalidBytes;
  };
  while (i < n) {
    unsigned char b = s[i];
    if (b == 0x1b) {
      // CSI "ESC [ params intermediates final"; any other escape drops ESC and one byte.
      *flags |= kSanitizeAnsiStripped;
      if (i + 1 < n && s[i + 1] == '[') {
        size_t j = i + 2;
        while (j < n && s[j] >= 0x30 && s[j] <= 0x3f) ++j;
        while (j < n && s[j] >= 0x20 && s[j] <= 0x2f) ++j;
        if (j < n && s[j] >= 0x40 && s[j] <= 0x7e) ++j;
        i = j;
      } else {
        i += i + 1 < n ? 2 : 1;
      }
      continue;
    }
    if (b < 0x80) {
      if ((b < 0x20 && b != '\t') || b == 0x7f) {
        replacement();
      } else {
        out->push_back(static_cast<char>(b));
      }
      ++i;
      continue;
    }
    size_t length = 0;
    unsigned char low = 0x80, high = 0xbf;
    if (b >= 0xc2 && b <= 0xdf) {
      length = 2;
    } else if (b >= 0xe0 && b <= 0xef) {
      length = 3;
      if (b == 0xe0) low = 0xa0;
      if (b == 0xed) high = 0x9f;
    } else if (b >= 0xf0 && b <= 0xf4) {
      length = 4;
      if (b == 0xf0) low = 0x90;
      if (b == 0xf4) high = 0x8f;
    }
    bool valid = length > 0 && i + length <= n && s[i + 1] >= low && s[i + 1] <= high;
    for (size_t k = 2; valid && k < length; ++k) valid = s[i + k] >= 0x80 && s[i + k] <= 0xbf;
    if (!valid) {
      replacement();
      ++i;
      continue;
    }
    out->append(raw.data() + i, length);
    i += length;
  }
  return *out;
}

}  // namespace teller::import
