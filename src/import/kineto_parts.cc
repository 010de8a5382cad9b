#include "import/kineto_parts.h"

#include <algorithm>
#include <utility>

namespace teller::import {

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
