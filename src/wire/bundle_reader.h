// BundleReader: reads a raw bundle (docs/format.md). Damage inside a readable file
// (a truncated or corrupt chunk, an unknown record kind, a malformed log line) is
// reported as a ReadIssue naming the counter, file and offset, and the rest of the
// file is used. Only files that cannot be read at all are a Status.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "wire/bundle_meta.h"
#include "wire/record_codec.h"
#include "wire/records.h"

namespace teller::wire {

// Counter names of the issues (import turns them into trace stats).
inline constexpr std::string_view kIssueChunkTruncated = "bundle_chunk_truncated";
inline constexpr std::string_view kIssueChunkBadHeader = "bundle_chunk_bad_header";
inline constexpr std::string_view kIssueChunkCrcMismatch = "bundle_chunk_crc_mismatch";
inline constexpr std::string_view kIssueChunkUnsupportedVersion =
    "bundle_chunk_unsupported_version";
inline constexpr std::string_view kIssueChunkUnknownKind = "bundle_chunk_unknown_kind";
inline constexpr std::string_view kIssueChunkMalformed = "bundle_chunk_malformed";
inline constexpr std::string_view kIssueRecordUnknownKind = "bundle_record_unknown_kind";
inline constexpr std::string_view kIssueRecordMalformed = "bundle_record_malformed";
inline constexpr std::string_view kIssueStringUnresolved = "bundle_string_unresolved";
inline constexpr std::string_view kIssueLogLineMalformed = "bundle_log_line_malformed";

struct ReadIssue {
  std::string_view counter;  // one of kIssue*
  std::string file;
  uint64_t offset = 0;      // byte offset (event files) or 1-based line (logs)
  int64_t count = 1;        // how many records/strings/lines this issue stands for
  uint64_t bytes_lost = 0;  // bytes of the file that could not be used
  bool data_loss = false;   // records were lost (not just skipped as unknown)
  std::string detail;
  std::string ToString() const;
};

struct EventFileStats {
  uint64_t chunks = 0;   // chunks read whole
  uint64_t records = 0;  // records yielded
  uint64_t strings = 0;  // string definitions read
};

// Parses the bytes of one event file. Every record goes to visitor, every damaged
// part to issues; never fails.
EventFileStats ParseEventFile(std::string_view data, const std::string& file_name,
                              RecordVisitor* visitor, std::vector<ReadIssue>* issues);
// Reads and parses one event file; a Status only when it cannot be read.
base::StatusOr<EventFileStats> ReadEventFile(const std::string& path, RecordVisitor* visitor,
                                             std::vector<ReadIssue>* issues);

// Parses lines of logs/*.jsonl; reuse one parser for many lines.
class LogLineParser {
 public:
  // Views in *out stay valid until the next Parse. Errors say which field is wrong.
  base::Status Parse(std::string_view line, LogLineRecord* out);

 private:
  std::string text_, stream_, host_, source_;
};

// One proc-<host>-<pid>/ folder.
struct ProcessDirectory {
  std::string name;  // proc-node0-1234
  std::string path;
  std::string host;                      // from the folder name
  int64_t pid = -1;                      // from the folder name, -1 when not a number
  std::vector<std::string> event_files;  // sorted paths of *.bin
};

class BundleReader {
 public:
  // Reads meta.json (required), lists process folders, logs and labels.json.
  static base::StatusOr<BundleReader> Open(const std::string& directory);

  const std::string& directory() const { return directory_; }
  const BundleMeta& meta() const { return meta_; }
  const std::string& meta_json() const { return meta_json_; }
  const std::optional<std::string>& labels_json() const { return labels_json_; }
  const std::vector<ProcessDirectory>& processes() const { return processes_; }
  const std::vector<std::string>& log_files() const { return log_files_; }

  // Reads every event file of processes()[index] in order.
  base::StatusOr<EventFileStats> ReadProcess(size_t index, RecordVisitor* visitor,
                                             std::vector<ReadIssue>* issues) const;
  // Calls on_line(record, file, line_number) for every line of every log file;
  // malformed lines become issues. A log file that cannot be read is a Status.
  using LogCallback =
      std::function<void(const LogLineRecord&, const std::string& file, int64_t line_number)>;
  base::Status ReadLogs(const LogCallback& on_line, std::vector<ReadIssue>* issues) const;

 private:
  std::string directory_;
  BundleMeta meta_;
  std::string meta_json_;
  std::optional<std::string> labels_json_;
  std::vector<ProcessDirectory> processes_;
  std::vector<std::string> log_files_;
};

}  // namespace teller::wire
