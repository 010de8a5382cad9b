#include "import/import_inputs.h"

#include <algorithm>
#include <filesystem>
#include <regex>

#include "import/input_format.h"

namespace teller::import {
namespace {

namespace fs = std::filesystem;

base::Status ImportOne(const std::string& path, InputFormat format, const ImportOptions& options,
                       model::Trace* trace) {
  switch (format) {
    case InputFormat::kBundle:
      return ImportBundle(path, options, trace);
    case InputFormat::kKineto:
      return ImportKineto(path, options, trace);
    case InputFormat::kNsys:
      return ImportNsys(path, options, trace);
    case InputFormat::kLog:
      return ImportLogFile(path, options, trace);
    case InputFormat::kFlightRecorder:
      return ImportFlightRecorder(path, options, trace);
    case InputFormat::kUnknown:
      break;
  }
  return base::InvalidArgument("{}: unknown input format", path);
}

bool LooksLikeInputFile(const fs::path& path) {
  std::string name = path.filename().string();
  if (name.empty() || name[0] == '.') return false;
  if (name.rfind("nccl_trace_rank_", 0) == 0) return true;  // Flight Recorder's default name
  for (std::string_view suffix : {".json", ".json.gz", ".sqlite", ".db", ".log", ".txt", ".log.gz",
                                  ".jsonl", ".out", ".err"}) {
    if (name.size() >= suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      return true;
    }
  }
  return false;
}

}  // namespace

int32_t RankFromFileName(const std::string& path) {
  static const std::regex kRank(R"((?:rank|worker)[-_]?(\d{1,6}))", std::regex::icase);
  std::string name = fs::path(path).filename().string();
  std::smatch match;
  if (std::regex_search(name, match, kRank)) return std::stoi(match[1].str());
  return -1;
}

base::StatusOr<std::vector<ImportedInput>> ImportInputs(const std::vector<std::string>& paths,
                                                        const ImportOptions& options,
                                                        model::Trace* trace) {
  if (paths.empty()) return base::InvalidArgument("no input given");
  std::vector<std::string> files;
  for (const std::string& path : paths) {
    std::error_code ec;
    if (fs::is_directory(path, ec) && !fs::exists(fs::path(path) / "meta.json", ec)) {
      std::vector<std::string> inside;
      for (const auto& entry : fs::directory_iterator(path, ec)) {
        if (entry.is_regular_file() && LooksLikeInputFile(entry.path())) {
          inside.push_back(entry.path().string());
        }
      }
      if (inside.empty()) {
        return base::InvalidArgument(
            "{}: directory holds no meta.json and no trace or log files (.json, .json.gz, "
            ".sqlite, .log)",
            path);
      }
      std::sort(inside.begin(), inside.end());
      files.insert(files.end(), inside.begin(), inside.end());
    } else {
      files.push_back(path);
    }
  }
  std::vector<ImportedInput> imported;
  for (const std::string& file : files) {
    TELLER_ASSIGN_OR_RETURN(InputFormat format, DetectFormat(file));
    ImportOptions file_options = options;
    if (file_options.rank_hint < 0) file_options.rank_hint = RankFromFileName(file);
    size_t events_before = trace->events.size(), logs_before = trace->logs.size();
    TELLER_RETURN_IF_ERROR(ImportOne(file, format, file_options, trace));
    // Most importers record their own source; add it only where one did not.
    if (trace->meta.sources.empty() || trace->meta.sources.back() != file) {
      trace->meta.sources.push_back(file);
    }
    imported.push_back({file, format, static_cast<int64_t>(trace->events.size() - events_before),
                        static_cast<int64_t>(trace->logs.size() - logs_before)});
  }
  return imported;
}

}  // namespace teller::import
