// Shared helpers of the libFuzzer targets (docs/fuzzing.md): a private scratch
// folder, file writes, and an invariant check that aborts (libFuzzer then keeps the
// input as a crash).
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "base/status.h"
#include "model/trace.h"
#include "store/trace_check.h"

// Aborts with a message when an invariant does not hold.
#define FUZZ_CHECK(condition, ...)                                                     \
  do {                                                                                 \
    if (!(condition)) {                                                                \
      std::fprintf(stderr, "fuzz invariant failed at %s:%d: %s\n", __FILE__, __LINE__, \
                   #condition);                                                        \
      std::fprintf(stderr, "  " __VA_ARGS__);                                          \
      std::fprintf(stderr, "\n");                                                      \
      std::abort();                                                                    \
    }                                                                                  \
  } while (0)

namespace teller::fuzz {

// A folder of this process, made once under $TELLER_FUZZ_SCRATCH, else /dev/shm when
// there is one (the targets that go through files should not wear a disk). Removed
// at a normal exit.
const std::string& ScratchDir();

// Writes bytes to path; aborts when it cannot (the harness, not the input, is broken).
void WriteBytes(const std::string& path, std::string_view bytes);

// Every importer must leave a trace whose references stay inside their tables.
void CheckImportedTrace(const model::Trace& trace, const base::Status& status);

}  // namespace teller::fuzz
