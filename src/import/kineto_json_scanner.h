// KinetoJsonScanner: streams a chrome-trace JSON text (a top-level object with a
// "traceEvents" array, or a bare array of events) in chunks and hands out one
// top-level value or one event element at a time, so a multi-GB trace is never
// held whole. It only tracks strings, escapes and bracket depth; each element is
// parsed by the caller.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "base/file_util.h"
#include "base/status.h"

namespace teller::import {

class KinetoJsonScanner {
 public:
  // Readable bytes after every returned text (what simdjson needs as padding).
  static constexpr size_t kPaddingBytes = 64;

  enum class ItemKind : uint8_t {
    kEvent,  // one element of traceEvents (or of the bare top-level array)
    // Several whole elements wrapped as one JSON array "[e1, e2, ...]" (the bytes
    // before and after are borrowed and given back on the next call). The end was
    // found by a cheap backward search, so a parser may still reject it: then call
    // Resume with where exact splitting must restart.
    kEventBatch,
    kTopLevelValue,  // a value of a top-level key other than traceEvents
    kEnd,            // end of input (check truncated())
  };
  struct Item {
    ItemKind kind = ItemKind::kEnd;
    std::string_view key;              // for kTopLevelValue, the raw key text
    std::string_view text;             // the value's JSON text; kPaddingBytes readable after it
    uint64_t offset = 0;               // byte offset of text in the (uncompressed) JSON
    bool mismatched_brackets = false;  // kEvent: a bracket closed by the other kind
    // Where the item's bytes begin: the end of the item before it. The bytes from
    // raw_offset to the item's end are in the buffer the texts point into.
    uint64_t raw_offset = 0;
  };

  // reader is not owned; path names the file in errors.
  KinetoJsonScanner(base::ChunkReader* reader, std::string path, size_t chunk_bytes);

  // The next item. Texts stay valid until the next call. A file that is not a
  // chrome trace at all is an error; a file cut short ends with kEnd and truncated().
  base::StatusOr<Item> Next();

  // After a kEventBatch that could not be parsed whole: go back to at (a position
  // inside the batch text, at the start of an element) and split exactly, one
  // element at a time, past the end of that batch.
  void Resume(const char* at);

  // After a kEventBatch: moves the buffer holding it (the batch wrapped in place, the
  // bytes read around it, then kPaddingBytes) into *buffer, whose storage the scanner
  // takes to go on with the bytes past the batch: the item's texts stay valid in
  // *buffer, with no copy of the batch. (The import in parts.)
  struct BatchBuffer {
    uint64_t offset = 0;  // JSON offset of (*buffer)[0]
    size_t size = 0;      // input bytes in *buffer, before the padding
    size_t open = 0;      // where the batch's '[' and ']' were put, and what was there
    size_t close = 0;
    char open_byte = 0;
    char close_byte = 0;
  };
  BatchBuffer TakeBatchBuffer(std::string* buffer);

  // The bytes read from JSON offset `from` (at most the end of the last item given) on,
  // as they were read: what a scanner made anew reads before what this one had not.
  std::string BytesFrom(uint64_t from);

  // On a scanner just made over a reader whose first byte is the JSON's byte
  // reader_offset: starts inside the events array at JSON offset `at` (> reader_offset:
  // an element, or what follows the last one), splitting exactly below exact_until as
  // after Resume. Where the import in parts goes back to when a batch's elements do not
  // end within the batch (SplitElementsBefore).
  base::Status StartInEvents(uint64_t reader_offset, uint64_t at, uint64_t exact_until,
                             bool bare_array);

  bool truncated() const { return truncated_; }
  // Where the cut was and what was expected there (set when truncated()).
  uint64_t truncated_offset() const { return truncated_offset_; }
  const std::string& truncation_reason() const { return truncation_reason_; }
  // The reader's data-loss message (a truncated gzip stream), empty when none.
  const std::string& reader_error() const { return reader_error_; }
  bool saw_trace_events() const { return saw_trace_events_; }
  // The trace is a bare array of events, not an object with traceEvents.
  bool bare_array() const { return bare_array_; }
  // Bytes of JSON text consumed so far.
  uint64_t bytes_consumed() const { return base_offset_ + pos_; }
  // The end of the last item given (JSON offset).
  uint64_t given() const { return mark_; }

 private:
  enum class State : uint8_t { kStart, kObjectKey, kEvents, kDone };
  // What one state of the scan gives: an item or error to return, or nullopt to go on.
  using Step = std::optional<base::StatusOr<Item>>;

  base::StatusOr<Item> NextItem();
  Step ScanStart();
  Step ScanObjectKey();

  // Reads another chunk, keeping bytes from keep_from on. Returns false at end of input.
  base::StatusOr<bool> Fill(size_t keep_from);
  // Ends the scan as truncated at buffer position at.
  Item Truncate(size_t at, std::string_view expected);
  void SkipSpace();
  void SkipSpaceAndCommas();
  // Gives back the bytes borrowed to wrap the last batch.
  void RestoreBatchBytes();
  // End (index past '}') of the last element that seems complete, or 0: a '}' before
  // the ']' closing traceEvents or before another element ("}, {").
  size_t FindBatchCut() const;

  base::ChunkReader* reader_;
  std::string path_;
  size_t chunk_bytes_;
  std::string buffer_;  // [0, end_) data, then kPaddingBytes of spaces
  size_t end_ = 0;
  size_t pos_ = 0;
  uint64_t base_offset_ = 0;  // JSON offset of buffer_[0]
  bool eof_ = false;
  State state_ = State::kStart;
  bool bare_array_ = false;
  bool saw_trace_events_ = false;
  bool truncated_ = false;
  uint64_t truncated_offset_ = 0;
  std::string truncation_reason_;
  std::string reader_error_;
  // JSON offset of the end of the last item given: Fill keeps the bytes from there on,
  // so an item's raw bytes stay in the buffer with it.
  uint64_t mark_ = 0;
  // Batch wrapping: the two borrowed bytes and where they were.
  size_t batch_open_ = SIZE_MAX;
  size_t batch_close_ = SIZE_MAX;
  char saved_open_ = 0;
  char saved_close_ = 0;
  uint64_t exact_until_ = 0;  // split exactly while below this JSON offset
};

// What the scanner's exact splitting after Resume(begin) takes from [begin, cut), cut
// being the end of the batch begin lies in (the text's wrapping ']'): calls
// element(text, mismatched_brackets) for each element, in order. Returns nullptr when
// every element ended before cut (the scanner then goes on at cut as it does after the
// batch), else where it stopped: an element that does not end before cut, or a ']'
// that closes traceEvents; what the scanner does from there depends on bytes past cut.
const char* SplitElementsBefore(const char* begin, const char* cut,
                                const std::function<void(std::string_view, bool)>& element);

// Returns the end (one past) of the JSON value starting at begin, or nullptr when
// the value does not end before end. Brackets are matched by kind: a closer of the
// other kind ('[1, 2}') closes the innermost opener of its own kind (and those inside
// it) or, with none open, is skipped; *mismatched is then set. Exposed for tests.
const char* FindJsonValueEnd(const char* begin, const char* end, bool* mismatched = nullptr);

}  // namespace teller::import
