// Opening a trace set on many MPI processes (`teller diagnose --distributed` under
// mpirun or srun; docs/fleet.md). The first process plans the inputs (import/
// import_inputs.h: a unit per Kineto or nsys file and per process folder of a
// bundle); every process says which units it can read; each unit is imported by one
// process that can, where its file lies, and sent to the first process as a compact
// snapshot of its columns (store/trace_snapshot.h), which joins them in input order
// and reconstructs: the trace a single `teller diagnose` opens from the same files.
// A unit that no process can read, or that fails to import, is left out and named.
// Then each process reconstructs, features and measures its own units and the first
// fits the deviation map from their rows (analysis_parts.h): only summaries cross.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "cause/crash_report.h"
#include "cause/deviation_map.h"
#include "cause/hang_report.h"
#include "cause/hypotheses.h"
#include "cause/oom_report.h"
#include "cause/replay_graph.h"
#include "diagnose/diagnosis.h"
#include "localize/feature_rows.h"
#include "model/trace.h"
#include "reconstruct/request_rows.h"
#include "store/open_trace.h"

namespace teller::fleet {

// True when this build has MPI (libopenmpi-dev); else every call below says what to
// install.
bool Available();

// One MPI job's membership: MPI_Init when started, MPI_Finalize when destroyed (after
// the others are done, waiting without spinning so the first process keeps the cores).
class Session {
 public:
  static base::StatusOr<std::unique_ptr<Session>> Start();
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  int32_t process() const { return process_; }
  int32_t processes() const { return processes_; }
  bool root() const { return process_ == 0; }
  // Ends every process of the job (MPI_Abort): a process that failed leaves none waiting.
  [[noreturn]] void Abort(int code) const;

 private:
  Session(int32_t process, int32_t processes) : process_(process), processes_(processes) {}
  int32_t process_ = 0;
  int32_t processes_ = 1;
};

// What one process did, gathered on the first.
struct ProcessFigures {
  int32_t process = 0;
  int64_t units = 0;          // units it imported
  double import_seconds = 0;  // importing and serializing them (the first process: joining)
  // Of import_seconds, blocked in sending or receiving units: waiting for the other side
  // and the transfer itself. The rest is the process's own work.
  double unit_wait_seconds = 0;
  double cpu_seconds = 0;     // user + system, the whole process so far
  int64_t max_rss_bytes = 0;  // peak resident memory so far
  uint64_t bytes_sent = 0;    // over MPI, collectives included
  uint64_t bytes_received = 0;
  // The analysis in parts (analysis_parts.h): its time on this process (the first
  // process: merging and waiting too), the rank-steps of its units once built, and the
  // bytes of its messages and answers (in bytes_sent and bytes_received too).
  double analysis_seconds = 0;
  int64_t analysis_steps = 0;
  uint64_t summary_bytes_sent = 0;
  uint64_t summary_bytes_received = 0;
};

struct MissingUnit {
  std::string path;   // the file or process folder
  int32_t rank = -1;  // the rank it holds, where known
  std::string reason;
};

// A process the first one gave up on: it did not answer within the timeout, or MPI
// reported it failed. Its units not received are left out of the diagnosis.
struct LostProcess {
  int32_t process = -1;
  std::string why;                 // "did not answer within 600 s", "failed: ..."
  std::vector<MissingUnit> units;  // its units the diagnosis lacks (none: lost after them)
};

struct FleetTrace {
  model::Trace trace;                // joined and reconstructed; the first process only
  std::vector<MissingUnit> missing;  // the first process only
  // The first process only. When not empty, the job cannot end normally (a lost process
  // never reaches MPI_Finalize): the caller writes the diagnosis, then Session::Abort.
  std::vector<LostProcess> lost;
  std::vector<ProcessFigures> figures;  // one per process answering; the first process only
  // The first process only: the trace's deviation map fitted from every unit's rows
  // (analysis_parts.h), for diagnose::DiagnoseOptions::deviation_map; none when the
  // analysis in parts did not run or its rows do not stand for the joined trace, and
  // deviation_map_note says why (the diagnosis then builds the map from the trace).
  std::optional<cause::DeviationMap> deviation_map;
  std::string deviation_map_note;
  // The causes fitted on that map in the fourth phase (PartsMerger::FittedCauses), for
  // diagnose::DiagnoseOptions::cause_analysis; none without the map.
  std::optional<cause::CauseAnalysis> cause_analysis;
  // Those causes' operators named where their ranks are (PartsMerger::cause_operators), for
  // diagnose::DiagnoseOptions::cause_operators; none without the causes.
  std::optional<std::vector<diagnose::OperatorsOfCause>> cause_operators;
  // The same for the findings' rows of every unit, for
  // diagnose::DiagnoseOptions::feature_rows, and why not.
  std::optional<localize::FeatureRows> feature_rows;
  std::string feature_rows_note;
  // The same for every unit's request rows merged by request id, for
  // diagnose::DiagnoseOptions::request_rows, and why not.
  std::optional<reconstruct::RequestRows> request_rows;
  std::string request_rows_note;
  // The same for the crash merged from every unit's scan (CrashFromParts), for
  // diagnose::DiagnoseOptions::crash, and why not.
  std::optional<cause::CrashReport> crash;
  std::string crash_note;
  // The same for the out-of-memory report of the log lines aligned on every unit's rows,
  // its trend merged from every unit's samples (OomFromParts), for
  // diagnose::DiagnoseOptions::oom_report, and why not.
  std::optional<cause::OomReport> oom;
  std::string oom_note;
  // The same for the request causes found from every unit's request rows merged, the
  // findings' rows and the log lines aligned on them (RequestCausesFromParts), for
  // diagnose::DiagnoseOptions::request_causes, and why not.
  std::optional<std::vector<cause::Hypothesis>> request_causes;
  std::string request_causes_note;
  // The same for the hang scan with its waits from every unit's collectives (HangFromParts),
  // for diagnose::DiagnoseOptions::hang_report, and why not.
  std::optional<cause::HangReport> hang;
  std::string hang_note;
  // The same for the replay graph of the shown causes' windows from every unit's
  // (ReplayGraphFromParts), for diagnose::DiagnoseOptions::replay_graph, and why not.
  std::optional<cause::ReplayGraph> replay_graph;
  std::string replay_graph_note;
  // Why the log lines aligned on every unit's request rows (LogsAlignedOnParts), and the
  // run's reconstruction counters and notes recorded from the parts' plans, are not the
  // joined trace's; empty when they are (the diagnosis reads the joined trace's alike).
  std::string logs_note;
  std::string run_counters_note;
};

// Where each result of the analysis in parts came from, in FiguresJson's order:
// ("deviation_map", "findings", "requests", "logs", "counters", "crash", "oom",
// "request_causes", "hang", "replay") each "parts", or "the joined trace: " and why.
std::vector<std::pair<std::string, std::string>> PartsSources(const FleetTrace& fleet);

struct DistributedOptions {
  // With a folder, each process also writes the store of every unit it imports there,
  // and the first the set's manifest (store/store_set.h): a unit whose store cannot be
  // written is left out.
  std::string store_dir;
  // The longest the first process waits for one message from another: its view of the
  // inputs, a unit's header, each piece (1 GiB at most) of a unit, its figures. A process
  // that does not answer within it is lost (LostProcess); so is a process MPI reports
  // failed. The other processes wait on the first without a limit.
  double answer_timeout_seconds = 600;
  // The options the diagnosis fits its deviation map with (its --tune values).
  cause::DeviationOptions deviation;
  // The thresholds the diagnosis scans for a hang and reads an out-of-memory message with
  // (its --tune values).
  cause::HangOptions hang;
  cause::OomOptions oom;
  // The options the diagnosis fits its causes with (its --tune values and --alternatives):
  // the first process fits them on the map from the parts for the windows to replay.
  cause::CauseOptions causes;
};

// Every process of the session calls it with the same inputs; only the first gets
// the trace. Errors of the plan reach every process; a process that does not answer
// while the plan is shared is an error of the first process.
base::StatusOr<FleetTrace> OpenTraceDistributed(const Session& session,
                                                const std::vector<std::string>& inputs,
                                                const store::OpenOptions& options,
                                                const DistributedOptions& distributed = {});

// "teller: fleet {json}": what each process did (--timings of a distributed run), and
// where the analysis in parts' results came from (PartsSources).
std::string FiguresJson(const std::vector<ProcessFigures>& figures,
                        const std::vector<std::pair<std::string, std::string>>& sources = {});

// The diagnosis notes of the missing units (which ranks and what their absence hides),
// then one per lost process: which process, why, and the ranks it leaves unknown.
std::vector<std::string> MissingNotes(const std::vector<MissingUnit>& missing,
                                      const std::vector<LostProcess>& lost = {});

}  // namespace teller::fleet
