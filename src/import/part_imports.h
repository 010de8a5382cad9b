// Parts of one import (trace files, a bundle's process folders) imported side by side,
// each into a trace of its own, for a caller that appends them in order
// (model::AppendTrace): the joined trace is the one a single thread makes.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "base/status.h"
#include "model/trace.h"

namespace teller::import {

class PartImports {
 public:
  using ImportPart = std::function<base::Status(size_t part, model::Trace* trace)>;

  // Imports parts 0..parts-1 on up to `threads` threads; a part starts only while fewer
  // than 2 x threads parts are ahead of the last one taken, so memory holds a few parts,
  // not the whole import twice.
  PartImports(size_t parts, int threads, ImportPart import);
  ~PartImports();
  PartImports(const PartImports&) = delete;
  PartImports& operator=(const PartImports&) = delete;

  // Part `part`'s trace (or the error importing it), once; parts are taken in order.
  base::StatusOr<model::Trace> Take(size_t part);

 private:
  void Work();

  ImportPart import_;
  size_t window_;
  std::mutex mutex_;
  std::condition_variable changed_;
  size_t next_ = 0;   // the next part a thread starts
  size_t taken_ = 0;  // parts taken so far
  bool stopping_ = false;
  std::vector<std::optional<base::StatusOr<model::Trace>>> results_;
  std::vector<std::thread> pool_;
};

}  // namespace teller::import
