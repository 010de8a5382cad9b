#include "import/part_imports.h"

#include <algorithm>
#include <utility>

namespace teller::import {

PartImports::PartImports(size_t parts, int threads, ImportPart import)
    : import_(std::move(import)),
      window_(2 * static_cast<size_t>(std::max(threads, 1))),
      results_(parts) {
  const size_t workers = std::min(static_cast<size_t>(std::max(threads, 1)), parts);
  for (size_t w = 0; w < workers; ++w) pool_.emplace_back([this] { Work(); });
}

PartImports::~PartImports() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;  // parts being imported finish; none start
  }
  changed_.notify_all();
  for (std::thread& thread : pool_) thread.join();
}

void PartImports::Work() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    changed_.wait(
        lock, [this] { return stopping_ || next_ >= results_.size() || next_ < taken_ + window_; });
    if (stopping_ || next_ >= results_.size()) return;
    const size_t part = next_++;
    lock.unlock();
    model::Trace trace;
    base::Status status = import_(part, &trace);
    base::StatusOr<model::Trace> result = status.ok()
                                              ? base::StatusOr<model::Trace>(std::move(trace))
                                              : base::StatusOr<model::Trace>(std::move(status));
    lock.lock();
    results_[part].emplace(std::move(result));
    changed_.notify_all();
  }
}

base::StatusOr<model::Trace> PartImports::Take(size_t part) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return results_[part].has_value(); });
  base::StatusOr<model::Trace> result = std::move(*results_[part]);
  results_[part].reset();
  taken_ = std::max(taken_, part + 1);
  lock.unlock();
  changed_.notify_all();
  return result;
}

}  // namespace teller::import
