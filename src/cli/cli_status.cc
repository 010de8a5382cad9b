#include "cli/cli_status.h"

#include <cstdio>

#include "base/file_util.h"

namespace teller::cli {

int Fail(const base::Status& status) {
  std::fprintf(stderr, "teller: %s\n", status.ToString().c_str());
  return kExitFailure;
}

int Usage(const std::string& message) {
  std::fprintf(stderr, "teller: %s\n", message.c_str());
  return kExitUsage;
}

void Print(const std::string& text) { std::fwrite(text.data(), 1, text.size(), stdout); }

base::Status WriteOutput(const std::string& path, const std::string& text) {
  if (IsStdout(path)) {
    Print(text);
    return base::OkStatus();
  }
  return base::WriteFileAtomic(path, text);
}

}  // namespace teller::cli
