// SHA-256 (FIPS 180-4), for checking that model files are the ones a model
// folder names, and for the snapshot cache's keys.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace teller::base {

// Lower-case hex digest: OpenSSL's (the CPU's SHA extensions) when the build has it, else
// Sha256HexPortable.
std::string Sha256Hex(std::string_view data);
// The portable implementation (FIPS 180-4 in plain C++), the same digest.
std::string Sha256HexPortable(std::string_view data);
base::StatusOr<std::string> Sha256OfFile(const std::string& path);

}  // namespace teller::base
