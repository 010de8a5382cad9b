// Importing several inputs of any format into one trace.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "import/bundle_parts.h"
#include "import/importer.h"

namespace teller::import {

struct ImportedInput {
  std::string path;
  InputFormat format = InputFormat::kUnknown;
  int64_t events_added = 0;
  int64_t logs_added = 0;
};

// Each path is a file (format told from its content), a bundle directory, a
// directory of trace/log files (per-rank Kineto files, logs), imported in name order,
// or a glob(3) pattern ("traces/*_rank*.json"), its matches in name order.
// Rank hints come from the file ("rank3", "rank-3", "worker3") when it carries none.
base::StatusOr<std::vector<ImportedInput>> ImportInputs(const std::vector<std::string>& paths,
                                                        const ImportOptions& options,
                                                        model::Trace* trace);

// A piece of the inputs that imports into a trace of its own and joins the others in
// input order (model::AppendTrace): a Kineto or nsys file, or one process folder of a
// bundle. Logs, Flight Recorder dumps and a bundle's own facts and logs import on the
// joined trace. What lets the units import on other MPI processes (fleet/).
struct ImportUnit {
  std::string path;             // the file, or the process folder
  size_t file = 0;              // its file in ImportPlan::files
  int32_t bundle_process = -1;  // the folder's index in its bundle; -1: the whole file
  int32_t rank = -1;            // the global rank it holds, where known
};

// The inputs as ImportInputs reads them: the files in order (directories of trace
// files expanded in name order) and the units among them.
struct ImportPlan {
  std::vector<std::string> files;
  std::vector<InputFormat> formats;
  std::vector<ImportUnit> units;  // in import order
};
base::StatusOr<ImportPlan> PlanImport(const std::vector<std::string>& paths);

// Files in import order and their formats (told from their content).
struct SeenFiles {
  std::vector<std::string> files;
  std::vector<InputFormat> formats;
};
// One input as this process sees it: a pattern's matches, a directory's trace and log
// files, or the path itself; nothing when none of it is here. What each MPI process
// reports of inputs on its node's own disk (fleet/).
base::StatusOr<SeenFiles> SeeInput(const std::string& input);
// The plan of files seen here or elsewhere; bundles are opened here for their process
// folders. PlanImport is SeeInput of each path, then PlanFiles.
base::StatusOr<ImportPlan> PlanFiles(SeenFiles seen);

// Units of a plan into traces of their own (not reconstructed), one at a time; a bundle
// is opened once (meta.json read, process folders listed) for all of its units.
class UnitImporter {
 public:
  explicit UnitImporter(const ImportPlan& plan) : plan_(plan) {}
  base::Status Import(size_t unit, const ImportOptions& options, model::Trace* part);

 private:
  const ImportPlan& plan_;
  std::map<size_t, BundleParts> bundles_;  // by ImportPlan::files index
};

// The unit's trace imported elsewhere, or why it could not be.
using UnitSource = std::function<base::StatusOr<model::Trace>(size_t unit)>;
// A unit that did not import, left out of the joined trace.
struct SkippedUnit {
  size_t unit = 0;
  base::Status status;
};
// Joins the plan's inputs on trace in order, the units from take: the trace
// ImportInputs makes of the same paths. A unit take cannot give is an error, or with
// skipped a SkippedUnit and the rest goes on.
base::StatusOr<std::vector<ImportedInput>> ImportPlanned(const ImportPlan& plan,
                                                         const ImportOptions& options,
                                                         const UnitSource& take,
                                                         model::Trace* trace,
                                                         std::vector<SkippedUnit>* skipped);

// Trace files read nothing of what was imported before them: each can be imported
// into a trace of its own and appended (a unit). Logs build their templates on earlier
// files and take their year from the trace, so they are imported in order.
bool ImportsAlone(InputFormat format);

// An input that read events and kept none is an error, never an empty trace: the
// message names the file, the events read and the counter that dropped the most (its
// format's dropping counters, docs/importers/*.md, as they grew from before to after).
// An input without events (an empty traceEvents, a log) or whose events were all
// skipped on purpose (metadata, counter events) passes.
base::Status CheckEventsKept(const std::string& path, InputFormat format,
                             const model::Stats& before, const model::Stats& after,
                             int64_t events_kept);

// "..._rank3.json.gz" -> 3; -1 when the name carries no rank.
int32_t RankFromFileName(const std::string& path);

}  // namespace teller::import
