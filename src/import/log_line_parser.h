// Parsing one service-log line: timestamp, level, pid/rank, request id and the format
// it was written in (vLLM v0/v1, SGLang, NCCL, torch c10 / ProcessGroupNCCL, TensorRT-LLM,
// the kernel's ring buffer, Python tracebacks, uvicorn access lines, plain timestamped lines). Pure
// functions over string_views: nothing here allocates per line.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/time.h"
#include "model/trace.h"

namespace teller::import {

enum class LogFormat : uint8_t {
  kUnknown,      // no known header: kept, level unknown
  kVllm,         // "INFO 11-29 12:00:01 [engine.py:123] msg", v1 with "(EngineCore_0 pid=1) "
  kSglang,       // "[2025-03-01 10:00:00 TP0] msg"
  kNccl,         // "host:pid:tid [dev] NCCL INFO msg", "... file.cc:12 NCCL WARN msg"
  kTorch,        // c10 glog style "[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] msg"
  kTraceback,    // "Traceback (most recent call last):" and the lines that continue it
  kHttpAccess,   // uvicorn "INFO:     127.0.0.1:50000 - "POST /v1/completions HTTP/1.1" 200 OK"
  kPlain,        // a leading ISO 8601 / Python asctime / syslog timestamp, or a "LEVEL:" prefix
  kTensorRtLlm,  // "[TensorRT-LLM][ERROR] msg", "[MM/DD/YYYY-hh:mm:ss] [TRT-LLM] [W] msg"
  kKernel,       // dmesg "[ 1234.567890] msg" (seconds since boot: no wall-clock time)
};
std::string_view LogFormatName(LogFormat format);

// What ParseLogLine needs besides the text.
struct LogParseContext {
  // Year for timestamps that print none (vLLM "MM-DD", torch "MMDD", syslog).
  int year = 1970;
  // Local wall clock minus UTC, for timestamps without a zone.
  int utc_offset_minutes = 0;
};

struct ParsedLogLine {
  bool has_ts = false;
  bool year_inferred = false;  // the timestamp printed no year; context.year was used
  base::TimeNs ts_ns = 0;      // UTC epoch ns when has_ts
  model::LogLevel level = model::LogLevel::kUnknown;
  LogFormat format = LogFormat::kUnknown;
  int64_t pid = -1;
  int32_t rank = -1;               // global rank when the line names one
  int32_t cuda_device = -1;        // NCCL's "[N]" is the CUDA device, not the rank
  std::string_view process_label;  // "EngineCore_0", "VllmWorker rank=1", "TP0"
  std::string_view request_id;     // empty when none
  std::string_view message;        // the text after the header; what templates are mined from
  bool traceback_head = false;     // "Traceback (most recent call last):" and C++ equivalents
};

// Parses one line (no trailing newline; already sanitized, see SanitizeLogLine). The
// views in the result point into text.
ParsedLogLine ParseLogLine(std::string_view text, const LogParseContext& context);

// Finds a request id in a message: vLLM "cmpl-<hex>-0" / "chatcmpl-<hex>", the id after
// "Added/Finished/Aborted/Received request", SGLang "rid=", "request_id=". Empty if none.
std::string_view FindRequestId(std::string_view message);

// True for a line that continues a Python or C++ traceback when it carries no header of
// its own: indented frames, "During handling of ...", "frame #3: ...", blank lines.
bool IsTracebackFrameLine(std::string_view text);
// True for the "ValueError: ..." / "torch.OutOfMemoryError: ..." line that ends a traceback.
bool IsExceptionLine(std::string_view text);

// Flags reported by SanitizeLogLine.
enum SanitizeFlags : uint8_t {
  kSanitizeNone = 0,
  kSanitizeInvalidBytes = 1 << 0,    // invalid UTF-8 or control bytes replaced by U+FFFD
  kSanitizeAnsiStripped = 1 << 1,    // terminal colour escapes removed
  kSanitizeCarriageReturn = 1 << 2,  // "a\rb" kept as "b", as a terminal shows it
};

// Makes a raw line safe to store and parse: strips a trailing '\r', keeps what follows
// the last interior '\r', removes ANSI escape sequences, replaces invalid UTF-8 and
// control bytes (except tab) by U+FFFD. Writes to *out only when something changed and
// returns the text to use (raw or *out) plus flags.
std::string_view SanitizeLogLine(std::string_view raw, std::string* out, uint8_t* flags);

// Days since 1970-01-01 of a proleptic Gregorian date.
int64_t DaysFromCivil(int64_t year, unsigned month, unsigned day);
// The UTC year of an epoch-ns time.
int YearOfTimeNs(base::TimeNs ts_ns);

}  // namespace teller::import
