// The exit codes of every `teller` verb and the one way a verb reports an error,
// prints its result or writes an output file (`-` is stdout).
#pragma once

#include <string>

#include "base/status.h"

namespace teller::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;
// teller diagnose --distributed: the diagnosis was written without a process of the job
// that failed or did not answer, then the job was aborted (docs/fleet.md).
inline constexpr int kExitProcessLost = 3;

// Prints "teller: <status>" on stderr and returns kExitFailure.
int Fail(const base::Status& status);
// Prints "teller: <message>" on stderr and returns kExitUsage.
int Usage(const std::string& message);
// Writes text to stdout as it is.
void Print(const std::string& text);

// The path of an output flag that means stdout (`--json -`, `tpe train -o -`).
inline constexpr const char* kStdoutPath = "-";
inline bool IsStdout(const std::string& path) { return path == kStdoutPath; }
// Writes text to path (atomically), or prints it when path is `-`.
base::Status WriteOutput(const std::string& path, const std::string& text);

}  // namespace teller::cli
