// A tiny, fully deterministic two-rank bundle: the committed fixtures
// tests/fixtures/bundle/two_ranks and two_unranked are exactly what this writes (a test
// checks them byte for byte), and the tool teller_wire_example regenerates them.
#pragma once

#include <string>

#include "base/status.h"

namespace teller::wire {

// Times of the example, for tests that check clock conversion.
inline constexpr int64_t kExampleRealtimeBaseNs = 1700000000000000000;  // 2023-11-14T22:13:20Z
inline constexpr int64_t kExampleMonotonicBaseNs = 5000000000;
inline constexpr int64_t kExampleGpuBaseNs = 1700000000000500000;  // CUPTI runs 500 us ahead

// kSaid: each process's record, meta.json and the logs say its rank (the fixture
// tests/fixtures/bundle/two_ranks). kUnsaid: the same run launched without a rank
// anywhere, as torch.multiprocessing.spawn leaves it (tests/fixtures/bundle/two_unranked).
enum class ExampleRanks { kSaid, kUnsaid };

// Writes the example into directory (which must not hold a bundle yet).
base::Status WriteExampleBundle(const std::string& directory,
                                ExampleRanks ranks = ExampleRanks::kSaid);

}  // namespace teller::wire
