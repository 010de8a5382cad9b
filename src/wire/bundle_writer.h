// BundleWriter: writes a raw bundle (docs/format.md). Made to run inside an
// injected library: no exception leaves it, it never exits or prints, and it does
// its I/O with fwrite/fflush. It is NOT thread-safe: the caller serializes calls
// (one mutex around a ProcessWriter, or one writer per thread of control).
// A write error puts the writer in a failed state: later appends are counted as
// dropped and return the first error.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "wire/bundle_meta.h"
#include "wire/record_codec.h"
#include "wire/records.h"

namespace teller::wire {

struct WriterOptions {
  // A chunk is written once its buffered records and strings reach this size; it is
  // also what a crash can lose per process.
  size_t chunk_bytes = 1 << 20;
  // events-NNNNNN.bin rolls over to the next file past this size.
  uint64_t max_file_bytes = 256ull << 20;
  // Memory cap of the string interning index; past it the index is forgotten and
  // strings are defined again under new ids (the file stays valid).
  size_t max_string_index_bytes = 16 << 20;
  // Ring mode (`teller record --watch`) when > 0: chunks stay in memory, in segments
  // of ring_ns / 4 (or ring_max_bytes / 4) that each define their strings and repeat
  // the process and thread records; the oldest segments are dropped once the next
  // one is older than ring_ns or the ring holds more than ring_max_bytes.
  // Persist() writes what the ring holds as event files.
  int64_t ring_ns = 0;
  size_t ring_max_bytes = 64 << 20;
};

struct WriterCounters {
  uint64_t records = 0;
  uint64_t chunks = 0;
  uint64_t bytes_written = 0;
  uint64_t records_dropped = 0;
  uint64_t string_index_resets = 0;
  uint64_t files = 0;
  uint64_t ring_segments_dropped = 0;  // ring mode: segments that aged out
  uint64_t ring_bytes_dropped = 0;
};

class ProcessWriter : private StringInterner {
 public:
  ProcessWriter(std::string directory, const ProcessInfoRecord& info, WriterOptions options);
  ~ProcessWriter() override;
  ProcessWriter(const ProcessWriter&) = delete;
  ProcessWriter& operator=(const ProcessWriter&) = delete;

  // Buffers one record; writes the chunk when it is full.
  base::Status Append(const ProcessInfoRecord& r);
  base::Status Append(const ThreadInfoRecord& r);
  base::Status Append(const RangePushRecord& r) { return AppendImpl(r); }
  base::Status Append(const RangePopRecord& r) { return AppendImpl(r); }
  base::Status Append(const RangeStartRecord& r) { return AppendImpl(r); }
  base::Status Append(const RangeEndRecord& r) { return AppendImpl(r); }
  base::Status Append(const MarkRecord& r) { return AppendImpl(r); }
  base::Status Append(const HostRangeRecord& r);
  base::Status Append(const ApiCallRecord& r) { return AppendImpl(r); }
  base::Status Append(const KernelRecord& r) { return AppendImpl(r); }
  base::Status Append(const MemcpyRecord& r) { return AppendImpl(r); }
  base::Status Append(const MemsetRecord& r) { return AppendImpl(r); }
  base::Status Append(const SyncRecord& r) { return AppendImpl(r); }
  base::Status Append(const ExternalCorrelationRecord& r) { return AppendImpl(r); }
  base::Status Append(const CollectiveRecord& r) { return AppendImpl(r); }

  // Appends one RangeBatch record (kind 16): entries encoded with EncodeRangeBatchEntry,
  // their string ids from InternString under
  // the current string_epoch(). May write the chunk (and change the epoch) after it.
  base::Status AppendRangeBatch(int64_t tid, ClockDomain clock, std::string_view entries);
  // Appends one TscRangeBatch record (kind 17, clock monotonic): entries encoded with
  // EncodeTscRangeBatchEntry, string ids as for AppendRangeBatch, stamps converted with
  // the samples (at most kMaxTscRangeBatchSamples).
  base::Status AppendTscRangeBatch(const TscRangeBatchHeader& header, const TscSample* samples,
                                   size_t sample_count, std::string_view entries);
  // The id of text in the current file (0 for ""), defined when new.
  uint32_t InternString(std::string_view text) { return text.empty() ? 0 : Intern(text); }
  // Changes whenever ids InternString gave before stop being valid (new file, index
  // reset); callers that cache ids drop them then.
  uint64_t string_epoch() const { return string_epoch_; }

  // The process as its first record said it, or as Restate last said it.
  const ProcessInfoRecord& process_info() const { return info_; }
  // Appends the process's record again with what was learned since the first (the
  // rank a process group gave): readers take the later record's known fields. Ring
  // segments started from now on repeat this one.
  base::Status Restate(const ProcessInfoRecord& info);

  // Writes the buffered strings chunk, then the records chunk, then fflush (in ring
  // mode: into the ring's newest segment).
  base::Status Flush();
  // Ring mode: flushes, writes every segment the ring holds as the next event files
  // and starts an empty ring. Otherwise the same as Flush().
  base::Status Persist();
  // Bytes the ring holds now (0 outside ring mode).
  size_t ring_bytes() const { return ring_bytes_; }
  base::Status Close();

  const std::string& directory() const { return directory_; }
  const WriterCounters& counters() const { return counters_; }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view text) const { return std::hash<std::string_view>()(text); }
  };

  template <typename R>
  base::Status AppendImpl(const R& record) {
    if (!status_.ok()) {
      ++counters_.records_dropped;
      return status_;
    }
    EncodeRecord(record, this, &records_);
    ++record_count_;
    ++counters_.records;
    if (records_.size() + strings_.size() >= options_.chunk_bytes) return Flush();
    return base::OkStatus();
  }
  uint32_t Intern(std::string_view text) override;
  // The records chunk needs at least this minor version.
  void NeedMinor(uint16_t minor) { records_minor_ = std::max(records_minor_, minor); }
  // info_ := info, its strings copied into the members below.
  void KeepProcessInfo(const ProcessInfoRecord& info);
  base::Status OpenNextFile();
  base::Status WriteChunk(ChunkKind kind, uint32_t count, const std::string& payload);
  bool ring() const { return options_.ring_ns > 0; }
  // Forgets the string index: later strings are defined again under new ids.
  void ResetStrings();
  // Ring mode: an empty segment, its bytes reserved.
  void AddSegment(int64_t now_ns);
  // Ring mode: a new segment that starts with the process and thread records.
  void StartSegment(int64_t now_ns);
  // Ring mode: a new segment once the newest is a quarter ring old or big; drops old ones.
  void AgeRing(int64_t now_ns);

  std::string directory_;
  WriterOptions options_;
  WriterCounters counters_;
  base::Status status_;
  FILE* file_ = nullptr;
  std::string file_path_;
  uint64_t file_bytes_ = 0;
  uint32_t file_index_ = 0;
  uint32_t sequence_ = 0;
  bool closed_ = false;

  std::string records_;         // pending records chunk payload
  uint16_t records_minor_ = 0;  // minor version its records need
  uint32_t record_count_ = 0;
  std::string strings_;  // pending strings chunk payload
  uint32_t string_count_ = 0;
  std::unordered_map<std::string, uint32_t, Hash, std::equal_to<>> string_ids_;
  size_t string_index_bytes_ = 0;
  uint32_t next_string_id_ = 1;
  uint64_t string_epoch_ = 0;
  std::string header_;  // scratch

  // Ring mode.
  struct Segment {
    int64_t start_ns = 0;  // CLOCK_MONOTONIC
    std::string bytes;     // chunks, as an event file holds them
  };
  // The process record each segment repeats; its views point at the strings below.
  ProcessInfoRecord info_;
  std::string info_host_, info_name_, info_command_, info_rank_source_;
  std::map<int64_t, std::string> thread_names_;
  std::deque<Segment> segments_;
  size_t ring_bytes_ = 0;
};

// Writes logs/<name>.jsonl, one JSON object per line.
class LogWriter {
 public:
  explicit LogWriter(std::string path);
  ~LogWriter();
  LogWriter(const LogWriter&) = delete;
  LogWriter& operator=(const LogWriter&) = delete;

  base::Status Append(const LogLineRecord& line);
  base::Status Flush();
  base::Status Close();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  FILE* file_ = nullptr;
  base::Status status_;
  std::string line_;  // scratch
};

class BundleWriter {
 public:
  // Creates the directory (it may exist but must not hold a meta.json) and writes
  // a first meta.json at once, so a run killed early still leaves a readable bundle.
  static base::StatusOr<std::unique_ptr<BundleWriter>> Create(const std::string& directory,
                                                              BundleMeta meta,
                                                              WriterOptions options = {});
  ~BundleWriter();  // Close(), errors dropped
  BundleWriter(const BundleWriter&) = delete;
  BundleWriter& operator=(const BundleWriter&) = delete;

  // Opens proc-<host>-<pid>/ and writes the ProcessInfo record first. The writer
  // stays owned by the bundle.
  base::StatusOr<ProcessWriter*> OpenProcess(const ProcessInfoRecord& info);
  // Opens logs/<name>.jsonl (name: [A-Za-z0-9._-]).
  base::StatusOr<LogWriter*> OpenLog(std::string_view name);
  // Records a clock sample; meta.json is rewritten on Flush and Close.
  void AddClockPair(const ClockPair& pair) { meta_.clock_pairs.push_back(pair); }
  BundleMeta* mutable_meta() { return &meta_; }
  // labels.json of synthetic runs, written verbatim.
  base::Status WriteLabels(std::string_view json);
  // Flushes every process and log, then rewrites meta.json.
  base::Status Flush();
  base::Status Close();

  const std::string& directory() const { return directory_; }

 private:
  BundleWriter(std::string directory, BundleMeta meta, WriterOptions options);
  base::Status WriteMeta();

  std::string directory_;
  BundleMeta meta_;
  WriterOptions options_;
  std::vector<std::unique_ptr<ProcessWriter>> processes_;
  std::vector<std::unique_ptr<LogWriter>> logs_;
  bool closed_ = false;
};

// The folder of one process in a bundle: proc-<host>-<pid>, the host reduced to
// [A-Za-z0-9._-] ("unknown" when empty).
std::string ProcessDirectoryName(std::string_view host, int64_t pid);

// Current CLOCK_REALTIME and CLOCK_MONOTONIC, read back to back.
ClockPair SampleHostClocks();

}  // namespace teller::wire
