// A tiny, fully deterministic two-rank bundle: the committed fixture
// tests/fixtures/bundle/two_ranks is exactly what this writes (a test checks it
// byte for byte), and the tool teller_wire_example regenerates it.
#pragma once

#include <string>

#include "base/status.h"

namespace teller::wire {

// Times of the example, for tests that check clock conversion.
inline constexpr int64_t kExampleRealtimeBaseNs = 1700000000000000000;  // 2023-11-14T22:13:20Z
inline constexpr int64_t kExampleMonotonicBaseNs = 5000000000;
inline constexpr int64_t kExampleGpuBaseNs = 1700000000000500000;  // CUPTI runs 500 us ahead

// Writes the example into directory (which must not hold a bundle yet).
base::Status WriteExampleBundle(const std::string& directory);

}  // namespace teller::wire
