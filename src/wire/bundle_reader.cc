#include "wire/bundle_reader.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "base/file_util.h"
#include "base/time.h"

namespace teller::wire {
namespace {

namespace fs = std::filesystem;

uint16_t LoadU16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t LoadU32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

// Per-file tally of record-level problems, reported once per file.
struct Tally {
  int64_t count = 0;
  uint64_t first_offset = 0;
  void Add(uint64_t offset, int64_t n = 1) {
    if (count == 0) first_offset = offset;
    count += n;
  }
};

class EventFileParser {
 public:
  EventFileParser(std::string_view data, const std::string& file_name, RecordVisitor* visitor,
                  std::vector<ReadIssue>* issues)
      : data_(data),
        bytes_(reinterpret_cast<const uint8_t*>(data.data())),
        file_(file_name),
        visitor_(visitor),
        issues_(issues) {}

  EventFileStats Run() {
    uint64_t offset = 0;
    const uint64_t size = data_.size();
    while (offset < size) {
      uint64_t left = size - offset;
      if (left < kChunkHeaderBytes) {
        Issue(kIssueChunkTruncated, offset, left, true,
              fmt::format("{} bytes left, a chunk header takes {}", left, kChunkHeaderBytes));
        break;
      }
      ChunkHeader header;
      HeaderCheck check = DecodeChunkHeader(bytes_ + offset, &header);
      if (check == HeaderCheck::kOk && (header.header_bytes < kChunkHeaderBytes ||
                                        header.payload_bytes > kMaxChunkPayloadBytes)) {
        check = HeaderCheck::kBadHeaderCrc;
      }
      if (check != HeaderCheck::kOk) {
        uint64_t next = FindNextHeader(offset + 1);
        Issue(
            kIssueChunkBadHeader, offset, next - offset, true,
            fmt::format("{}; skipped {} bytes to the next chunk header",
                        check == HeaderCheck::kBadMagic ? "no chunk magic" : "header CRC mismatch",
                        next - offset));
        offset = next;
        continue;
      }
      uint64_t chunk_end = offset + header.header_bytes + header.payload_bytes;
      if (chunk_end > size) {
        Issue(kIssueChunkTruncated, offset, left, true,
              fmt::format("chunk {} of {} records needs {} bytes, {} left", header.sequence,
                          header.record_count, chunk_end - offset, left));
        break;
      }
      std::string_view payload = data_.substr(offset + header.header_bytes, header.payload_bytes);
      if (header.major != kFormatMajor) {
        Issue(kIssueChunkUnsupportedVersion, offset, chunk_end - offset, true,
              fmt::format("chunk format {}.{}, this reader reads {}.x", header.major, header.minor,
                          kFormatMajor));
      } else if (Crc32(payload) != header.payload_crc32) {
        Issue(kIssueChunkCrcMismatch, offset, chunk_end - offset, true,
              fmt::format("payload CRC mismatch in chunk {} ({} records lost)", header.sequence,
                          header.record_count));
      } else if (header.kind == ChunkKind::kStrings) {
        ParseStrings(header, payload, offset + header.header_bytes);
      } else if (header.kind == ChunkKind::kRecords) {
        ParseRecords(header, payload, offset + header.header_bytes);
      } else {
        Issue(kIssueChunkUnknownKind, offset, 0, false,
              fmt::format("chunk kind {} is newer than this reader; skipped",
                          static_cast<int>(header.kind)));
      }
      offset = chunk_end;
    }
    Report(kIssueRecordUnknownKind, unknown_, false,
           "records of kinds newer than this reader skipped");
    Report(kIssueRecordMalformed, malformed_, true, "records shorter than their kind's fields");
    Report(kIssueStringUnresolved, unresolved_, false,
           "string ids with no definition read as empty strings");
    return stats_;
  }

 private:
  uint64_t FindNextHeader(uint64_t from) const {
    std::string_view magic(reinterpret_cast<const char*>(kChunkMagic), 4);
    while (true) {
      size_t at = data_.find(magic, from);
      if (at == std::string_view::npos) return data_.size();
      ChunkHeader header;
      if (data_.size() - at < kChunkHeaderBytes ||
          DecodeChunkHeader(bytes_ + at, &header) == HeaderCheck::kOk) {
        return at;
      }
      from = at + 1;
    }
  }

  void ParseStrings(const ChunkHeader& header, std::string_view payload, uint64_t base) {
    const auto* p = reinterpret_cast<const uint8_t*>(payload.data());
    size_t at = 0;
    uint32_t n = 0;
    while (at < payload.size()) {
      if (payload.size() - at < 8) break;
      uint32_t id = LoadU32(p + at);
      uint32_t length = LoadU32(p + at + 4);
      if (length > payload.size() - at - 8) break;
      if (!strings_.Define(id, payload.substr(at + 8, length))) break;
      at += 8 + length;
      ++n;
    }
    stats_.strings += n;
    if (at != payload.size() || n != header.record_count) {
      Issue(kIssueChunkMalformed, base + at, payload.size() - at, true,
            fmt::format("strings chunk holds {} valid definitions, header says {}", n,
                        header.record_count));
    }
    ++stats_.chunks;
  }

  void ParseRecords(const ChunkHeader& header, std::string_view payload, uint64_t base) {
    const auto* p = reinterpret_cast<const uint8_t*>(payload.data());
    size_t at = 0;
    uint32_t n = 0;
    while (at < payload.size()) {
      if (payload.size() - at < kRecordHeaderBytes) break;
      uint16_t kind = LoadU16(p + at);
      auto clock = static_cast<ClockDomain>(p[at + 2]);
      uint32_t length = LoadU32(p + at + 4);
      if (length > payload.size() - at - kRecordHeaderBytes) break;
      std::string_view body = payload.substr(at + kRecordHeaderBytes, length);
      switch (DecodeRecord(kind, clock, body, strings_, &scratch_, visitor_, &unresolved_count_)) {
        case DecodeResult::kOk:
          ++stats_.records;
          break;
        case DecodeResult::kUnknownKind:
          unknown_.Add(base + at);
          break;
        case DecodeResult::kMalformed:
          malformed_.Add(base + at);
          break;
      }
      if (unresolved_count_ > 0) {
        unresolved_.Add(base + at, static_cast<int64_t>(unresolved_count_));
        unresolved_count_ = 0;
      }
      at += kRecordHeaderBytes + length;
      ++n;
    }
    if (at != payload.size() || n != header.record_count) {
      Issue(kIssueChunkMalformed, base + at, payload.size() - at, true,
            fmt::format("records chunk holds {} whole records, header says {}", n,
                        header.record_count));
    }
    ++stats_.chunks;
  }

  void Issue(std::string_view counter, uint64_t offset, uint64_t bytes_lost, bool data_loss,
             std::string detail) {
    ReadIssue issue;
    issue.counter = counter;
    issue.file = file_;
    issue.offset = offset;
    issue.bytes_lost = bytes_lost;
    issue.data_loss = data_loss;
    issue.detail = std::move(detail);
    issues_->push_back(std::move(issue));
  }

  void Report(std::string_view counter, const Tally& tally, bool data_loss, const char* what) {
    if (tally.count == 0) return;
    Issue(counter, tally.first_offset, 0, data_loss,
          fmt::format("{} {} (first at this offset)", tally.count, what));
    issues_->back().count = tally.count;
  }

  std::string_view data_;
  const uint8_t* bytes_;
  const std::string& file_;
  RecordVisitor* visitor_;
  std::vector<ReadIssue>* issues_;
  StringTable strings_;
  DecodeScratch scratch_;
  EventFileStats stats_;
  Tally unknown_, malformed_, unresolved_;
  uint64_t unresolved_count_ = 0;
};

// proc-<host>-<pid>: host may hold '-', so the pid is after the last one.
void ParseProcessDirName(const std::string& name, std::string* host, int64_t* pid) {
  std::string rest = name.substr(5);
  size_t dot = rest.rfind('.');  // proc-h-12.2 when a pid was reused
  size_t dash = rest.rfind('-');
  std::string pid_text = dash == std::string::npos ? rest : rest.substr(dash + 1);
  if (dot != std::string::npos && dash != std::string::npos && dot > dash) {
    pid_text = rest.substr(dash + 1, dot - dash - 1);
  }
  *host = dash == std::string::npos ? std::string() : rest.substr(0, dash);
  auto parsed = base::ParseInt64(pid_text);
  *pid = parsed.ok() ? *parsed : -1;
}

}  // namespace

std::string ReadIssue::ToString() const {
  return fmt::format("{} at offset {}: {}: {}", file, offset, counter, detail);
}

EventFileStats ParseEventFile(std::string_view data, const std::string& file_name,
                              RecordVisitor* visitor, std::vector<ReadIssue>* issues) {
  return EventFileParser(data, file_name, visitor, issues).Run();
}

base::StatusOr<EventFileStats> ReadEventFile(const std::string& path, RecordVisitor* visitor,
                                             std::vector<ReadIssue>* issues) {
  TELLER_ASSIGN_OR_RETURN(std::string data, base::ReadFile(path));
  return ParseEventFile(data, path, visitor, issues);
}

base::Status LogLineParser::Parse(std::string_view line, LogLineRecord* out) {
  using Json = nlohmann::json;
  Json value = Json::parse(line.begin(), line.end(), nullptr, false);
  if (value.is_discarded()) return base::InvalidArgument("not valid JSON");
  if (!value.is_object()) return base::InvalidArgument("expected a JSON object");
  *out = LogLineRecord();
  auto integer = [&](const char* key, bool required, int64_t* dst) -> base::Status {
    auto it = value.find(key);
    if (it == value.end() || it->is_null()) {
      return required ? base::InvalidArgument("{}: missing, expected an integer", key)
                      : base::OkStatus();
    }
    if (!it->is_number_integer()) return base::InvalidArgument("{}: expected an integer", key);
    *dst = it->get<int64_t>();
    return base::OkStatus();
  };
  auto string = [&](const char* key, bool required, std::string* dst) -> base::Status {
    dst->clear();
    auto it = value.find(key);
    if (it == value.end() || it->is_null()) {
      return required ? base::InvalidArgument("{}: missing, expected a string", key)
                      : base::OkStatus();
    }
    if (!it->is_string()) return base::InvalidArgument("{}: expected a string", key);
    *dst = it->get<std::string>();
    return base::OkStatus();
  };
  TELLER_RETURN_IF_ERROR(integer("ts_ns", true, &out->ts_ns));
  TELLER_RETURN_IF_ERROR(integer("pid", false, &out->pid));
  TELLER_RETURN_IF_ERROR(string("text", true, &text_));
  TELLER_RETURN_IF_ERROR(string("stream", false, &stream_));
  TELLER_RETURN_IF_ERROR(string("host", false, &host_));
  TELLER_RETURN_IF_ERROR(string("source", false, &source_));
  int64_t rank = -1;
  TELLER_RETURN_IF_ERROR(integer("rank", false, &rank));
  out->rank = static_cast<int32_t>(rank);
  TELLER_RETURN_IF_ERROR(integer("line", false, &out->line));
  std::string clock;
  TELLER_RETURN_IF_ERROR(string("clock", false, &clock));
  if (clock.empty() || clock == "realtime") {
    out->clock = ClockDomain::kRealtime;
  } else if (clock == "monotonic") {
    out->clock = ClockDomain::kMonotonic;
  } else {
    return base::InvalidArgument("clock: expected realtime or monotonic, got \"{}\"", clock);
  }
  out->text = text_;
  out->stream = stream_;
  out->host = host_;
  out->source = source_;
  return base::OkStatus();
}

base::StatusOr<BundleReader> BundleReader::Open(const std::string& directory) {
  std::error_code ec;
  if (!fs::is_directory(directory, ec)) {
    return base::NotFound("{}: not a directory (a bundle is a directory with meta.json)",
                          directory);
  }
  BundleReader reader;
  reader.directory_ = directory;
  std::string meta_path = (fs::path(directory) / "meta.json").string();
  if (!fs::exists(meta_path, ec)) {
    return base::NotFound("{}: missing; every bundle starts with meta.json", meta_path);
  }
  TELLER_ASSIGN_OR_RETURN(reader.meta_json_, base::ReadFile(meta_path));
  TELLER_ASSIGN_OR_RETURN(reader.meta_, ParseBundleMeta(reader.meta_json_, meta_path));
  std::string labels_path = (fs::path(directory) / "labels.json").string();
  if (fs::exists(labels_path, ec)) {
    TELLER_ASSIGN_OR_RETURN(std::string labels, base::ReadFile(labels_path));
    reader.labels_json_ = std::move(labels);
  }
  for (const fs::directory_entry& entry : fs::directory_iterator(directory, ec)) {
    std::string name = entry.path().filename().string();
    if (!entry.is_directory(ec) || name.rfind("proc-", 0) != 0) continue;
    ProcessDirectory process;
    process.name = name;
    process.path = entry.path().string();
    ParseProcessDirName(name, &process.host, &process.pid);
    for (const fs::directory_entry& file : fs::directory_iterator(entry.path(), ec)) {
      if (file.is_regular_file(ec) && file.path().extension() == ".bin") {
        process.event_files.push_back(file.path().string());
      }
    }
    std::sort(process.event_files.begin(), process.event_files.end());
    reader.processes_.push_back(std::move(process));
  }
  if (ec) return base::IoError("{}: cannot list: {}", directory, ec.message());
  std::sort(reader.processes_.begin(), reader.processes_.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  fs::path logs = fs::path(directory) / "logs";
  if (fs::is_directory(logs, ec)) {
    for (const fs::directory_entry& file : fs::directory_iterator(logs, ec)) {
      if (file.is_regular_file(ec) && file.path().extension() == ".jsonl") {
        reader.log_files_.push_back(file.path().string());
      }
    }
    std::sort(reader.log_files_.begin(), reader.log_files_.end());
  }
  return reader;
}

base::StatusOr<EventFileStats> BundleReader::ReadProcess(size_t index, RecordVisitor* visitor,
                                                         std::vector<ReadIssue>* issues) const {
  EventFileStats total;
  for (const std::string& path : processes_.at(index).event_files) {
    TELLER_ASSIGN_OR_RETURN(EventFileStats stats, ReadEventFile(path, visitor, issues));
    total.chunks += stats.chunks;
    total.records += stats.records;
    total.strings += stats.strings;
  }
  return total;
}

base::Status BundleReader::ReadLogs(const LogCallback& on_line,
                                    std::vector<ReadIssue>* issues) const {
  LogLineParser parser;
  LogLineRecord record;
  for (const std::string& path : log_files_) {
    TELLER_ASSIGN_OR_RETURN(std::string text, base::ReadFile(path));
    Tally bad;
    std::string first_error;
    int64_t line_number = 0;
    size_t at = 0;
    while (at < text.size()) {
      size_t end = text.find('\n', at);
      if (end == std::string::npos) end = text.size();
      std::string_view line(text.data() + at, end - at);
      at = end + 1;
      ++line_number;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
      base::Status status = parser.Parse(line, &record);
      if (!status.ok()) {
        if (bad.count == 0) first_error = status.message();
        bad.Add(static_cast<uint64_t>(line_number));
        continue;
      }
      on_line(record, path, line_number);
    }
    if (bad.count > 0) {
      ReadIssue issue;
      issue.counter = kIssueLogLineMalformed;
      issue.file = path;
      issue.offset = bad.first_offset;
      issue.count = bad.count;
      issue.data_loss = true;
      issue.detail = fmt::format("{} malformed lines; first at line {}: {}", bad.count,
                                 bad.first_offset, first_error);
      issues->push_back(std::move(issue));
    }
  }
  return base::OkStatus();
}

}  // namespace teller::wire
