// Telling an input's format from its content, not its name.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "import/importer.h"

namespace teller::import {

InputFormat DetectFormatFromHead(std::string_view head);
// A directory with meta.json is a bundle; files are told apart by their first bytes.
base::StatusOr<InputFormat> DetectFormat(const std::string& path);

}  // namespace teller::import
