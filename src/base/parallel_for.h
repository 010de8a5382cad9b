// Work split over threads: body(begin, end) over contiguous chunks of [0, count), one
// chunk per thread, the calling thread running the first. Each chunk writes only its
// own outputs, so the result does not depend on the thread count.
#pragma once

#include <cstddef>
#include <functional>

namespace teller::base {

// Threads a `threads` option asks for: itself when positive, else one per core this
// process may run on.
int ThreadCount(int threads);

// threads <= 0: one per core. Fewer threads when count is small (min_chunk items each).
void ParallelFor(size_t count, int threads, const std::function<void(size_t, size_t)>& body,
                 size_t min_chunk = 1);

}  // namespace teller::base
