// SHA-256 (FIPS 180-4), for checking that model files are the ones a model
// folder names.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace teller::base {

// Lower-case hex digest.
std::string Sha256Hex(std::string_view data);
base::StatusOr<std::string> Sha256OfFile(const std::string& path);

}  // namespace teller::base
