// Importing several inputs of any format into one trace.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "import/importer.h"

namespace teller::import {

struct ImportedInput {
  std::string path;
  InputFormat format = InputFormat::kUnknown;
  int64_t events_added = 0;
  int64_t logs_added = 0;
};

// Each path is a file (format told from its content), a bundle directory, or a
// directory of trace/log files (per-rank Kineto files, logs), imported in name order.
// Rank hints come from the file ("rank3", "rank-3", "worker3") when it carries none.
base::StatusOr<std::vector<ImportedInput>> ImportInputs(const std::vector<std::string>& paths,
                                                        const ImportOptions& options,
                                                        model::Trace* trace);

// "..._rank3.json.gz" -> 3; -1 when the name carries no rank.
int32_t RankFromFileName(const std::string& path);

}  // namespace teller::import
