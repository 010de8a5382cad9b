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
