#include "import/log_assembler.h"

#include <climits>

namespace teller::import {

LogAssembler::LogAssembler(const LogParseContext& context, bool year_from_file)
    : context_(context), year_from_file_(year_from_file) {}

void LogAssembler::Next(std::string_view text, base::TimeNs known_ts_ns, ParsedLogLine* out) {
  *out = ParseLogLine(text, context_);

  // The year of year-less timestamps: from full timestamps seen earlier in the stream,
  // and one more when the clock jumps back by more than kRolloverNs (Dec 31 -> Jan 1).
  if (out->has_ts && out->year_inferred) {
    if (have_inferred_ts_ && out->ts_ns < last_inferred_ts_ns_ - kRolloverNs) {
      ++context_.year;
      ++counts_.year_rollover;
      *out = ParseLogLine(text, context_);
    }
    have_inferred_ts_ = true;
    last_inferred_ts_ns_ = out->ts_ns;
  } else if (out->has_ts && year_from_file_) {
    int year = YearOfTimeNs(out->ts_ns + int64_t{context_.utc_offset_minutes} * 60'000'000'000);
    if (year != context_.year) {
      context_.year = year;
      have_inferred_ts_ = false;
    }
  }

  const bool headerless =
      !out->has_ts && (out->format == LogFormat::kUnknown || out->format == LogFormat::kTraceback);
  if (traceback_ != TracebackState::kNone && headerless) {
    std::string_view body = out->message;
    bool joins = false;
    if (out->traceback_head) {
      joins = true;
      traceback_ = TracebackState::kFrames;
    } else if (IsTracebackFrameLine(body)) {
      joins = true;
    } else if (traceback_ == TracebackState::kFrames && IsExceptionLine(body)) {
      joins = true;
      traceback_ = TracebackState::kTail;
      tail_lines_ = 0;
    } else if (traceback_ == TracebackState::kTail && tail_lines_ < kMaxTailLines) {
      joins = true;
      ++tail_lines_;
    }
    if (joins) {
      out->has_ts = head_has_ts_;
      out->ts_ns = head_ts_ns_;
      if (known_ts_ns != INT64_MIN) {
        out->has_ts = true;
        out->ts_ns = known_ts_ns;
      }
      out->level = model::LogLevel::kError;
      if (out->pid < 0) out->pid = head_pid_;
      if (out->rank < 0) out->rank = head_rank_;
      out->format = LogFormat::kTraceback;
      ++counts_.traceback_continuation;
      return;
    }
    traceback_ = TracebackState::kNone;
  } else if (!headerless) {
    traceback_ = TracebackState::kNone;
  }

  if (known_ts_ns != INT64_MIN) {
    out->has_ts = true;
    out->ts_ns = known_ts_ns;
  } else if (!out->has_ts) {
    if (have_ts_) {
      out->has_ts = true;
      out->ts_ns = last_ts_ns_;
      ++counts_.ts_inherited;
    } else {
      ++counts_.ts_missing;
    }
  }
  if (out->has_ts) {
    have_ts_ = true;
    last_ts_ns_ = out->ts_ns;
  }
  if (out->traceback_head) {
    traceback_ = TracebackState::kFrames;
    tail_lines_ = 0;
    head_has_ts_ = out->has_ts;
    head_ts_ns_ = out->ts_ns;
    head_pid_ = out->pid;
    head_rank_ = out->rank;
  }
}

}  // namespace teller::import
