#include "wire/bundle_writer.h"

#include "base/json_text.h"

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "base/file_util.h"

namespace teller::wire {
namespace {

bool IsPlainName(std::string_view name) {
  if (name.empty() || name == "." || name == "..") return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// Length of a valid UTF-8 sequence at text[i], or 0.
}  // namespace

ClockPair SampleHostClocks() {
  timespec real{}, mono{};
  clock_gettime(CLOCK_REALTIME, &real);
  clock_gettime(CLOCK_MONOTONIC, &mono);
  ClockPair pair;
  pair.realtime_ns = static_cast<int64_t>(real.tv_sec) * 1000000000 + real.tv_nsec;
  pair.monotonic_ns = static_cast<int64_t>(mono.tv_sec) * 1000000000 + mono.tv_nsec;
  return pair;
}

// ---- ProcessWriter ----

ProcessWriter::ProcessWriter(std::string directory, const ProcessInfoRecord& info,
                             WriterOptions options)
    : directory_(std::move(directory)), options_(options) {
  if (options_.chunk_bytes < 256) options_.chunk_bytes = 256;
  KeepProcessInfo(info);
  if (ring()) AddSegment(SampleHostClocks().monotonic_ns);
  status_ = Append(info);
}

void ProcessWriter::KeepProcessInfo(const ProcessInfoRecord& info) {
  // The caller's strings may not outlive the call, or may be info_'s own: copied first.
  std::string host(info.host), name(info.name), command(info.command),
      rank_source(info.rank_source);
  info_ = info;
  info_host_ = std::move(host);
  info_name_ = std::move(name);
  info_command_ = std::move(command);
  info_rank_source_ = std::move(rank_source);
  info_.host = info_host_;
  info_.name = info_name_;
  info_.command = info_command_;
  info_.rank_source = info_rank_source_;
}

base::Status ProcessWriter::Append(const ProcessInfoRecord& r) {
  if (!r.rank_source.empty()) NeedMinor(kMinorRankSource);
  return AppendImpl(r);
}

base::Status ProcessWriter::Restate(const ProcessInfoRecord& info) {
  KeepProcessInfo(info);
  return Append(info_);
}

base::Status ProcessWriter::Append(const ThreadInfoRecord& r) {
  if (ring()) thread_names_[r.tid] = r.name;
  return AppendImpl(r);
}

ProcessWriter::~ProcessWriter() { (void)Close(); }

base::Status ProcessWriter::Append(const HostRangeRecord& r) {
  if (r.args.size() > UINT16_MAX) {
    ++counters_.records_dropped;
    return base::InvalidArgument("{}: host range '{}' has {} args, at most {} fit", directory_,
                                 r.name, r.args.size(), UINT16_MAX);
  }
  return AppendImpl(r);
}

base::Status ProcessWriter::AppendRangeBatch(int64_t tid, ClockDomain clock,
                                             std::string_view entries) {
  if (!status_.ok()) {
    ++counters_.records_dropped;
    return status_;
  }
  if (entries.empty()) return base::OkStatus();
  EncodeRangeBatch(tid, clock, entries, &records_);
  NeedMinor(kMinorRangeBatch);
  ++record_count_;
  ++counters_.records;
  if (records_.size() + strings_.size() >= options_.chunk_bytes) return Flush();
  return base::OkStatus();
}

base::Status ProcessWriter::AppendTscRangeBatch(const TscRangeBatchHeader& header,
                                                const TscSample* samples, size_t sample_count,
                                                std::string_view entries) {
  if (!status_.ok()) {
    ++counters_.records_dropped;
    return status_;
  }
  if (entries.empty()) return base::OkStatus();
  if (sample_count > kMaxTscRangeBatchSamples) {
    return base::InvalidArgument("TscRangeBatch with {} samples, at most {}", sample_count,
                                 kMaxTscRangeBatchSamples);
  }
  EncodeTscRangeBatch(header, ClockDomain::kMonotonic, samples, sample_count, entries, &records_);
  NeedMinor(kMinorTscRangeBatch);
  ++record_count_;
  ++counters_.records;
  if (records_.size() + strings_.size() >= options_.chunk_bytes) return Flush();
  return base::OkStatus();
}

uint32_t ProcessWriter::Intern(std::string_view text) {
  auto it = string_ids_.find(text);
  if (it != string_ids_.end()) return it->second;
  uint32_t id = next_string_id_++;
  string_ids_.emplace(std::string(text), id);
  string_index_bytes_ += text.size() + 48;  // key bytes + node overhead, roughly
  EncodeStringDefinition(id, text, &strings_);
  ++string_count_;
  return id;
}

base::Status ProcessWriter::OpenNextFile() {
  if (file_) {
    std::fclose(file_);
    file_ = nullptr;
  }
  file_path_ = directory_ + "/" + fmt::format("events-{:06d}.bin", file_index_++);
  file_ = std::fopen(file_path_.c_str(), "wb");
  if (!file_) {
    return base::IoError("{}: cannot create: {}", file_path_, std::strerror(errno));
  }
  file_bytes_ = 0;
  sequence_ = 0;
  ++counters_.files;
  return base::OkStatus();
}

base::Status ProcessWriter::WriteChunk(ChunkKind kind, uint32_t count, const std::string& payload) {
  ChunkHeader header;
  header.kind = kind;
  header.record_count = count;
  header.payload_bytes = static_cast<uint32_t>(payload.size());
  header.payload_crc32 = Crc32(payload);
  header.sequence = sequence_++;
  // Chunks without 1.1 or 1.2 records stay 1.0, byte for byte what a 1.0 writer wrote.
  header.minor = kind == ChunkKind::kRecords ? records_minor_ : 0;
  header_.clear();
  EncodeChunkHeader(header, &header_);
  if (ring()) {
    Segment& segment = segments_.back();
    segment.bytes += header_;
    segment.bytes += payload;
    ring_bytes_ += header_.size() + payload.size();
    ++counters_.chunks;
    return base::OkStatus();
  }
  if (std::fwrite(header_.data(), 1, header_.size(), file_) != header_.size() ||
      std::fwrite(payload.data(), 1, payload.size(), file_) != payload.size()) {
    return base::IoError("{}: write failed at offset {}: {}", file_path_, file_bytes_,
                         std::strerror(errno));
  }
  file_bytes_ += header_.size() + payload.size();
  counters_.bytes_written += header_.size() + payload.size();
  ++counters_.chunks;
  return base::OkStatus();
}

base::Status ProcessWriter::Flush() {
  if (!status_.ok()) return status_;
  if (record_count_ == 0 && string_count_ == 0) {
    if (ring()) AgeRing(SampleHostClocks().monotonic_ns);
    return base::OkStatus();
  }
  if (!file_ && !ring()) {
    status_ = OpenNextFile();
    if (!status_.ok()) return status_;
  }
  // Strings first: they stay readable even if the records chunk after them is lost.
  if (string_count_ > 0) status_ = WriteChunk(ChunkKind::kStrings, string_count_, strings_);
  if (status_.ok() && record_count_ > 0) {
    status_ = WriteChunk(ChunkKind::kRecords, record_count_, records_);
  }
  if (status_.ok() && file_ && std::fflush(file_) != 0) {
    status_ = base::IoError("{}: flush failed: {}", file_path_, std::strerror(errno));
  }
  if (!status_.ok()) {
    counters_.records_dropped += record_count_;
    return status_;
  }
  records_.clear();
  records_minor_ = 0;
  strings_.clear();
  record_count_ = 0;
  string_count_ = 0;
  if (ring()) {
    AgeRing(SampleHostClocks().monotonic_ns);
    return status_;
  }
  bool roll = file_bytes_ >= options_.max_file_bytes;
  if (roll || string_index_bytes_ > options_.max_string_index_bytes) {
    // A new file defines its strings again; so does a forgotten index.
    if (!roll) ++counters_.string_index_resets;
    ResetStrings();
  }
  if (roll) status_ = OpenNextFile();
  return status_;
}

void ProcessWriter::ResetStrings() {
  string_ids_.clear();
  string_index_bytes_ = 0;
  ++string_epoch_;
}

void ProcessWriter::AddSegment(int64_t now_ns) {
  segments_.push_back({now_ns, {}});
  // A segment ends past a quarter of the cap by at most one chunk: sized once, it never
  // doubles (untouched pages of a large allocation cost no memory).
  segments_.back().bytes.reserve(options_.ring_max_bytes / 4 + 2 * options_.chunk_bytes);
}

void ProcessWriter::StartSegment(int64_t now_ns) {
  AddSegment(now_ns);
  ResetStrings();
  // Each segment reads alone: it names its process and threads again.
  EncodeRecord(info_, this, &records_);
  if (!info_.rank_source.empty()) NeedMinor(kMinorRankSource);
  ++record_count_;
  for (const auto& [tid, name] : thread_names_) {
    EncodeRecord(ThreadInfoRecord{tid, name}, this, &records_);
    ++record_count_;
  }
}

void ProcessWriter::AgeRing(int64_t now_ns) {
  const Segment& newest = segments_.back();
  if (now_ns - newest.start_ns >= options_.ring_ns / 4 ||
      newest.bytes.size() >= options_.ring_max_bytes / 4) {
    StartSegment(now_ns);
  }
  while (segments_.size() > 1 && (segments_[1].start_ns <= now_ns - options_.ring_ns ||
                                  ring_bytes_ > options_.ring_max_bytes)) {
    ring_bytes_ -= segments_.front().bytes.size();
    counters_.ring_bytes_dropped += segments_.front().bytes.size();
    ++counters_.ring_segments_dropped;
    segments_.pop_front();
  }
}

base::Status ProcessWriter::Persist() {
  TELLER_RETURN_IF_ERROR(Flush());
  if (!ring()) return status_;
  for (const Segment& segment : segments_) {
    if (segment.bytes.empty()) continue;
    status_ = OpenNextFile();
    if (status_.ok() &&
        std::fwrite(segment.bytes.data(), 1, segment.bytes.size(), file_) != segment.bytes.size()) {
      status_ = base::IoError("{}: write failed: {}", file_path_, std::strerror(errno));
    }
    if (file_ && std::fclose(file_) != 0 && status_.ok()) {
      status_ = base::IoError("{}: close failed: {}", file_path_, std::strerror(errno));
    }
    file_ = nullptr;
    if (!status_.ok()) return status_;
    counters_.bytes_written += segment.bytes.size();
  }
  segments_.clear();
  ring_bytes_ = 0;
  StartSegment(SampleHostClocks().monotonic_ns);
  return status_;
}

base::Status ProcessWriter::Close() {
  if (closed_) return status_;
  base::Status status = Persist();
  closed_ = true;
  if (file_) {
    if (std::fclose(file_) != 0 && status.ok()) {
      status = base::IoError("{}: close failed: {}", file_path_, std::strerror(errno));
    }
    file_ = nullptr;
  }
  if (status_.ok()) status_ = status;
  return status;
}

// ---- LogWriter ----

LogWriter::LogWriter(std::string path) : path_(std::move(path)) {
  file_ = std::fopen(path_.c_str(), "ab");
  if (!file_) status_ = base::IoError("{}: cannot create: {}", path_, std::strerror(errno));
}

LogWriter::~LogWriter() { (void)Close(); }

base::Status LogWriter::Append(const LogLineRecord& l) {
  if (!status_.ok()) return status_;
  line_.clear();
  line_.append("{\"ts_ns\":").append(std::to_string(l.ts_ns));
  if (l.clock == ClockDomain::kMonotonic) line_.append(",\"clock\":\"monotonic\"");
  line_.append(",\"pid\":").append(std::to_string(l.pid));
  line_.append(",\"stream\":");
  base::AppendJsonString(l.stream.empty() ? std::string_view("stdout") : l.stream, &line_);
  line_.append(",\"text\":");
  base::AppendJsonString(l.text, &line_);
  if (l.rank >= 0) line_.append(",\"rank\":").append(std::to_string(l.rank));
  if (!l.host.empty()) {
    line_.append(",\"host\":");
    base::AppendJsonString(l.host, &line_);
  }
  if (!l.source.empty()) {
    line_.append(",\"source\":");
    base::AppendJsonString(l.source, &line_);
  }
  if (l.line > 0) line_.append(",\"line\":").append(std::to_string(l.line));
  line_.append("}\n");
  if (std::fwrite(line_.data(), 1, line_.size(), file_) != line_.size()) {
    status_ = base::IoError("{}: write failed: {}", path_, std::strerror(errno));
  }
  return status_;
}

base::Status LogWriter::Flush() {
  if (status_.ok() && file_ && std::fflush(file_) != 0) {
    status_ = base::IoError("{}: flush failed: {}", path_, std::strerror(errno));
  }
  return status_;
}

base::Status LogWriter::Close() {
  base::Status status = Flush();
  if (file_) {
    std::fclose(file_);
    file_ = nullptr;
  }
  return status;
}

// ---- BundleWriter ----

BundleWriter::BundleWriter(std::string directory, BundleMeta meta, WriterOptions options)
    : directory_(std::move(directory)), meta_(std::move(meta)), options_(options) {}

BundleWriter::~BundleWriter() { (void)Close(); }

base::StatusOr<std::unique_ptr<BundleWriter>> BundleWriter::Create(const std::string& directory,
                                                                   BundleMeta meta,
                                                                   WriterOptions options) {
  std::error_code ec;
  std::filesystem::create_directories(directory, ec);
  if (ec) return base::IoError("{}: cannot create directory: {}", directory, ec.message());
  if (std::filesystem::exists(std::filesystem::path(directory) / "meta.json", ec)) {
    return base::InvalidArgument("{}: already holds a bundle (meta.json exists)", directory);
  }
  meta.format_version = kFormatMajor;
  std::unique_ptr<BundleWriter> writer(new BundleWriter(directory, std::move(meta), options));
  TELLER_RETURN_IF_ERROR(writer->WriteMeta());
  return writer;
}

base::Status BundleWriter::WriteMeta() {
  TELLER_ASSIGN_OR_RETURN(std::string text, FormatBundleMeta(meta_));
  return base::WriteFileAtomic(directory_ + "/meta.json", text);
}

base::StatusOr<ProcessWriter*> BundleWriter::OpenProcess(const ProcessInfoRecord& info) {
  if (closed_) return base::InvalidArgument("{}: bundle writer is closed", directory_);
  std::string base_name = ProcessDirectoryName(info.host, info.pid);
  std::string name = base_name;
  std::error_code ec;
  for (int n = 2; std::filesystem::exists(std::filesystem::path(directory_) / name, ec); ++n) {
    name = fmt::format("{}.{}", base_name, n);  // pid reused in one run
  }
  std::string path = directory_ + "/" + name;
  std::filesystem::create_directories(path, ec);
  if (ec) return base::IoError("{}: cannot create directory: {}", path, ec.message());
  processes_.push_back(std::make_unique<ProcessWriter>(path, info, options_));
  ProcessWriter* writer = processes_.back().get();
  TELLER_RETURN_IF_ERROR(writer->Flush());
  return writer;
}

base::StatusOr<LogWriter*> BundleWriter::OpenLog(std::string_view name) {
  if (!IsPlainName(name)) {
    return base::InvalidArgument("{}: log name '{}' must be [A-Za-z0-9._-]", directory_, name);
  }
  std::string dir = directory_ + "/logs";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return base::IoError("{}: cannot create directory: {}", dir, ec.message());
  logs_.push_back(std::make_unique<LogWriter>(fmt::format("{}/{}.jsonl", dir, name)));
  LogWriter* writer = logs_.back().get();
  TELLER_RETURN_IF_ERROR(writer->Flush());
  return writer;
}

base::Status BundleWriter::WriteLabels(std::string_view json) {
  return base::WriteFileAtomic(directory_ + "/labels.json", json);
}

base::Status BundleWriter::Flush() {
  base::Status first;
  for (auto& p : processes_) {
    base::Status s = p->Flush();
    if (first.ok()) first = s;
  }
  for (auto& l : logs_) {
    base::Status s = l->Flush();
    if (first.ok()) first = s;
  }
  base::Status s = WriteMeta();
  return first.ok() ? s : first;
}

base::Status BundleWriter::Close() {
  if (closed_) return base::OkStatus();
  closed_ = true;
  base::Status first;
  for (auto& p : processes_) {
    base::Status s = p->Close();
    if (first.ok()) first = s;
  }
  for (auto& l : logs_) {
    base::Status s = l->Close();
    if (first.ok()) first = s;
  }
  base::Status s = WriteMeta();
  return first.ok() ? s : first;
}

std::string ProcessDirectoryName(std::string_view host, int64_t pid) {
  std::string name = "proc-";
  size_t host_start = name.size();
  for (char c : host) {
    bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '.' || c == '_' || c == '-';
    name.push_back(keep ? c : '_');
  }
  if (name.size() == host_start) name += "unknown";
  return name + "-" + std::to_string(pid);
}

}  // namespace teller::wire
