// How a traced process ended, as the injection library leaves it in its process
// folder (`proc-*/exit_status`) for `teller record` to put into meta.json. One short
// text line written with plain syscalls, so a fatal-signal handler can write it:
//   "exit <code>\n"    normal exit with a known code (os._exit, teller_shutdown)
//   "exit\n"           normal exit through exit()/return from main, code unknown
//   "signal <n>\n"     a fatal signal (SIGSEGV, SIGABRT, ...) reached the handler
// A folder without the file means the process never reached either path: SIGKILL,
// the OOM killer, or a hang cut short by the launcher. When the command has ended,
// `teller record` writes one of these for such a folder:
//   "oom_killed\n"     the kernel log says the OOM killer killed its pid
//   "vanished\n"       no exit record and no kernel line: killed by SIGKILL
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace teller::capture {

inline constexpr const char* kExitStatusFileName = "exit_status";
// Side files of a process folder, folded into meta.json by `teller record`: one note
// per line ("cupti_activity: disabled: ..."), and CUPTI clock pairs, one
// "realtime_ns monotonic_ns gpu_ns" per line.
inline constexpr const char* kNotesFileName = "notes";
inline constexpr const char* kClockPairsFileName = "clock_pairs";
// Watch mode (`teller record --watch`): the last persist request the process served
// (a number and a newline), and what it has open, rewritten at every timer flush.
inline constexpr const char* kPersistedFileName = "persisted";
inline constexpr const char* kProgressFileName = "progress";
// Watch mode: the mark on a thread whose NVTX ranges were open when the ring was written.
inline constexpr const char* kRingWrittenMark = "teller.ring_written";

// An engine step (teller_step_begin) or the innermost NVTX push range of a thread,
// open since since_ns (CLOCK_MONOTONIC), whose name completed `completions` times
// before, the longest in longest_ns.
struct OpenWork {
  bool step = false;
  int64_t since_ns = 0;
  uint64_t completions = 0;
  int64_t longest_ns = 0;
  int64_t tid = 0;  // 0 for a step
  std::string name;
};

struct ProcessProgress {
  int64_t now_ns = 0;  // when the process wrote it
  std::vector<OpenWork> open;
  std::vector<int64_t> recent_step_ns;  // the last completed steps, oldest first
  uint64_t ring_bytes = 0;
};

// The side file's text: "now <ns>", one "step|range <since> <completions> <longest>
// <tid> <name>" line per open work, "recent_steps <ns>...", "ring_bytes <n>".
std::string FormatProgress(const ProcessProgress& progress);
// Lines it does not understand are skipped (a file from a newer teller).
ProcessProgress ParseProgress(std::string_view text);

// kVanished and kOomKilled are written by `teller record` after the fact.
enum class ExitKind { kUnknown, kExit, kSignal, kVanished, kOomKilled };

struct ProcessExit {
  ExitKind kind = ExitKind::kUnknown;  // kUnknown: no file (killed without a trace)
  int code = -1;                       // exit code, -1 unknown
  int signal = 0;                      // fatal signal number
  bool abnormal() const { return kind != ExitKind::kExit || code > 0; }
};

// Async-signal-safe: formats into a stack buffer, open/write/close only.
// Returns false when the file could not be written.
bool WriteExitStatus(const char* process_dir, ExitKind kind, int value);

// Parses the file's text; nullopt when it is not one of the lines above.
std::optional<ProcessExit> ParseExitStatus(std::string_view text);

// Reads proc_dir/exit_status; a missing or unreadable file gives kind kUnknown.
ProcessExit ReadExitStatus(const std::string& process_dir);

// "exited with status 1", "killed by signal 11 (SIGSEGV)", "ended without an exit
// record (SIGKILL or OOM kill?)".
std::string DescribeExit(const ProcessExit& exit);

}  // namespace teller::capture
