// How a traced process ended, as the injection library leaves it in its process
// folder (`proc-*/exit_status`) for `teller record` to put into meta.json. One short
// text line written with plain syscalls, so a fatal-signal handler can write it:
//   "exit <code>\n"    normal exit with a known code (os._exit, teller_shutdown)
//   "exit\n"           normal exit through exit()/return from main, code unknown
//   "signal <n>\n"     a fatal signal (SIGSEGV, SIGABRT, ...) reached the handler
// A folder without the file means the process never reached either path: SIGKILL,
// the OOM killer, or a hang cut short by the launcher.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace teller::capture {

inline constexpr const char* kExitStatusFileName = "exit_status";
// Side files of a process folder, folded into meta.json by `teller record`: one note
// per line ("cupti_activity: disabled: ..."), and CUPTI clock pairs, one
// "realtime_ns monotonic_ns gpu_ns" per line.
inline constexpr const char* kNotesFileName = "notes";
inline constexpr const char* kClockPairsFileName = "clock_pairs";

enum class ExitKind { kUnknown, kExit, kSignal };

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
