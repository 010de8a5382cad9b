// Paths for tests: the source tree and the shared real traces (absent in some checkouts).
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace teller::base {

inline std::string SourceDir() {
  const char* dir = std::getenv("TELLER_SOURCE_DIR");
  if (dir) return dir;
#ifdef TELLER_DEFAULT_SOURCE_DIR
  return TELLER_DEFAULT_SOURCE_DIR;
#else
  return ".";
#endif
}

inline std::string BinaryDir() {
  const char* dir = std::getenv("TELLER_BINARY_DIR");
  if (dir) return dir;
#ifdef TELLER_DEFAULT_BINARY_DIR
  return TELLER_DEFAULT_BINARY_DIR;
#else
  return "build";
#endif
}

// ../shared/real-traces beside the checkout, or "" when it is not there.
inline std::string RealTracesDir() {
  const char* env = std::getenv("TELLER_REAL_TRACES");
  std::filesystem::path dir =
      env ? env : std::filesystem::path(SourceDir()) / ".." / "shared" / "real-traces";
  std::error_code ec;
  return std::filesystem::is_directory(dir, ec) ? dir.lexically_normal().string() : std::string();
}

// The folders TempDir made, removed when the process that made them exits normally
// (not in forked children, which share the registry). TELLER_KEEP_TEST_DIRS=1 keeps them.
class TempDirRegistry {
 public:
  static TempDirRegistry& Get() {
    static TempDirRegistry registry;
    return registry;
  }
  void Add(const std::filesystem::path& dir) { dirs_.push_back(dir); }
  ~TempDirRegistry() {
    if (getpid() != owner_ || std::getenv("TELLER_KEEP_TEST_DIRS")) return;
    std::error_code ec;
    for (const auto& dir : dirs_) std::filesystem::remove_all(dir, ec);
  }

 private:
  TempDirRegistry() : owner_(getpid()) {}
  pid_t owner_;
  std::vector<std::filesystem::path> dirs_;
};

// A fresh folder for one test; the pid keeps tests that ctest runs in parallel apart.
inline std::string TempDir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() /
             ("teller_test_" + name + "_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  TempDirRegistry::Get().Add(dir);
  return dir.string();
}

}  // namespace teller::base
