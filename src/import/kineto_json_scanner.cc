#include "import/kineto_json_scanner.h"

#include <algorithm>
#include <array>
#include <cstring>

namespace teller::import {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// Returns one past the closing quote of a string whose body starts at begin, or
// nullptr when it does not close before end.
const char* SkipStringBody(const char* begin, const char* end) {
  // Most strings are short keys and values: look at a few bytes before calling memchr.
  const char* p = begin;
  for (const char* stop = std::min(end, begin + 16); p < stop; ++p) {
    if (*p == '"') return p + 1;
    if (*p == '\\') break;
  }
  while (p < end) {
    const char* quote = static_cast<const char*>(std::memchr(p, '"', end - p));
    if (!quote) return nullptr;
    // Escaped when preceded by an odd run of backslashes.
    const char* q = quote;
    while (q > begin && q[-1] == '\\') --q;
    if (((quote - q) & 1) == 0) return quote + 1;
    p = quote + 1;
  }
  return nullptr;
}

// Bytes FindJsonValueEnd stops at: quotes and brackets.
constexpr std::array<bool, 256> kStructural = [] {
  std::array<bool, 256> table{};
  for (char c : {'"', '{', '}', '[', ']'}) table[static_cast<uint8_t>(c)] = true;
  return table;
}();

}  // namespace

const char* FindJsonValueEnd(const char* begin, const char* end, bool* mismatched) {
  if (begin >= end) return nullptr;
  char first = *begin;
  if (first == '"') return SkipStringBody(begin + 1, end);
  if (first != '{' && first != '[') {
    // Scalar: ends at the next delimiter. One running into end may be incomplete.
    for (const char* p = begin; p < end; ++p) {
      char c = *p;
      if (c == ',' || c == '}' || c == ']' || IsSpace(c)) return p;
    }
    return nullptr;
  }
  // Openers by kind, innermost last; deeper levels are counted, not kept.
  constexpr size_t kKept = 64;
  char open[kKept];
  size_t depth = 0;
  const char* p = begin;
  while (p < end) {
    // Most bytes are numbers, spaces, commas and colons.
    while (p < end && !kStructural[static_cast<uint8_t>(*p)]) ++p;
    if (p == end) break;
    char c = *p;
    switch (c) {
      case '"':
        p = SkipStringBody(p + 1, end);
        if (!p) return nullptr;
        continue;
      case '{':
      case '[':
        if (depth < kKept) open[depth] = c;
        ++depth;
        break;
      case '}':
      case ']': {
        const char opener = c == '}' ? '{' : '[';
        if (depth <= kKept && open[depth - 1] != opener) {
          // A closer of the other kind ('[1, 2}'): it closes the innermost opener of
          // its own kind and the ones inside it, or nothing when there is none.
          if (mismatched) *mismatched = true;
          size_t match = depth - 1;
          while (match > 0 && open[match - 1] != opener) --match;
          if (match == 0) break;
          depth = match;
        }
        if (--depth == 0) return p + 1;
        break;
      }
      default:
        break;
    }
    ++p;
  }
  return nullptr;
}

const char* SplitElementsBefore(const char* begin, const char* cut,
                                const std::function<void(std::string_view, bool)>& element) {
  // KinetoJsonScanner::Next's events state, where its buffer would end at cut.
  const char* p = begin;
  while (true) {
    while (p < cut && (IsSpace(*p) || *p == ',')) ++p;
    if (p == cut) return nullptr;
    if (*p == ']') return p;
    bool mismatched = false;
    const char* value_end = FindJsonValueEnd(p, cut, &mismatched);
    if (value_end == p) ++value_end;
    // The value ends past cut, or at it without a delimiter: the scanner reads on.
    if (!value_end) return p;
    element(std::string_view(p, value_end - p), mismatched);
    p = value_end;
  }
}

KinetoJsonScanner::KinetoJsonScanner(base::ChunkReader* reader, std::string path,
                                     size_t chunk_bytes)
    : reader_(reader), path_(std::move(path)), chunk_bytes_(chunk_bytes) {
  buffer_.reserve(2 * chunk_bytes_ + kPaddingBytes);
  buffer_.assign(kPaddingBytes, ' ');
}

base::StatusOr<bool> KinetoJsonScanner::Fill(size_t keep_from) {
  if (eof_) return false;
  // Drop consumed bytes; keep the unfinished item and one byte before it (a batch
  // borrows that byte for its '['), and what follows the last item given.
  if (mark_ >= base_offset_) keep_from = std::min<size_t>(keep_from, mark_ - base_offset_);
  if (keep_from > 0) --keep_from;
  size_t keep = end_ - keep_from;
  if (keep_from > 0) {
    std::memmove(buffer_.data(), buffer_.data() + keep_from, keep);
    base_offset_ += keep_from;
    pos_ -= keep_from;
  }
  end_ = keep;
  buffer_.resize(end_);
  base::StatusOr<size_t> got = reader_->Read(&buffer_, chunk_bytes_);
  if (!got.ok()) {
    if (got.status().code() != base::StatusCode::kDataLoss) {
      buffer_.resize(end_);
      buffer_.append(kPaddingBytes, ' ');
      return got.status();
    }
    // A truncated gzip stream: use what was inflated, then stop.
    reader_error_ = got.status().message();
    eof_ = true;
  } else if (*got == 0) {
    eof_ = true;
  }
  end_ = buffer_.size();
  buffer_.append(kPaddingBytes, ' ');
  return end_ > keep;
}

KinetoJsonScanner::Item KinetoJsonScanner::Truncate(size_t at, std::string_view expected) {
  truncated_ = true;
  truncated_offset_ = base_offset_ + std::min(at, end_);  // not in the padding past the end
  truncation_reason_ = std::string(expected);
  state_ = State::kDone;
  return Item{};
}

void KinetoJsonScanner::RestoreBatchBytes() {
  if (batch_open_ == SIZE_MAX) return;
  buffer_[batch_open_] = saved_open_;
  buffer_[batch_close_] = saved_close_;
  batch_open_ = batch_close_ = SIZE_MAX;
}

void KinetoJsonScanner::Resume(const char* at) {
  RestoreBatchBytes();
  size_t index = at - buffer_.data();
  exact_until_ = base_offset_ + pos_;
  pos_ = index;
  mark_ = base_offset_ + pos_;
}

KinetoJsonScanner::BatchBuffer KinetoJsonScanner::TakeBatchBuffer(std::string* buffer) {
  BatchBuffer batch;
  batch.offset = base_offset_;
  batch.size = end_;
  batch.open = batch_open_;
  batch.close = batch_close_;
  batch.open_byte = saved_open_;
  batch.close_byte = saved_close_;
  // Go on in *buffer's storage from the batch's last byte (kept before what follows, as
  // Fill keeps one), with the byte after the batch as it was read.
  const size_t keep_from = batch_close_ - 1;
  std::string next = std::move(*buffer);
  next.assign(buffer_, keep_from, end_ - keep_from);
  next[batch_close_ - keep_from] = saved_close_;
  next.append(kPaddingBytes, ' ');
  *buffer = std::move(buffer_);
  buffer_ = std::move(next);
  base_offset_ += keep_from;
  pos_ -= keep_from;
  end_ -= keep_from;
  batch_open_ = batch_close_ = SIZE_MAX;  // the borrowed bytes went with the batch
  return batch;
}

std::string KinetoJsonScanner::BytesFrom(uint64_t from) {
  RestoreBatchBytes();
  from = std::clamp(from, base_offset_, base_offset_ + end_);
  return buffer_.substr(static_cast<size_t>(from - base_offset_),
                        static_cast<size_t>(base_offset_ + end_ - from));
}

base::Status KinetoJsonScanner::StartInEvents(uint64_t reader_offset, uint64_t at,
                                              uint64_t exact_until, bool bare_array) {
  base_offset_ = reader_offset;
  // Read up to at, keeping the byte before it (a batch borrows it for its '[').
  while (base_offset_ + end_ <= at) {
    pos_ = end_;
    TELLER_ASSIGN_OR_RETURN(bool more, Fill(pos_));
    if (!more) {
      return base::Internal("{}: the input ends at byte {}, before byte {} read earlier", path_,
                            base_offset_ + end_, at);
    }
  }
  pos_ = at - base_offset_;
  mark_ = at;
  state_ = State::kEvents;
  bare_array_ = bare_array;
  saw_trace_events_ = true;
  exact_until_ = exact_until;
  return base::OkStatus();
}

size_t KinetoJsonScanner::FindBatchCut() const {
  const char* data = buffer_.data();
  auto skip_space = [&](size_t at) {
    while (at < end_ && IsSpace(data[at])) ++at;
    return at;
  };
  size_t i = end_;
  // The last '}' followed (after spaces) by ']', or by ',' and '{'. Names hold "}, "
  // ("{lambda(float)#1}, at::detail::Array" in kernel names) and so do objects after
  // traceEvents; a cut there is undone by exact splitting.
  while (i > pos_) {
    const void* found = memrchr(data + pos_, '}', i - pos_);
    if (!found) return 0;
    size_t brace = static_cast<const char*>(found) - data;
    size_t next = skip_space(brace + 1);
    if (next < end_ && data[next] == ']') return brace + 1;
    if (next < end_ && data[next] == ',') {
      next = skip_space(next + 1);
      if (next < end_ && data[next] == '{') return brace + 1;
    }
    i = brace;
  }
  return 0;
}

void KinetoJsonScanner::SkipSpace() {
  while (pos_ < end_ && IsSpace(buffer_[pos_])) ++pos_;
}

void KinetoJsonScanner::SkipSpaceAndCommas() {
  while (pos_ < end_ && (IsSpace(buffer_[pos_]) || buffer_[pos_] == ',')) ++pos_;
}

// The scan before traceEvents: '{' or '[' opening the trace.
KinetoJsonScanner::Step KinetoJsonScanner::ScanStart() {
  SkipSpace();
  if (pos_ == end_) {
    TELLER_ASSIGN_OR_RETURN(bool more, Fill(pos_));
    if (!more) {
      if (base_offset_ + end_ == 0) {
        return base::InvalidArgument("{}: empty file, expected a chrome-trace JSON object", path_);
      }
      return Truncate(pos_, "'{' or '[' starting the trace");
    }
    return std::nullopt;
  }
  char c = buffer_[pos_];
  if (c == '{') {
    state_ = State::kObjectKey;
  } else if (c == '[') {
    state_ = State::kEvents;
    bare_array_ = true;
    saw_trace_events_ = true;
  } else {
    return base::InvalidArgument(
        "{}: byte {}: expected '{{' or '[' starting a chrome-trace JSON, found '{}'", path_,
        base_offset_ + pos_, c);
  }
  ++pos_;
  return std::nullopt;
}

// A top-level key and its value; traceEvents switches to the events.
KinetoJsonScanner::Step KinetoJsonScanner::ScanObjectKey() {
  SkipSpaceAndCommas();
  const char* data = buffer_.data();
  if (pos_ < end_ && data[pos_] == '}') {
    ++pos_;
    state_ = State::kDone;
    return Item{};
  }
  if (pos_ < end_ && data[pos_] != '"') {
    return base::InvalidArgument("{}: byte {}: expected a key string or '}}', found '{}'", path_,
                                 base_offset_ + pos_, data[pos_]);
  }
  // Key, colon and the start of (or the whole) value must be in the buffer.
  size_t start = pos_;
  const char* key_end = pos_ < end_ ? FindJsonValueEnd(data + pos_, data + end_) : nullptr;
  const char* value = nullptr;
  if (key_end) {
    value = key_end;
    while (value < data + end_ && IsSpace(*value)) ++value;
    if (value < data + end_ && *value != ':') {
      return base::InvalidArgument("{}: byte {}: expected ':' after a key, found '{}'", path_,
                                   base_offset_ + (value - data), *value);
    }
    if (value < data + end_) ++value;
    while (value < data + end_ && IsSpace(*value)) ++value;
    if (value >= data + end_) value = nullptr;
  }
  if (!value) {
    TELLER_ASSIGN_OR_RETURN(bool more, Fill(start));
    if (!more) return Truncate(start, "a top-level key and value");
    return std::nullopt;
  }
  std::string_view key(data + start + 1, key_end - data - start - 2);
  if (key == "traceEvents") {
    if (*value != '[') {
      return base::InvalidArgument("{}: byte {}: expected '[' opening traceEvents, found '{}'",
                                   path_, base_offset_ + (value - data), *value);
    }
    pos_ = value - data + 1;
    state_ = State::kEvents;
    saw_trace_events_ = true;
    return std::nullopt;
  }
  const char* value_end = FindJsonValueEnd(value, data + end_);
  if (!value_end) {
    TELLER_ASSIGN_OR_RETURN(bool more, Fill(start));
    if (!more) return Truncate(start, "the value of a top-level key");
    return std::nullopt;
  }
  pos_ = value_end - data;
  Item item;
  item.kind = ItemKind::kTopLevelValue;
  item.key = key;
  item.text = std::string_view(value, value_end - value);
  item.offset = base_offset_ + (value - data);
  return item;
}

base::StatusOr<KinetoJsonScanner::Item> KinetoJsonScanner::Next() {
  base::StatusOr<Item> item = NextItem();
  if (item.ok()) {
    item->raw_offset = mark_;
    mark_ = base_offset_ + pos_;
  }
  return item;
}

base::StatusOr<KinetoJsonScanner::Item> KinetoJsonScanner::NextItem() {
  RestoreBatchBytes();
  while (true) {
    switch (state_) {
      case State::kDone:
        return Item{};
      case State::kStart:
      case State::kObjectKey: {
        Step step = state_ == State::kStart ? ScanStart() : ScanObjectKey();
        if (step) return *std::move(step);
        continue;
      }
      case State::kEvents: {
        SkipSpaceAndCommas();
        if (pos_ == end_) {
          TELLER_ASSIGN_OR_RETURN(bool more, Fill(pos_));
          if (!more) {
            // A bare array may lack its closing bracket (the chrome-trace format allows it).
            if (bare_array_) {
              state_ = State::kDone;
              return Item{};
            }
            return Truncate(pos_, "']' closing traceEvents");
          }
          continue;
        }
        const char* data = buffer_.data();
        if (data[pos_] == ']') {
          ++pos_;
          state_ = bare_array_ ? State::kDone : State::kObjectKey;
          continue;
        }
        if (data[pos_] == '{' && pos_ > 0 && base_offset_ + pos_ >= exact_until_) {
          size_t cut = FindBatchCut();
          if (cut > pos_) {
            Item item;
            item.kind = ItemKind::kEventBatch;
            item.offset = base_offset_ + pos_ - 1;
            batch_open_ = pos_ - 1;
            batch_close_ = cut;
            saved_open_ = buffer_[batch_open_];
            saved_close_ = buffer_[batch_close_];
            buffer_[batch_open_] = '[';
            buffer_[batch_close_] = ']';
            item.text = std::string_view(data + batch_open_, cut + 1 - batch_open_);
            pos_ = cut;
            return item;
          }
        }
        bool mismatched = false;
        const char* value_end = FindJsonValueEnd(data + pos_, data + end_, &mismatched);
        // A stray '}' is an empty "scalar": hand it out as one malformed element, else
        // the scan stalls on it forever.
        if (value_end == data + pos_) ++value_end;
        // A scalar that runs to the end of the buffer may continue in the next chunk.
        if (!value_end || (value_end == data + end_ && !eof_)) {
          TELLER_ASSIGN_OR_RETURN(bool more, Fill(pos_));
          if (!more) return Truncate(pos_, "the rest of an event object");
          continue;
        }
        Item item;
        item.kind = ItemKind::kEvent;
        item.mismatched_brackets = mismatched;
        item.text = std::string_view(data + pos_, value_end - data - pos_);
        item.offset = base_offset_ + pos_;
        pos_ = value_end - data;
        return item;
      }
    }
  }
}

}  // namespace teller::import
