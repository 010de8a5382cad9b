#include "import/import_inputs.h"

#include <glob.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <mutex>
#include <optional>
#include <regex>
#include <span>

#include "base/parallel_for.h"
#include "import/input_format.h"
#include "import/part_imports.h"
#include "model/trace_append.h"

namespace teller::import {
namespace {

namespace fs = std::filesystem;

// The counters of a format's importer that drop an event (docs/importers/*.md).
std::span<const model::StatDef* const> DroppingStats(InputFormat format) {
  namespace stat = model::stat;
  static constexpr std::array<const model::StatDef*, 10> kKineto = {
      &stat::kKinetoEventNotObject,    &stat::kKinetoEventMalformed,   &stat::kKinetoEventMissingPh,
      &stat::kKinetoEventUnknownPhase, &stat::kKinetoEventMissingName, &stat::kKinetoEventMissingTs,
      &stat::kKinetoEventBadTs,        &stat::kKinetoEventBadDur,      &stat::kKinetoEventBadPid,
      &stat::kKinetoEventMissingTid};
  static constexpr std::array<const model::StatDef*, 3> kNsys = {
      &stat::kNsysDeviceWorkWithoutProcess, &stat::kNsysApiCallWithoutThread,
      &stat::kNsysNvtxWithoutThread};
  switch (format) {
    case InputFormat::kKineto:
      return kKineto;
    case InputFormat::kNsys:
      return kNsys;
    case InputFormat::kBundle:  // its logs are worth reading without events (a crash)
    case InputFormat::kLog:
    case InputFormat::kFlightRecorder:
    case InputFormat::kUnknown:
      break;
  }
  return {};
}

base::Status ImportFile(const std::string& path, InputFormat format, const ImportOptions& options,
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

// One input into trace; an error when it read events and kept none.
base::Status ImportOne(const std::string& path, InputFormat format, const ImportOptions& options,
                       model::Trace* trace) {
  const model::Stats before = trace->stats;
  const size_t events_before = trace->events.size();
  TELLER_RETURN_IF_ERROR(ImportFile(path, format, options, trace));
  return CheckEventsKept(path, format, before, trace->stats,
                         static_cast<int64_t>(trace->events.size() - events_before));
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

// Forwards progress from several importing threads to one sink.
class SharedProgress : public base::ProgressSink {
 public:
  explicit SharedProgress(base::ProgressSink* sink) : sink_(sink) {}
  void Update(std::string_view stage, uint64_t done, uint64_t total) override {
    std::lock_guard<std::mutex> lock(mutex_);
    sink_->Update(stage, done, total);
  }
  void Finish(std::string_view stage) override {
    std::lock_guard<std::mutex> lock(mutex_);
    sink_->Finish(stage);
  }

 private:
  base::ProgressSink* sink_;
  std::mutex mutex_;
};

ImportOptions OptionsFor(const std::string& file, const ImportOptions& options) {
  ImportOptions file_options = options;
  if (file_options.rank_hint < 0) file_options.rank_hint = RankFromFileName(file);
  return file_options;
}

// Imports the files that import alone on up to `threads` threads, each into its own
// trace (PartImports); Has(i) for those files.
class AheadImports {
 public:
  AheadImports(const std::vector<std::string>& files, const std::vector<InputFormat>& formats,
               const ImportOptions& options, int threads)
      : progress_(options.progress), options_(options), part_of_file_(files.size(), kNone) {
    if (options.progress) options_.progress = &progress_;
    std::vector<size_t> queue;
    for (size_t i = 0; i < files.size(); ++i) {
      if (ImportsAlone(formats[i])) queue.push_back(i);
    }
    if (queue.size() < 2 || threads < 2) return;  // one thread: imported in order
    options_.threads = 1;  // files side by side, each parsed on its own thread
    for (size_t k = 0; k < queue.size(); ++k) part_of_file_[queue[k]] = k;
    parts_.emplace(queue.size(), threads,
                   [this, queue, &files, &formats](size_t k, model::Trace* trace) {
                     const std::string& file = files[queue[k]];
                     return ImportOne(file, formats[queue[k]], OptionsFor(file, options_), trace);
                   });
  }
  bool Has(size_t file) const { return part_of_file_[file] != kNone; }
  base::StatusOr<model::Trace> Take(size_t file) { return parts_->Take(part_of_file_[file]); }

 private:
  static constexpr size_t kNone = SIZE_MAX;
  SharedProgress progress_;
  ImportOptions options_;
  std::vector<size_t> part_of_file_;  // kNone: imported in order by the caller
  std::optional<PartImports> parts_;  // last: its threads stop before the rest goes
};

// True when the input is a glob(3) pattern rather than a path that exists.
bool IsPattern(const std::string& input) {
  std::error_code ec;
  return input.find_first_of("*?[") != std::string::npos && !fs::exists(input, ec);
}

// Paths in import order: compared a component at a time, so a folder's files come
// before a sibling whose name extends the folder's ("a/x" before "a-b").
void SortPaths(std::vector<std::string>* paths) {
  std::sort(paths->begin(), paths->end(),
            [](const std::string& a, const std::string& b) { return fs::path(a) < fs::path(b); });
}

std::vector<std::string> GlobHere(const std::string& pattern) {
  glob_t found{};
  std::vector<std::string> paths;
  if (glob(pattern.c_str(), 0, nullptr, &found) == 0) {
    paths.assign(found.gl_pathv, found.gl_pathv + found.gl_pathc);
  }
  globfree(&found);
  SortPaths(&paths);
  return paths;
}

// A path's files here: a directory without meta.json gives its trace and log files in
// name order, anything else itself.
base::Status AddFilesOf(const std::string& path, std::vector<std::string>* files) {
  std::error_code ec;
  if (!fs::is_directory(path, ec) || fs::exists(fs::path(path) / "meta.json", ec)) {
    files->push_back(path);
    return base::OkStatus();
  }
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
  SortPaths(&inside);
  files->insert(files->end(), inside.begin(), inside.end());
  return base::OkStatus();
}

// The files of the inputs in import order; an input with nothing here is an error.
base::StatusOr<SeenFiles> SeeInputs(const std::vector<std::string>& paths) {
  if (paths.empty()) return base::InvalidArgument("no input given");
  SeenFiles all;
  for (const std::string& path : paths) {
    TELLER_ASSIGN_OR_RETURN(SeenFiles seen, SeeInput(path));
    if (seen.files.empty()) {
      return IsPattern(path) ? base::NotFound("{}: no file matches", path)
                             : base::NotFound("{}: no such file", path);
    }
    all.files.insert(all.files.end(), seen.files.begin(), seen.files.end());
    all.formats.insert(all.formats.end(), seen.formats.begin(), seen.formats.end());
  }
  return all;
}

// The file as a source of the trace (most importers record their own; added only where
// one did not) and what it added.
ImportedInput NoteImported(const std::string& file, InputFormat format, size_t events_before,
                           size_t logs_before, model::Trace* trace) {
  if (trace->meta.sources.empty() || trace->meta.sources.back() != file) {
    trace->meta.sources.push_back(file);
  }
  return {file, format, static_cast<int64_t>(trace->events.size() - events_before),
          static_cast<int64_t>(trace->logs.size() - logs_before)};
}

}  // namespace

base::Status CheckEventsKept(const std::string& path, InputFormat format,
                             const model::Stats& before, const model::Stats& after,
                             int64_t events_kept) {
  if (events_kept > 0) return base::OkStatus();
  std::vector<std::pair<int64_t, const model::StatDef*>> reasons;
  int64_t dropped = 0;
  for (const model::StatDef* stat : DroppingStats(format)) {
    int64_t count = after.Get(*stat) - before.Get(*stat);
    if (count <= 0) continue;
    reasons.emplace_back(count, stat);
    dropped += count;
  }
  if (dropped == 0) return base::OkStatus();
  // The largest reason first, with what it means; ties in the counters' order.
  std::stable_sort(reasons.begin(), reasons.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  int64_t read = dropped;
  if (format == InputFormat::kKineto) {
    read = after.Get(model::stat::kKinetoEventsRead) - before.Get(model::stat::kKinetoEventsRead);
  }
  std::string_view what = reasons[0].second->description;
  if (what.ends_with(", dropped")) what.remove_suffix(9);
  std::string others;
  for (size_t i = 1; i < reasons.size(); ++i) {
    others += fmt::format(", {} as {}", reasons[i].first, reasons[i].second->name);
  }
  return base::InvalidArgument("{}: {} event(s) read and none kept: {} dropped as {} ({}){}", path,
                               std::max(read, dropped), reasons[0].first, reasons[0].second->name,
                               what, others);
}

bool ImportsAlone(InputFormat format) {
  return format == InputFormat::kKineto || format == InputFormat::kNsys;
}

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
  TELLER_ASSIGN_OR_RETURN(SeenFiles seen, SeeInputs(paths));
  const std::vector<std::string>& files = seen.files;
  const std::vector<InputFormat>& formats = seen.formats;
  AheadImports ahead(files, formats, options, base::ThreadCount(options.threads));
  std::vector<ImportedInput> imported;
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string& file = files[i];
    const InputFormat format = formats[i];
    size_t events_before = trace->events.size(), logs_before = trace->logs.size();
    if (ahead.Has(i)) {
      TELLER_ASSIGN_OR_RETURN(model::Trace alone, ahead.Take(i));
      TELLER_RETURN_IF_ERROR(model::AppendTrace(alone, trace));
    } else {
      TELLER_RETURN_IF_ERROR(ImportOne(file, format, OptionsFor(file, options), trace));
    }
    imported.push_back(NoteImported(file, format, events_before, logs_before, trace));
  }
  return imported;
}

base::StatusOr<SeenFiles> SeeInput(const std::string& input) {
  std::vector<std::string> paths;
  std::error_code ec;
  if (IsPattern(input)) {
    for (const std::string& match : GlobHere(input)) {
      TELLER_RETURN_IF_ERROR(AddFilesOf(match, &paths));
    }
  } else if (fs::exists(input, ec)) {
    TELLER_RETURN_IF_ERROR(AddFilesOf(input, &paths));
  }
  SeenFiles seen;
  for (std::string& path : paths) {
    TELLER_ASSIGN_OR_RETURN(InputFormat format, DetectFormat(path));
    seen.files.push_back(std::move(path));
    seen.formats.push_back(format);
  }
  return seen;
}

base::StatusOr<ImportPlan> PlanImport(const std::vector<std::string>& paths) {
  TELLER_ASSIGN_OR_RETURN(SeenFiles seen, SeeInputs(paths));
  return PlanFiles(std::move(seen));
}

base::StatusOr<ImportPlan> PlanFiles(SeenFiles seen) {
  ImportPlan plan;
  plan.files = std::move(seen.files);
  plan.formats = std::move(seen.formats);
  for (size_t file = 0; file < plan.files.size(); ++file) {
    const std::string& path = plan.files[file];
    const InputFormat format = plan.formats[file];
    if (ImportsAlone(format)) {
      plan.units.push_back({path, file, -1, RankFromFileName(path)});
    } else if (format == InputFormat::kBundle) {
      TELLER_ASSIGN_OR_RETURN(BundleParts bundle, BundleParts::Open(path));
      for (size_t process = 0; process < bundle.process_count(); ++process) {
        plan.units.push_back({bundle.process_path(process), file, static_cast<int32_t>(process),
                              bundle.RankOf(process)});
      }
    }
  }
  return plan;
}

base::Status UnitImporter::Import(size_t unit, const ImportOptions& options, model::Trace* part) {
  const ImportUnit& u = plan_.units[unit];
  const std::string& file = plan_.files[u.file];
  if (u.bundle_process < 0)
    return ImportOne(file, plan_.formats[u.file], OptionsFor(file, options), part);
  auto found = bundles_.find(u.file);
  if (found == bundles_.end()) {
    TELLER_ASSIGN_OR_RETURN(BundleParts opened, BundleParts::Open(file));
    found = bundles_.emplace(u.file, std::move(opened)).first;
  }
  const BundleParts& bundle = found->second;
  if (static_cast<size_t>(u.bundle_process) >= bundle.process_count() ||
      bundle.process_path(static_cast<size_t>(u.bundle_process)) != u.path) {
    return base::InvalidArgument(
        "{}: the bundle's process folders are not the ones planned ({} "
        "expected at {})",
        file, u.path, u.bundle_process);
  }
  return bundle.ImportProcess(static_cast<size_t>(u.bundle_process), options, part);
}

namespace {

// Appends the unit's part from take, or notes it skipped.
base::Status JoinUnit(size_t unit, const UnitSource& take, model::Trace* trace,
                      std::vector<SkippedUnit>* skipped) {
  base::StatusOr<model::Trace> part = take(unit);
  if (part.ok()) return model::AppendTrace(*part, trace);
  if (skipped == nullptr) return part.status();
  skipped->push_back({unit, part.status()});
  return base::OkStatus();
}

base::Status JoinBundle(const ImportPlan& plan, size_t file, size_t* next_unit,
                        const ImportOptions& options, const UnitSource& take, model::Trace* trace,
                        std::vector<SkippedUnit>* skipped) {
  TELLER_ASSIGN_OR_RETURN(BundleParts bundle, BundleParts::Open(plan.files[file]));
  bundle.ImportHead(trace);
  const model::ProcessIndex first_process(
      static_cast<model::ProcessIndex::rep_type>(trace->processes.size()));
  for (; *next_unit < plan.units.size() && plan.units[*next_unit].file == file; ++*next_unit) {
    base::ReportProgress(options.progress, "join bundle", plan.units[*next_unit].bundle_process,
                         bundle.process_count());
    TELLER_RETURN_IF_ERROR(JoinUnit(*next_unit, take, trace, skipped));
  }
  if (options.progress) options.progress->Finish("join bundle");
  bundle.NumberUnrankedProcesses(first_process, trace);
  return bundle.ImportLogs(first_process, trace);
}

}  // namespace

base::StatusOr<std::vector<ImportedInput>> ImportPlanned(const ImportPlan& plan,
                                                         const ImportOptions& options,
                                                         const UnitSource& take,
                                                         model::Trace* trace,
                                                         std::vector<SkippedUnit>* skipped) {
  std::vector<ImportedInput> imported;
  size_t next_unit = 0;
  for (size_t i = 0; i < plan.files.size(); ++i) {
    const std::string& file = plan.files[i];
    const InputFormat format = plan.formats[i];
    size_t events_before = trace->events.size(), logs_before = trace->logs.size();
    if (format == InputFormat::kBundle) {
      TELLER_RETURN_IF_ERROR(JoinBundle(plan, i, &next_unit, options, take, trace, skipped));
    } else if (next_unit < plan.units.size() && plan.units[next_unit].file == i) {
      TELLER_RETURN_IF_ERROR(JoinUnit(next_unit++, take, trace, skipped));
    } else {
      TELLER_RETURN_IF_ERROR(ImportOne(file, format, OptionsFor(file, options), trace));
    }
    imported.push_back(NoteImported(file, format, events_before, logs_before, trace));
  }
  return imported;
}

}  // namespace teller::import
