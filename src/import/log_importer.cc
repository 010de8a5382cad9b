// ImportLogFile and ParseLogsOfTrace: service logs into trace->logs, one row per line.
#include <chrono>
#include <climits>
#include <map>
#include <tuple>

#include "base/file_util.h"
#include "import/importer.h"
#include "import/log_assembler.h"
#include "import/log_line_parser.h"
#include "import/template_miner.h"

namespace teller::import {
namespace {

using model::StatSeverity;

constexpr size_t kChunkBytes = 1 << 20;
// Longer lines keep their first kMaxLineBytes and count as log_line_truncated.
constexpr size_t kMaxLineBytes = 1 << 16;
// Event times before this are not wall-clock times (relative Kineto traces).
constexpr int kMinPlausibleYear = 2000;

// Per-import counts, added to trace->stats once at the end (the map is not per line).
struct LineCounts {
  int64_t lines = 0;
  int64_t unknown_format = 0;
  int64_t blank = 0;
  int64_t truncated = 0;
  int64_t invalid_bytes = 0;
  int64_t ansi_stripped = 0;
  int64_t carriage_return = 0;

  void Count(const ParsedLogLine& parsed, std::string_view text, uint8_t flags) {
    ++lines;
    if (parsed.format == LogFormat::kUnknown) {
      bool blank_line = text.find_first_not_of(" \t") == std::string_view::npos;
      ++(blank_line ? blank : unknown_format);
    }
    invalid_bytes += (flags & kSanitizeInvalidBytes) != 0;
    ansi_stripped += (flags & kSanitizeAnsiStripped) != 0;
    carriage_return += (flags & kSanitizeCarriageReturn) != 0;
  }
};

void AddStats(const LineCounts& counts, const LogAssemblerCounts& assembled, model::Stats* stats) {
  auto add = [stats](const model::StatDef& stat, int64_t value) {
    if (value > 0) stats->Increment(stat, value);
  };
  add(model::stat::kLogLines, counts.lines);
  add(model::stat::kLogLineUnknownFormat, counts.unknown_format);
  add(model::stat::kLogLineBlank, counts.blank);
  add(model::stat::kLogLineTruncated, counts.truncated);
  add(model::stat::kLogLineInvalidBytes, counts.invalid_bytes);
  add(model::stat::kLogLineAnsiStripped, counts.ansi_stripped);
  add(model::stat::kLogLineCarriageReturn, counts.carriage_return);
  add(model::stat::kLogLineTsInherited, assembled.ts_inherited);
  add(model::stat::kLogLineNoTs, assembled.ts_missing);
  add(model::stat::kLogLineTracebackContinuation, assembled.traceback_continuation);
  add(model::stat::kLogYearRollover, assembled.year_rollover);
}

// The year for timestamps that print none: the user's, else the year of the trace's
// earliest event when that is a wall-clock time, else the current year.
int ResolveYear(const ImportOptions& options, const model::Trace& trace) {
  if (options.year_hint > 0) return options.year_hint;
  const int64_t offset_ns = int64_t{options.utc_offset_minutes} * 60'000'000'000;
  if (trace.events.size() > 0) {
    base::TimeNs earliest = INT64_MAX;
    for (base::TimeNs start : trace.events.start_ns) earliest = std::min(earliest, start);
    int year = YearOfTimeNs(earliest + offset_ns);
    if (year >= kMinPlausibleYear) return year;
  }
  auto now = std::chrono::system_clock::now().time_since_epoch();
  return YearOfTimeNs(std::chrono::duration_cast<std::chrono::nanoseconds>(now).count() +
                      offset_ns);
}

LogParseContext MakeContext(const ImportOptions& options, const model::Trace& trace) {
  LogParseContext context;
  context.year = ResolveYear(options, trace);
  context.utc_offset_minutes = options.utc_offset_minutes;
  return context;
}

// Appends one raw line of a log file.
class LineSink {
 public:
  LineSink(const ImportOptions& options, model::Trace* trace, base::StringId source)
      : options_(options),
        trace_(trace),
        source_(source),
        assembler_(MakeContext(options, *trace), options.year_hint <= 0) {
    miner_.LoadFrom(*trace);
  }

  void Add(std::string_view raw) {
    ++line_number_;
    if (raw.size() > kMaxLineBytes) {
      raw = raw.substr(0, kMaxLineBytes);
      ++counts_.truncated;
    }
    uint8_t flags;
    std::string_view text = SanitizeLogLine(raw, &scratch_, &flags);
    ParsedLogLine parsed;
    assembler_.Next(text, INT64_MIN, &parsed);
    counts_.Count(parsed, text, flags);
    base::StringId text_id = trace_->strings.Intern(text);
    base::StringId request = parsed.request_id.empty() ? base::StringPool::kEmpty
                                                       : trace_->strings.Intern(parsed.request_id);
    model::TemplateId template_id = miner_.Add(parsed.message);
    int32_t rank = parsed.rank >= 0 ? parsed.rank : options_.rank_hint;
    trace_->AppendLog(parsed.has_ts ? parsed.ts_ns : INT64_MIN, model::ProcessIndex::Invalid(),
                      parsed.pid, rank, parsed.level, model::LogStream::kFile, request, template_id,
                      text_id, source_, line_number_);
  }

  void CountTruncated() { ++counts_.truncated; }

  void Finish() {
    miner_.StoreTo(trace_);
    AddStats(counts_, assembler_.counts(), &trace_->stats);
  }

 private:
  const ImportOptions& options_;
  model::Trace* trace_;
  base::StringId source_;
  LogAssembler assembler_;
  TemplateMiner miner_;
  LineCounts counts_;
  int64_t line_number_ = 0;
  std::string scratch_;
};

}  // namespace

base::Status ImportLogFile(const std::string& path, const ImportOptions& options,
                           model::Trace* trace) {
  TELLER_ASSIGN_OR_RETURN(std::unique_ptr<base::ChunkReader> reader, base::ChunkReader::Open(path));
  LineSink sink(options, trace, trace->strings.Intern(path));
  std::string buffer;
  size_t pos = 0;
  bool discarding = false;  // inside the rest of a line that was already cut at kMaxLineBytes
  bool end = false;
  while (!end) {
    buffer.erase(0, pos);
    pos = 0;
    base::StatusOr<size_t> got = reader->Read(&buffer, kChunkBytes);
    if (!got.ok()) {
      if (got.status().code() != base::StatusCode::kDataLoss) {
        return got.status().WithContext("reading log file");
      }
      // A truncated gzip stream: use what was inflated, then stop.
      trace->stats.Increment(model::stat::kLogGzipTruncated);
      end = true;
    } else if (*got == 0) {
      end = true;
    }
    for (;;) {
      size_t newline = buffer.find('\n', pos);
      if (newline == std::string::npos) break;
      if (!discarding) sink.Add(std::string_view(buffer).substr(pos, newline - pos));
      discarding = false;
      pos = newline + 1;
    }
    size_t rest = buffer.size() - pos;
    if (discarding) {
      pos = buffer.size();
    } else if (rest > kMaxLineBytes) {
      sink.Add(std::string_view(buffer).substr(pos, kMaxLineBytes + 1));  // counted as truncated
      discarding = true;
      pos = buffer.size();
    } else if (end && rest > 0) {
      sink.Add(std::string_view(buffer).substr(pos));  // last line without a newline
    }
    base::ReportProgress(options.progress, "logs", reader->file_offset(), reader->file_size());
  }
  sink.Finish();
  if (options.progress) options.progress->Finish("logs");
  trace->meta.sources.push_back(path);
  trace->meta.AddInputFormat(model::TraceFormat::kLogs);
  return base::OkStatus();
}

void ParseLogsOfTrace(const ImportOptions& options, model::Trace* trace) {
  model::LogTable& logs = trace->logs;
  TemplateMiner miner;
  miner.LoadFrom(*trace);
  const LogParseContext context = MakeContext(options, *trace);
  // One assembler per stream: rows of several processes interleave in a bundle.
  using StreamKey = std::tuple<uint32_t, int64_t, uint8_t>;
  std::map<StreamKey, LogAssembler> assemblers;
  LineCounts counts;
  LogAssemblerCounts assembled;
  std::string scratch;
  bool any = false;
  for (size_t row = 0; row < logs.size(); ++row) {
    if (logs.template_id[row].valid()) continue;
    any = true;
    std::string_view raw = trace->str(logs.text[row]);
    uint8_t flags;
    std::string_view text = SanitizeLogLine(raw, &scratch, &flags);
    StreamKey key(logs.source[row].value(), logs.os_pid[row],
                  static_cast<uint8_t>(logs.stream[row]));
    auto it = assemblers.find(key);
    if (it == assemblers.end()) {
      it = assemblers.emplace(key, LogAssembler(context, options.year_hint <= 0)).first;
    }
    ParsedLogLine parsed;
    it->second.Next(text, logs.ts_ns[row], &parsed);
    counts.Count(parsed, text, flags);
    if (logs.ts_ns[row] == INT64_MIN && parsed.has_ts) logs.ts_ns[row] = parsed.ts_ns;
    if (logs.level[row] == model::LogLevel::kUnknown) logs.level[row] = parsed.level;
    if (logs.os_pid[row] < 0) logs.os_pid[row] = parsed.pid;
    if (logs.rank[row] < 0) logs.rank[row] = parsed.rank >= 0 ? parsed.rank : options.rank_hint;
    if (logs.request[row] == base::StringPool::kEmpty && !parsed.request_id.empty()) {
      logs.request[row] = trace->strings.Intern(parsed.request_id);
    }
    logs.template_id[row] = miner.Add(parsed.message);
  }
  if (!any) return;
  for (const auto& [key, assembler] : assemblers) {
    const LogAssemblerCounts& c = assembler.counts();
    assembled.ts_inherited += c.ts_inherited;
    assembled.ts_missing += c.ts_missing;
    assembled.traceback_continuation += c.traceback_continuation;
    assembled.year_rollover += c.year_rollover;
  }
  miner.StoreTo(trace);
  AddStats(counts, assembled, &trace->stats);
}

}  // namespace teller::import
