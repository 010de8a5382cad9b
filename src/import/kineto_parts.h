// The Kineto import in parts (KinetoReadConfig::threads): the scanner's items copied
// out of its buffer in the order it gives them, its batches of whole elements
// (KinetoJsonScanner::kEventBatch) parsed into RawEventLists on worker threads, and
// every item handed back in that same order, so the importer dispatches them as the
// import on one thread does.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/status.h"
#include "import/kineto_json_scanner.h"
#include "import/kineto_raw_event.h"

namespace teller::import {

// The input as the scanner reads it, its bytes kept from a point on, so that the scan
// can go back to an element it read past (what the import in parts does where a
// batch's elements cross the batch's end).
class RewindableReader : public base::ChunkReader {
 public:
  explicit RewindableReader(base::ChunkReader* input) : input_(input) {}
  base::StatusOr<size_t> Read(std::string* out, size_t max_bytes) override;
  uint64_t file_offset() const override { return input_->file_offset(); }
  uint64_t file_size() const override { return input_->file_size(); }

  // Bytes before offset are not needed again.
  void Forget(uint64_t offset);
  // The next reads give the bytes from offset on again, then what follows them (the
  // input's end or error too); an error when offset was forgotten.
  base::Status Rewind(uint64_t offset);

 private:
  base::ChunkReader* input_;
  std::vector<std::string> blocks_;  // bytes [kept_, end_) as read, in order
  std::vector<std::string> spare_;   // blocks to reuse
  uint64_t kept_ = 0;
  uint64_t end_ = 0;   // bytes read from input_
  uint64_t next_ = 0;  // the offset the next Read gives
  bool ended_ = false;
  base::Status ending_;  // what input_ gave at its end (an error, or ok for 0 bytes)
};

// One scanner item, or the error the scanner gave instead.
struct KinetoPart {
  KinetoJsonScanner::ItemKind kind = KinetoJsonScanner::ItemKind::kEnd;
  base::Status error;  // not ok: the scanner's error, in place of an item
  std::string key;     // kTopLevelValue
  std::string text;    // the item's text, then KinetoJsonScanner::kPaddingBytes
  size_t size = 0;     // of the text without the padding
  uint64_t offset = 0;
  bool mismatched_brackets = false;
  // A batch, once parsed: its events, and where exact splitting must resume in text
  // (nullptr when all of it was used; KinetoEventParser::ParseBatch).
  RawEventList events;
  const char* resume = nullptr;
  KinetoEventParser parser;  // the batch's parser: it holds the events' texts

  std::string_view view() const { return std::string_view(text.data(), size); }
  void Fill(const KinetoJsonScanner::Item& item);
  void Fill(base::Status scanner_error);
};

// Parts in the order they were pushed, each batch parsed by whichever thread comes to
// it first: a worker, or the caller of Front.
class KinetoPartQueue {
 public:
  // `workers` threads parse beside the caller; at most `capacity` parts are held.
  KinetoPartQueue(int workers, size_t capacity);
  ~KinetoPartQueue();
  KinetoPartQueue(const KinetoPartQueue&) = delete;
  KinetoPartQueue& operator=(const KinetoPartQueue&) = delete;

  // The part to fill next, or nullptr while capacity parts are held.
  KinetoPart* NextFree();
  // Appends the part NextFree gave, filled.
  void Push();
  // The oldest part, parsed. While a worker parses it, the caller parses later parts.
  KinetoPart* Front();
  // Done with the oldest part.
  void Pop();
  // The oldest part held, parsed or not; nullptr when none is.
  const KinetoPart* Oldest();
  // Drops every part held, after the ones being parsed are.
  void Clear();

 private:
  enum class State : uint8_t { kFree, kQueued, kParsing, kReady };

  // The oldest queued part, now kParsing; npos when none. mutex_ held.
  size_t ClaimLocked();
  void Parse(size_t index, std::unique_lock<std::mutex>* lock);
  void Work();

  std::vector<std::unique_ptr<KinetoPart>> parts_;
  std::vector<State> state_;
  size_t head_ = 0;   // the oldest part held
  size_t count_ = 0;  // parts held
  bool stopping_ = false;
  std::mutex mutex_;
  std::condition_variable queued_;
  std::condition_variable parsed_;
  std::vector<std::thread> workers_;
};

}  // namespace teller::import
