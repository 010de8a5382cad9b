// The state that spans lines of one log stream: timestamp inheritance, Python/C++
// traceback grouping, and the year of timestamps that print none (with Dec -> Jan
// rollover). ParseLogLine handles one line; LogAssembler turns a stream of them into
// records.
#pragma once

#include <cstdint>
#include <string_view>

#include "import/log_line_parser.h"

namespace teller::import {

// Counts of what the assembler did, added to trace->stats by the importer.
struct LogAssemblerCounts {
  int64_t ts_inherited = 0;            // line had no ts; took the previous line's
  int64_t ts_missing = 0;              // no ts and no previous one: INT64_MIN
  int64_t traceback_continuation = 0;  // line joined the traceback above it
  int64_t year_rollover = 0;           // a year-less ts went back in time; year + 1
};

class LogAssembler {
 public:
  // year_from_file: let full timestamps in the stream ("2025-03-01 ...") set the year
  // used for year-less ones that follow (false when the user gave a year).
  LogAssembler(const LogParseContext& context, bool year_from_file);

  // Parses a sanitized line. known_ts_ns (INT64_MIN if none) is a timestamp the caller
  // already has for the line (a bundle's capture time); it wins over the parsed one.
  // Continuation lines of a traceback get the head's ts, level ERROR, pid and rank, and
  // format kTraceback; they stay separate rows. out->has_ts is false only when no ts is
  // known at all.
  void Next(std::string_view text, base::TimeNs known_ts_ns, ParsedLogLine* out);

  const LogAssemblerCounts& counts() const { return counts_; }

 private:
  enum class TracebackState : uint8_t { kNone, kFrames, kTail };
  // Lines after the exception line that may still belong to it ("CUDA kernel errors
  // might be asynchronously reported ...").
  static constexpr int kMaxTailLines = 8;
  static constexpr base::TimeNs kRolloverNs = 30LL * 86400 * 1'000'000'000;

  LogParseContext context_;
  bool year_from_file_;
  bool have_ts_ = false;
  base::TimeNs last_ts_ns_ = 0;
  bool have_inferred_ts_ = false;
  base::TimeNs last_inferred_ts_ns_ = 0;
  TracebackState traceback_ = TracebackState::kNone;
  int tail_lines_ = 0;
  bool head_has_ts_ = false;
  base::TimeNs head_ts_ns_ = 0;
  int64_t head_pid_ = -1;
  int32_t head_rank_ = -1;
  LogAssemblerCounts counts_;
};

}  // namespace teller::import
