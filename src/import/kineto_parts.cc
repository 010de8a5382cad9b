#include "import/kineto_parts.h"

#include <algorithm>
#include <utility>

namespace teller::import {

base::StatusOr<size_t> ReplayReader::Read(std::string* out, size_t max_bytes) {
  if (next_ < bytes_.size()) {
    const size_t n = std::min(max_bytes, bytes_.size() - next_);
    out->append(bytes_, next_, n);
    next_ += n;
    if (next_ < bytes_.size()) return n;
    bytes_.clear();
    next_ = 0;
    // A data loss that came with the input's last bytes comes with them again.
    if (ended_ && ending_with_bytes_ && ending_.code() == base::StatusCode::kDataLoss) {
      return ending_;
    }
    return n;
  }
  if (ended_) {
    if (!ending_.ok()) return ending_;
    return size_t{0};
  }
  const size_t before = out->size();
  base::StatusOr<size_t> got = input_->Read(out, max_bytes);
  if (!got.ok() || *got == 0) {
    ended_ = true;
    ending_ = got.ok() ? base::OkStatus() : got.status();
    ending_with_bytes_ = out->size() > before;
  }
  return got;
}

void ReplayReader::GiveBack(std::string bytes) {
  bytes.append(bytes_, next_, std::string::npos);
  bytes_ = std::move(bytes);
  next_ = 0;
}

void KinetoPart::Fill(const KinetoJsonScanner::Item& item, KinetoJsonScanner* scanner) {
  kind = item.kind;
  error = base::OkStatus();
  key.assign(item.key);
  offset = item.offset;
  mismatched_brackets = item.mismatched_brackets;
  events.Clear();
  resume = nullptr;
  batch = KinetoJsonScanner::BatchBuffer();
  if (item.kind == KinetoJsonScanner::ItemKind::kEventBatch) {
    // The item's text is the scanner's buffer's, which moves here as it is.
    batch = scanner->TakeBatchBuffer(&text);
    text_offset = batch.offset;
    text_size = batch.size;
    begin = static_cast<size_t>(item.offset - batch.offset);
  } else if (item.kind == KinetoJsonScanner::ItemKind::kEnd) {
    // The scanner reads no more: its buffer keeps the bytes from the last item on.
    text_offset = item.raw_offset;
    text_size = 0;
    begin = 0;
  } else {
    // The item's bytes from the end of the one before: they lie before its text in
    // the scanner's buffer.
    const size_t before = static_cast<size_t>(item.offset - item.raw_offset);
    text_offset = item.raw_offset;
    text_size = before + item.text.size();
    text.assign(item.text.data() - before, text_size);
    text.append(KinetoJsonScanner::kPaddingBytes, ' ');
    begin = before;
  }
  size = item.text.size();
}

void KinetoPart::Fill(base::Status scanner_error) {
  kind = KinetoJsonScanner::ItemKind::kEnd;
  error = std::move(scanner_error);
  key.clear();
  text_offset = 0;
  text_size = 0;
  begin = size = 0;
  events.Clear();
  resume = nullptr;
}

void KinetoPart::AppendInput(uint64_t* from, std::string* out) const {
  const uint64_t end = text_offset + text_size;
  if (!error.ok() || end <= *from) return;
  const uint64_t start = std::max(*from, text_offset);
  const size_t first = out->size();
  out->append(text, static_cast<size_t>(start - text_offset), static_cast<size_t>(end - start));
  if (kind == KinetoJsonScanner::ItemKind::kEventBatch) {
    for (auto [at, byte] :
         {std::pair(batch.open, batch.open_byte), std::pair(batch.close, batch.close_byte)}) {
      const uint64_t where = text_offset + at;
      if (where >= start && where < end) (*out)[first + (where - start)] = byte;
    }
  }
  *from = end;
}

KinetoPartQueue::KinetoPartQueue(int workers, size_t capacity) : state_(capacity, State::kFree) {
  parts_.reserve(capacity);
  for (size_t i = 0; i < capacity; ++i) parts_.push_back(std::make_unique<KinetoPart>());
  for (int w = 0; w < workers; ++w) workers_.emplace_back([this] { Work(); });
}

KinetoPartQueue::~KinetoPartQueue() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  queued_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

KinetoPart* KinetoPartQueue::NextFree() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (count_ == parts_.size()) return nullptr;
  return parts_[(head_ + count_) % parts_.size()].get();
}

void KinetoPartQueue::Push() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const size_t index = (head_ + count_) % parts_.size();
    const bool batch = parts_[index]->error.ok() &&
                       parts_[index]->kind == KinetoJsonScanner::ItemKind::kEventBatch;
    state_[index] = batch ? State::kQueued : State::kReady;
    ++count_;
  }
  queued_.notify_one();
}

size_t KinetoPartQueue::ClaimLocked() {
  for (size_t k = 0; k < count_; ++k) {
    const size_t index = (head_ + k) % parts_.size();
    if (state_[index] == State::kQueued) {
      state_[index] = State::kParsing;
      return index;
    }
  }
  return SIZE_MAX;
}

void KinetoPartQueue::Parse(size_t index, std::unique_lock<std::mutex>* lock) {
  KinetoPart* part = parts_[index].get();
  lock->unlock();
  part->events.Clear();
  part->resume = part->parser.ParseBatch(
      part->view(), [part](const RawEvent& event) { part->events.Add(event); });
  lock->lock();
  state_[index] = State::kReady;
  parsed_.notify_all();
}

void KinetoPartQueue::Work() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    size_t index = SIZE_MAX;
    queued_.wait(lock, [&] { return stopping_ || (index = ClaimLocked()) != SIZE_MAX; });
    if (index == SIZE_MAX) return;  // stopping, nothing claimed
    Parse(index, &lock);
  }
}

KinetoPart* KinetoPartQueue::Front() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (state_[head_] != State::kReady) {
    // The oldest part when no worker took it, else a later one while a worker parses it.
    const size_t index = ClaimLocked();
    if (index != SIZE_MAX) {
      Parse(index, &lock);
    } else {
      parsed_.wait(lock);
    }
  }
  return parts_[head_].get();
}

void KinetoPartQueue::Pop() {
  std::lock_guard<std::mutex> lock(mutex_);
  state_[head_] = State::kFree;
  head_ = (head_ + 1) % parts_.size();
  --count_;
}

void KinetoPartQueue::Clear(const std::function<void(const KinetoPart&)>& held) {
  std::unique_lock<std::mutex> lock(mutex_);
  parsed_.wait(lock, [&] {
    for (State state : state_) {
      if (state == State::kParsing) return false;
    }
    return true;
  });
  for (size_t k = 0; held && k < count_; ++k) held(*parts_[(head_ + k) % parts_.size()]);
  std::fill(state_.begin(), state_.end(), State::kFree);
  head_ = 0;
  count_ = 0;
}

}  // namespace teller::import
