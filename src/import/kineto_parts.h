// The Kineto import in parts (KinetoReadConfig::threads): the scanner's items copied
// out of its buffer in the order it gives them, its batches of whole elements
// (KinetoJsonScanner::kEventBatch) parsed into RawEventLists on worker threads, and
// every item handed back in that same order, so the importer dispatches them as the
// import on one thread does.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
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

// The input of the import in parts, with bytes given back to be read again: where
// the import goes back to an element, a scanner made anew reads from there the bytes
// the parts and the old scanner hold, then what the old one had not read. The input's
// end, or its error, comes after them again as it came first (a data loss that came
// with the last bytes, with them).
class ReplayReader : public base::ChunkReader {
 public:
  explicit ReplayReader(base::ChunkReader* input) : input_(input) {}
  base::StatusOr<size_t> Read(std::string* out, size_t max_bytes) override;
  uint64_t file_offset() const override { return input_->file_offset(); }
  uint64_t file_size() const override { return input_->file_size(); }

  // bytes come next, before what had not been read.
  void GiveBack(std::string bytes);

 private:
  base::ChunkReader* input_;
  std::string bytes_;  // given back; [next_, size) not read again yet
  size_t next_ = 0;
  bool ended_ = false;  // input_ gave its end or an error: ending_
  base::Status ending_;
  bool ending_with_bytes_ = false;
};

// One scanner item, or the error the scanner gave instead, and the input bytes it
// holds: a batch keeps the scanner's buffer it was cut from (no copy), another item a
// copy of its bytes from the end of the item before it.
struct KinetoPart {
  KinetoJsonScanner::ItemKind kind = KinetoJsonScanner::ItemKind::kEnd;
  base::Status error;  // not ok: the scanner's error, in place of an item
  std::string key;     // kTopLevelValue
  std::string text;    // input bytes [text_offset, text_offset + text_size), then padding
  uint64_t text_offset = 0;
  size_t text_size = 0;
  size_t begin = 0;  // the item's text within text (a batch: from its '[' to its ']')
  size_t size = 0;
  uint64_t offset = 0;  // JSON offset of the item's text
  bool mismatched_brackets = false;
  KinetoJsonScanner::BatchBuffer batch;  // a batch: where it was wrapped
  // A batch, once parsed: its events, and where exact splitting must resume in text
  // (nullptr when all of it was used; KinetoEventParser::ParseBatch).
  RawEventList events;
  const char* resume = nullptr;
  KinetoEventParser parser;  // the batch's parser: it holds the events' texts

  std::string_view view() const { return std::string_view(text.data() + begin, size); }
  // Fills the part with the item the scanner gave last (a batch takes its buffer).
  void Fill(const KinetoJsonScanner::Item& item, KinetoJsonScanner* scanner);
  void Fill(base::Status scanner_error);
  // Appends the input bytes the part holds from JSON offset *from on, as they were read
  // (a batch's '[' and ']' given back); *from becomes the end of them.
  void AppendInput(uint64_t* from, std::string* out) const;
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
  // Drops every part held, after the ones being parsed are, handing each to `held`
  // (oldest first) before.
  void Clear(const std::function<void(const KinetoPart&)>& held = nullptr);

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
