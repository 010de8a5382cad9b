#include "import/kineto_parts.h"

#include <algorithm>
#include <utility>

namespace teller::import {

base::StatusOr<size_t> RewindableReader::Read(std::string* out, size_t max_bytes) {
  if (next_ < end_) {
    // Given again: from the block that holds next_.
    uint64_t block_start = kept_;
    for (const std::string& block : blocks_) {
      if (next_ < block_start + block.size()) {
        const size_t from = static_cast<size_t>(next_ - block_start);
        const size_t n = std::min(max_bytes, block.size() - from);
        out->append(block, from, n);
        next_ += n;
        // An error that came with the input's last bytes (a truncated gzip stream)
        // comes with them again.
        if (next_ == end_ && ended_ && !ending_.ok()) return ending_;
        return n;
      }
      block_start += block.size();
    }
  }
  if (ended_) {
    if (!ending_.ok()) return ending_;
    return size_t{0};
  }
  std::string block;
  if (!spare_.empty()) {
    block = std::move(spare_.back());
    spare_.pop_back();
    block.clear();
  }
  // A reader may append bytes and give an error (ChunkReader::Read): both are kept.
  base::StatusOr<size_t> got = input_->Read(&block, max_bytes);
  if (!block.empty()) {
    out->append(block);
    end_ += block.size();
    next_ = end_;
    blocks_.push_back(std::move(block));
  }
  if (!got.ok() || *got == 0) {
    ended_ = true;
    ending_ = got.ok() ? base::OkStatus() : got.status();
  }
  return got;
}

void RewindableReader::Forget(uint64_t offset) {
  size_t drop = 0;
  while (drop < blocks_.size() && kept_ + blocks_[drop].size() <= offset) {
    kept_ += blocks_[drop].size();
    ++drop;
  }
  if (drop == 0) return;
  for (size_t i = 0; i < drop && spare_.size() < 8; ++i) spare_.push_back(std::move(blocks_[i]));
  blocks_.erase(blocks_.begin(), blocks_.begin() + static_cast<std::ptrdiff_t>(drop));
}

base::Status RewindableReader::Rewind(uint64_t offset) {
  if (offset < kept_ || offset > end_) {
    return base::Internal("rewind to byte {} outside the bytes kept, {} to {}", offset, kept_,
                          end_);
  }
  next_ = offset;
  return base::OkStatus();
}

void KinetoPart::Fill(const KinetoJsonScanner::Item& item) {
  kind = item.kind;
  error = base::OkStatus();
  key.assign(item.key);
  text.assign(item.text);
  size = item.text.size();
  text.append(KinetoJsonScanner::kPaddingBytes, ' ');
  offset = item.offset;
  mismatched_brackets = item.mismatched_brackets;
  events.Clear();
  resume = nullptr;
}

void KinetoPart::Fill(base::Status scanner_error) {
  Fill(KinetoJsonScanner::Item{});
  error = std::move(scanner_error);
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
  part->resume =
      part->parser.ParseBatch(part->view(), [part](const RawEvent& event) { part->events.Add(event); });
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

const KinetoPart* KinetoPartQueue::Oldest() {
  std::lock_guard<std::mutex> lock(mutex_);
  return count_ == 0 ? nullptr : parts_[head_].get();
}

void KinetoPartQueue::Clear() {
  std::unique_lock<std::mutex> lock(mutex_);
  parsed_.wait(lock, [&] {
    for (State state : state_) {
      if (state == State::kParsing) return false;
    }
    return true;
  });
  std::fill(state_.begin(), state_.end(), State::kFree);
  head_ = 0;
  count_ = 0;
}

}  // namespace teller::import
