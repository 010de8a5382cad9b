#include "fuzz_util.h"

#include <filesystem>
#include <fstream>

namespace teller::fuzz {
namespace {

std::string MakeScratchDir() {
  std::error_code ec;
  const char* given = std::getenv("TELLER_FUZZ_SCRATCH");  // scripts/fuzz.sh sets it
  std::string root = given && *given                                 ? given
                     : std::filesystem::is_directory("/dev/shm", ec) ? "/dev/shm"
                                                                     : "/tmp";
  std::string pattern = root + "/teller-fuzz-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    std::perror("teller fuzz: mkdtemp");
    std::abort();
  }
  return pattern;
}

struct Scratch {
  std::string path = MakeScratchDir();
  ~Scratch() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

}  // namespace

const std::string& ScratchDir() {
  static Scratch scratch;
  return scratch.path;
}

void WriteBytes(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    std::fprintf(stderr, "teller fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
}

void CheckImportedTrace(const model::Trace& trace, const base::Status& status) {
  base::Status check = store::CheckTrace(trace);
  FUZZ_CHECK(check.ok(), "import returned \"%s\" and left a broken trace: %s",
             status.ToString().c_str(), check.ToString().c_str());
}

}  // namespace teller::fuzz
