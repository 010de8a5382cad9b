#include "record/recorder.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include "base/file_util.h"
#include "capture/capture_options.h"
#include "capture/process_status.h"
#include "capture/redaction.h"
#include "record/kernel_log.h"
#include "record/watch.h"
#include "wire/bundle_writer.h"

extern char** environ;

namespace teller::record {
namespace {

namespace fs = std::filesystem;

constexpr const char* kControlFileName = "capture_control";
constexpr const char* kWatchFileName = "watch_request";
// --watch: how long the launcher waits for the processes to write their rings.
constexpr int64_t kPersistTimeoutNs = 3'000'000'000;
// --watch: after a failure line, how long the launcher waits for the command to die
// (the bundle is then whole: every line, every exit) before it diagnoses a live one.
constexpr int64_t kCrashGraceNs = 2'000'000'000;
constexpr size_t kMaxLineBytes = 64 << 10;

int64_t NowRealtimeNs() { return wire::SampleHostClocks().realtime_ns; }

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "unknown";
  return name;
}

bool IsFile(const std::string& path) {
  std::error_code ec;
  return !path.empty() && fs::is_regular_file(path, ec);
}

// ---- signals: a self-pipe carries them into the poll loop ----

int g_signal_pipe[2] = {-1, -1};

void OnSignal(int signal, siginfo_t* info, void*) {
  int saved_errno = errno;
  // A terminal's ^C goes to the whole foreground group, the child included: only
  // signals sent to teller itself (kill, SI_USER/SI_QUEUE) are forwarded.
  unsigned char message[2] = {static_cast<unsigned char>(signal),
                              static_cast<unsigned char>(info && info->si_code == SI_KERNEL)};
  (void)!write(g_signal_pipe[1], message, sizeof(message));
  errno = saved_errno;
}

constexpr int kHandledSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD};

class SignalScope {
 public:
  SignalScope() {
    if (pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return;
    for (int signal : kHandledSignals) {
      struct sigaction action {};
      action.sa_sigaction = OnSignal;
      action.sa_flags = SA_SIGINFO | SA_RESTART;
      sigemptyset(&action.sa_mask);
      sigaction(signal, &action, &old_[signal]);
    }
  }
  ~SignalScope() {
    for (int signal : kHandledSignals) sigaction(signal, &old_[signal], nullptr);
    close(g_signal_pipe[0]);
    close(g_signal_pipe[1]);
    g_signal_pipe[0] = g_signal_pipe[1] = -1;
  }
  int fd() const { return g_signal_pipe[0]; }

 private:
  struct sigaction old_[NSIG] = {};
};

// ---- output capture: split into lines, pass through, log ----

// Lines read from the command and lines known to be on disk (a successful flush
// after them): what a full disk cost the log.
struct LineCounter {
  uint64_t read = 0;
  uint64_t flushed = 0;
  void Count() { ++read; }
  void Flushed() { flushed = read; }
};

// --watch: the trigger that fired or waits for the processes' rings.
struct WatchState {
  std::optional<WatchTrigger> pending;  // seen, rings requested
  int64_t requested_ns = 0;             // realtime of the request
  bool fired = false;
  int64_t next_check_ns = 0;
};

class StreamTee {
 public:
  StreamTee(int fd, int passthrough_fd, std::string_view stream, LineCounter* lines,
            WatchState* watch)
      : fd_(fd), passthrough_fd_(passthrough_fd), stream_(stream), lines_(lines), watch_(watch) {}
  int fd() const { return fd_; }
  bool open() const { return fd_ >= 0; }

  // Reads what is there; returns false at EOF (and closes).
  bool Read(int64_t child_pid, wire::LogWriter* log, base::Status* log_status) {
    char buffer[65536];
    ssize_t n = read(fd_, buffer, sizeof(buffer));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
    if (n <= 0) {
      if (!pending_.empty()) Emit(child_pid, log, log_status);
      close(fd_);
      fd_ = -1;
      return false;
    }
    WriteAll(passthrough_fd_, buffer, static_cast<size_t>(n));
    const int64_t ts_ns = NowRealtimeNs();
    if (pending_.empty()) pending_ts_ns_ = ts_ns;
    for (ssize_t i = 0; i < n; ++i) {
      if (buffer[i] == '\n') {
        Emit(child_pid, log, log_status);
        pending_ts_ns_ = ts_ns;
        continue;
      }
      pending_.push_back(buffer[i]);
      if (pending_.size() >= kMaxLineBytes) {
        Emit(child_pid, log, log_status);
        pending_ts_ns_ = ts_ns;
      }
    }
    return true;
  }

  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  static void WriteAll(int fd, const char* data, size_t size) {
    while (size > 0) {
      ssize_t n = write(fd, data, size);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;  // a closed terminal must not stop the recording
      data += n;
      size -= static_cast<size_t>(n);
    }
  }
  void Emit(int64_t child_pid, wire::LogWriter* log, base::Status* log_status) {
    if (!pending_.empty() && pending_.back() == '\r') pending_.pop_back();
    wire::LogLineRecord line;
    line.ts_ns = pending_ts_ns_;
    line.pid = child_pid;
    line.stream = stream_;
    line.text = pending_;
    if (log && log_status->ok()) *log_status = log->Append(line);
    if (lines_) lines_->Count();
    if (watch_ && !watch_->pending && !watch_->fired && IsFailureLine(pending_)) {
      watch_->pending = WatchTrigger{"crash", "the command printed: " + pending_, NowRealtimeNs()};
    }
    pending_.clear();
  }

  int fd_;
  int passthrough_fd_;
  std::string_view stream_;
  LineCounter* lines_;
  WatchState* watch_;
  std::string pending_;
  int64_t pending_ts_ns_ = 0;
};

// ---- capture range over HTTP: GET /start, GET /stop ----

int ListenLocal(int port, base::Status* status) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    *status = base::IoError("capture range: socket: {}", std::strerror(errno));
    return -1;
  }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 || listen(fd, 8) != 0) {
    *status = base::IoError("capture range: cannot listen on 127.0.0.1:{}: {}", port,
                            std::strerror(errno));
    close(fd);
    return -1;
  }
  return fd;
}

// Serves one request; returns +1 for /start, 0 for /stop, -1 for anything else.
int ServeControlRequest(int listen_fd) {
  int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) return -1;
  pollfd wait{fd, POLLIN, 0};
  char request[1024] = {};
  ssize_t n = poll(&wait, 1, 1000) > 0 ? read(fd, request, sizeof(request) - 1) : 0;
  std::string_view text(request, n > 0 ? static_cast<size_t>(n) : 0);
  int result = text.starts_with("GET /start") || text.starts_with("POST /start") ? 1
               : text.starts_with("GET /stop") || text.starts_with("POST /stop") ? 0
                                                                                 : -1;
  const char* body = result == 1 ? "on\n" : result == 0 ? "off\n" : "use /start or /stop\n";
  std::string response = fmt::format(
      "HTTP/1.0 {}\r\nContent-Type: text/plain\r\nContent-Length: "
      "{}\r\n\r\n{}",
      result < 0 ? "404 Not Found" : "200 OK", std::strlen(body), body);
  (void)!write(fd, response.data(), response.size());
  close(fd);
  return result;
}

base::Status WriteControlFile(const std::string& path, bool on) {
  return base::WriteFileAtomic(path, on ? "on\n" : "off\n");
}

// ---- environment ----

std::map<std::string, std::string> CurrentEnvironment() {
  std::map<std::string, std::string> env;
  for (char** entry = environ; entry && *entry; ++entry) {
    std::string_view text(*entry);
    size_t eq = text.find('=');
    if (eq == std::string_view::npos) continue;
    env.emplace(std::string(text.substr(0, eq)), std::string(text.substr(eq + 1)));
  }
  return env;
}

std::string SignalDescription(int signal) {
  const char* name = sigabbrev_np(signal);
  return name ? fmt::format("signal {} (SIG{})", signal, name) : fmt::format("signal {}", signal);
}

// Ends of the exit records of every process folder.
void NoteProcessExits(const std::string& bundle, int child_pid, int child_status,
                      std::vector<std::string>* notes) {
  std::error_code ec;
  std::vector<fs::path> dirs;
  for (const fs::directory_entry& entry : fs::directory_iterator(bundle, ec)) {
    if (entry.is_directory(ec) && entry.path().filename().string().rfind("proc-", 0) == 0) {
      dirs.push_back(entry.path());
    }
  }
  std::sort(dirs.begin(), dirs.end());
  std::string kernel_log;  // read once, when a process ended without an exit record
  for (const fs::path& dir : dirs) {
    capture::ProcessExit exit = capture::ReadExitStatus(dir.string());
    std::string name = dir.filename().string();
    std::string pid_text = name.substr(name.rfind('-') + 1);
    // The launcher knows its own child's status exactly.
    if (pid_text == std::to_string(child_pid) && exit.kind != capture::ExitKind::kSignal) {
      if (WIFEXITED(child_status)) {
        exit.kind = capture::ExitKind::kExit;
        exit.code = WEXITSTATUS(child_status);
      } else if (WIFSIGNALED(child_status)) {
        exit.kind = capture::ExitKind::kSignal;
        exit.signal = WTERMSIG(child_status);
      }
    }
    if (exit.kind == capture::ExitKind::kUnknown) {
      // The command has ended, so this process did too, without a word: killed by
      // SIGKILL. The kernel log says whether the OOM killer did it; the folder keeps
      // the answer for the importer. When the command itself was killed by a signal
      // (Ctrl-C, a timeout, `--watch` stopping a hang), its processes went down with it:
      // not a cause of their own.
      if (kernel_log.empty()) kernel_log = ReadKernelLog();
      const std::string oom_line = FindOomKill(kernel_log, std::atoll(pid_text.c_str()));
      if (!oom_line.empty()) {
        exit.kind = capture::ExitKind::kOomKilled;
        notes->push_back(fmt::format("process {}: kernel: {}", name, oom_line));
      } else if (!WIFSIGNALED(child_status)) {
        exit.kind = capture::ExitKind::kVanished;
      }
      if (exit.kind != capture::ExitKind::kUnknown) {
        capture::WriteExitStatus(dir.c_str(), exit.kind, 0);
      }
    }
    if (exit.abnormal()) {
      notes->push_back(
          fmt::format("process {} ended abnormally: {}", name, capture::DescribeExit(exit)));
    }
    std::ifstream side_notes(dir / capture::kNotesFileName);
    for (std::string line; std::getline(side_notes, line);) {
      if (!line.empty()) notes->push_back(fmt::format("process {}: {}", name, line));
    }
  }
}

// CUPTI clock pairs the injected processes left in their folders.
std::vector<wire::ClockPair> ReadGpuClockPairs(const std::string& bundle) {
  std::vector<wire::ClockPair> pairs;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(bundle, ec)) {
    if (entry.path().filename().string().rfind("proc-", 0) != 0) continue;
    std::ifstream in(entry.path() / capture::kClockPairsFileName);
    wire::ClockPair pair;
    int64_t gpu_ns = 0;
    while (in >> pair.realtime_ns >> pair.monotonic_ns >> gpu_ns) {
      pair.gpu_ns = gpu_ns;
      pairs.push_back(pair);
    }
  }
  std::sort(pairs.begin(), pairs.end(),
            [](const auto& a, const auto& b) { return a.realtime_ns < b.realtime_ns; });
  return pairs;
}

// access(W_OK) says yes to root on any folder that is not on a read-only mount; a
// file created and removed tells the truth for everyone.
base::Status CheckWritable(const std::string& folder) {
  std::string probe = folder + "/.teller-write-check-XXXXXX";
  int fd = mkstemp(probe.data());
  if (fd < 0) {
    return base::IoError("{}: output folder is not writable: {}", folder, std::strerror(errno));
  }
  close(fd);
  unlink(probe.c_str());
  return base::OkStatus();
}

std::string ResolveAbsolute(const std::string& path) {
  std::error_code ec;
  fs::path absolute = fs::absolute(path, ec);
  return ec ? path : absolute.lexically_normal().string();
}

}  // namespace

bool IsSecretEnvironmentVariable(std::string_view name) {
  return capture::IsSecretEnvironmentName(name);
}

std::vector<std::string> EnvironmentNotes(const std::map<std::string, std::string>& env) {
  std::vector<std::string> notes;
  for (const auto& [name, value] : env) {
    if (!IsRecordedEnvironmentVariable(name)) continue;
    notes.push_back(fmt::format("env {}={}", name,
                                IsSecretEnvironmentVariable(name)
                                    ? std::string(capture::kRedacted)
                                    : capture::RedactCredentialText(value)));
  }
  return notes;
}

bool IsRecordedEnvironmentVariable(std::string_view name) {
  static constexpr std::string_view kExact[] = {"CUDA_VISIBLE_DEVICES",
                                                "NVIDIA_VISIBLE_DEVICES",
                                                "CUDA_LAUNCH_BLOCKING",
                                                "CUDA_DEVICE_MAX_CONNECTIONS",
                                                "OMP_NUM_THREADS",
                                                "WORLD_SIZE",
                                                "RANK",
                                                "LOCAL_RANK",
                                                "LOCAL_WORLD_SIZE",
                                                "MASTER_ADDR",
                                                "MASTER_PORT",
                                                "NODE_RANK",
                                                "GROUP_RANK",
                                                "CUDA_MODULE_LOADING",
                                                "HF_HUB_OFFLINE"};
  static constexpr std::string_view kPrefixes[] = {
      "NCCL_", "VLLM_", "SGLANG_", "TORCH_", "PYTORCH_", "TORCHINDUCTOR_", "TRITON_"};
  for (std::string_view exact : kExact) {
    if (name == exact) return true;
  }
  for (std::string_view prefix : kPrefixes) {
    if (name.starts_with(prefix)) return true;
  }
  return false;
}

std::vector<wire::DeviceInfo> ListGpus(const std::string& host, const std::string& proc_root) {
  std::vector<wire::DeviceInfo> devices;
  std::error_code ec;
  std::vector<fs::path> dirs;
  for (const fs::directory_entry& entry : fs::directory_iterator(proc_root, ec))
    dirs.push_back(entry.path());
  std::sort(dirs.begin(), dirs.end());
  for (const fs::path& dir : dirs) {
    std::ifstream in(dir / "information");
    if (!in) continue;
    wire::DeviceInfo device;
    device.host = host;
    std::string line;
    while (std::getline(in, line)) {
      size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string key = line.substr(0, colon);
      std::string value = line.substr(colon + 1);
      value.erase(0, value.find_first_not_of(" \t"));
      if (key == "Model") device.name = value;
      if (key == "GPU UUID") device.uuid = value;
      if (key == "Device Minor") device.index = std::atoi(value.c_str());
    }
    devices.push_back(device);
  }
  return devices;
}

InstallLayout FindInstallLayout(const std::string& exe_path) {
  InstallLayout layout;
  fs::path exe_dir = fs::path(exe_path).parent_path();
  std::vector<fs::path> lib_dirs;
  if (const char* env = std::getenv("TELLER_LIB_DIR"); env && *env) lib_dirs.emplace_back(env);
  lib_dirs.push_back(exe_dir / "lib");
  lib_dirs.push_back(exe_dir / ".." / "lib" / "teller");
  lib_dirs.push_back(exe_dir / ".." / "lib");
  for (const fs::path& dir : lib_dirs) {
    if (IsFile((dir / "libteller_capture.so").string())) {
      layout.lib_dir = dir.lexically_normal().string();
      layout.capture_lib = layout.lib_dir + "/libteller_capture.so";
      std::string nvtx = layout.lib_dir + "/libteller_nvtx_injection.so";
      std::string cupti = layout.lib_dir + "/libteller_cupti_injection.so";
      if (IsFile(nvtx)) layout.nvtx_injection = nvtx;
      if (IsFile(cupti)) layout.cupti_injection = cupti;
      break;
    }
  }
  std::vector<fs::path> python_dirs;
  if (const char* env = std::getenv("TELLER_PYTHON_DIR"); env && *env)
    python_dirs.emplace_back(env);
  python_dirs.push_back(exe_dir / "python" / "teller_hook");
  python_dirs.push_back(exe_dir / ".." / "share" / "teller" / "python" / "teller_hook");
#ifdef TELLER_DEFAULT_SOURCE_DIR
  python_dirs.push_back(fs::path(TELLER_DEFAULT_SOURCE_DIR) / "python" / "teller_hook");
#endif
  for (const fs::path& dir : python_dirs) {
    if (IsFile((dir / "sitecustomize.py").string())) {
      layout.python_dir = dir.lexically_normal().string();
      break;
    }
  }
  return layout;
}

namespace {

// --capture-range: "" (trace all the time), "signal" or "http:PORT".
struct CaptureRange {
  bool signal = false;
  int http_port = -1;
  bool controlled() const { return signal || http_port > 0; }  // starts off
};

base::StatusOr<CaptureRange> ParseCaptureRange(const std::string& text) {
  CaptureRange range;
  range.signal = text == "signal";
  if (text.rfind("http:", 0) == 0) {
    range.http_port = std::atoi(text.c_str() + 5);
    if (range.http_port <= 0 || range.http_port > 65535) {
      return base::InvalidArgument("--capture-range={}: expected http:PORT with PORT in 1..65535",
                                   text);
    }
  } else if (!text.empty() && !range.signal) {
    return base::InvalidArgument("--capture-range={}: expected signal or http:PORT", text);
  }
  return range;
}

// Which capture layers run (and why not) into meta.capture, and the injection
// variables for them into child_env.
base::Status PlanLayers(const RecordOptions& options,
                        const std::map<std::string, std::string>& parent_env,
                        wire::BundleMeta* meta, std::map<std::string, std::string>* child_env) {
  auto layer = [&](const char* name, bool enabled, std::string reason) {
    meta->capture.push_back({name, enabled, enabled ? "" : std::move(reason)});
  };
  const InstallLayout& layout = options.layout;
  if (layout.nvtx_injection.empty()) {
    layer("nvtx", false, "the NVTX injection library was not built (no NVTX headers) or not found");
  } else if (auto it = parent_env.find("NVTX_INJECTION64_PATH");
             it != parent_env.end() && !it->second.empty() && it->second != layout.nvtx_injection) {
    layer("nvtx", false, "NVTX_INJECTION64_PATH is already set (another tool): " + it->second);
  } else {
    (*child_env)["NVTX_INJECTION64_PATH"] = layout.nvtx_injection;
    layer("nvtx", true, "");
  }
  if (!options.cupti) {
    layer("cupti_activity", false, "--no-cupti");
  } else if (layout.cupti_injection.empty()) {
    layer("cupti_activity", false,
          "teller was built without CUPTI (TELLER_CUPTI=OFF or not found)");
  } else if (auto it = parent_env.find("CUDA_INJECTION64_PATH");
             it != parent_env.end() && !it->second.empty() &&
             it->second != layout.cupti_injection) {
    layer("cupti_activity", false,
          "CUDA_INJECTION64_PATH is already set (another tool): " + it->second);
  } else {
    (*child_env)["CUDA_INJECTION64_PATH"] = layout.cupti_injection;
    layer("cupti_activity", true, "");
  }
  if (!options.python_hooks) {
    layer("python_hooks", false, "--no-python-hooks");
    (*child_env)[capture::kEnvPythonHooks] = "0";
  } else if (layout.python_dir.empty() || layout.capture_lib.empty()) {
    layer("python_hooks", false,
          "the teller_hook Python folder or libteller_capture.so was not found");
    (*child_env)[capture::kEnvPythonHooks] = "0";
  } else {
    if (!options.python_hooks_file.empty() && !IsFile(options.python_hooks_file)) {
      return base::NotFound("--python-hooks={}: no such file", options.python_hooks_file);
    }
    auto it = parent_env.find("PYTHONPATH");
    (*child_env)["PYTHONPATH"] = it == parent_env.end() || it->second.empty()
                                     ? layout.python_dir
                                     : layout.python_dir + ":" + it->second;
    (*child_env)[capture::kEnvPythonHooks] =
        options.python_hooks_file.empty() ? "default" : ResolveAbsolute(options.python_hooks_file);
    layer("python_hooks", true, "");
  }
  layer("stdout", true, "");
  layer("stderr", true, "");
  return base::OkStatus();
}

// The first meta.json and the command's environment.
base::Status PlanRecording(const RecordOptions& options, const std::string& bundle,
                           const CaptureRange& range, const std::string& control_file,
                           wire::BundleMeta* meta, std::map<std::string, std::string>* child_env) {
  const std::string host = HostName();
  const std::map<std::string, std::string> parent_env = CurrentEnvironment();
  meta->tool_version = TELLER_VERSION;
  meta->host = host;
  meta->command = capture::RedactCommandLine(options.command);
  meta->start_time_ns = NowRealtimeNs();
  meta->clock_pairs.push_back(wire::SampleHostClocks());
  meta->devices = ListGpus(host);
  *child_env = parent_env;
  TELLER_RETURN_IF_ERROR(PlanLayers(options, parent_env, meta, child_env));
  (*child_env)[capture::kEnvOutputDir] = bundle;
  (*child_env)[capture::kEnvHost] = host;
  if (!options.layout.capture_lib.empty()) {
    (*child_env)[capture::kEnvCaptureLib] = options.layout.capture_lib;
  }
  if (options.watch.enabled) {
    (*child_env)[capture::kEnvRingMs] = std::to_string(options.watch.ring_ms);
    (*child_env)[capture::kEnvRingMb] = std::to_string(options.watch.ring_mb);
    (*child_env)[capture::kEnvWatchFile] = bundle + "/" + kWatchFileName;
    meta->notes.push_back(fmt::format(
        "watch: each process keeps its last {} s of events in memory (at most {} MiB); they "
        "are written when a trigger fires and when the process ends",
        options.watch.ring_ms / 1000, options.watch.ring_mb));
  }
  if (range.controlled()) {
    (*child_env)[capture::kEnvControlFile] = control_file;
    meta->notes.push_back(
        range.signal ? "capture range: starts off; SIGUSR1 to teller starts, SIGUSR2 stops"
                     : fmt::format("capture range: starts off; GET http://127.0.0.1:{}/start "
                                   "starts, /stop stops",
                                   range.http_port));
  }
  for (std::string& note : EnvironmentNotes(parent_env)) meta->notes.push_back(std::move(note));
  return base::OkStatus();
}

// The running command: its pid, the read ends of its stdout and stderr, and errno of
// a failed exec (0 when it runs).
struct Child {
  pid_t pid = -1;
  int out_fd = -1;
  int err_fd = -1;
  int exec_error = 0;
};

// Forks and execs the command without a shell (with signals' default dispositions),
// its output into pipes; waits until the exec succeeded or failed.
base::StatusOr<Child> StartChild(const std::vector<std::string>& command,
                                 const std::map<std::string, std::string>& child_env) {
  // Pipes for the child's output and for an exec failure.
  int out_pipe[2], err_pipe[2], exec_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0 ||
      pipe2(exec_pipe, O_CLOEXEC) != 0) {
    return base::IoError("teller record: pipe: {}", std::strerror(errno));
  }
  std::vector<std::string> env_entries;
  for (const auto& [name, value] : child_env) env_entries.push_back(name + "=" + value);
  std::vector<char*> envp, argv;
  for (std::string& entry : env_entries) envp.push_back(entry.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = command;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);

  const pid_t child = fork();
  if (child < 0) return base::IoError("teller record: fork: {}", std::strerror(errno));
  if (child == 0) {
    // Default signal dispositions and mask for the command.
    for (int signal : kHandledSignals) ::signal(signal, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    execvpe(argv[0], argv.data(), envp.data());
    int error = errno;
    (void)!write(exec_pipe[1], &error, sizeof(error));
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  close(exec_pipe[1]);
  Child started{child, out_pipe[0], err_pipe[0], 0};
  int exec_error = 0;
  if (read(exec_pipe[0], &exec_error, sizeof(exec_error)) == sizeof(exec_error)) {
    started.exec_error = exec_error;
  }
  close(exec_pipe[0]);
  return started;
}

// What the loop of a recording works with.
struct Session {
  const RecordOptions& options;
  CaptureRange range;
  std::string control_file;
  wire::BundleWriter* writer = nullptr;
  wire::LogWriter* log = nullptr;
  int listen_fd = -1;  // the capture-range HTTP port, -1 without one
  std::string bundle;
  WatchState* watch = nullptr;  // --watch only
  std::vector<WatchTrigger>* fired = nullptr;
};

base::Status WriteWatchRequest(const std::string& path, uint64_t request) {
  return base::WriteFileAtomic(path, fmt::format("{}\n", request));
}

// Every process folder has written its ring for the first request, or has ended.
bool RingsPersisted(const std::string& bundle) {
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(bundle, ec)) {
    if (entry.path().filename().string().rfind("proc-", 0) != 0) continue;
    if (fs::exists(entry.path() / capture::kExitStatusFileName, ec)) continue;
    auto persisted = base::ReadFile((entry.path() / capture::kPersistedFileName).string());
    if (!persisted.ok() || std::strtoull(persisted->c_str(), nullptr, 10) == 0) return false;
  }
  return true;
}

// The trigger into meta.json, the bundle and log flushed, then the caller's callback.
void FireTrigger(const Session& session, const WatchTrigger& trigger) {
  session.writer->mutable_meta()->notes.push_back(
      fmt::format("watch: {} trigger at {} ns: {}", trigger.kind, trigger.detected_realtime_ns,
                  trigger.detail));
  (void)session.log->Flush();
  (void)session.writer->Flush();
  session.fired->push_back(trigger);
  if (session.options.on_trigger) session.options.on_trigger(trigger);
}

// --watch, once per loop: looks for a hang or slowdown, asks the processes for their
// rings, and fires the trigger once they are written (or the wait ran out).
void StepWatch(const Session& session, bool child_done) {
  WatchState* state = session.watch;
  if (!state || state->fired) return;
  const int64_t now_ns = NowRealtimeNs();
  if (!state->pending && now_ns >= state->next_check_ns) {
    state->next_check_ns = now_ns + 250'000'000;
    state->pending =
        FindHang(session.bundle, session.options.watch, wire::SampleHostClocks().monotonic_ns);
  }
  if (!state->pending) return;
  if (state->requested_ns == 0) {
    state->requested_ns = now_ns;
    (void)WriteWatchRequest(session.bundle + "/" + kWatchFileName, 1);
  }
  if (child_done) return;  // the rings came with the exits: fired after the bundle closed
  const int64_t waited_ns = now_ns - state->requested_ns;
  const bool written = RingsPersisted(session.bundle) &&
                       (state->pending->kind != "crash" || waited_ns >= kCrashGraceNs);
  if (!written && waited_ns < std::max(kPersistTimeoutNs, kCrashGraceNs)) return;
  state->fired = true;
  FireTrigger(session, *state->pending);
}

// Passes the command's output through and into the log, serves capture-range
// toggles, forwards signals and samples clocks until the command exited and its
// pipes closed (or the drain timeout ran out). Returns its wait status.
int PumpChild(const Session& session, pid_t child, const SignalScope& signals, StreamTee* out,
              StreamTee* err, LineCounter* lines, base::Status* log_status) {
  const RecordOptions& options = session.options;
  wire::BundleWriter* writer = session.writer;
  bool child_done = false;
  int child_status = 0;
  int64_t next_clock_ns = NowRealtimeNs() + int64_t{options.clock_sample_interval_s} * 1000000000;
  int64_t drain_deadline_ns = 0;
  auto set_capture = [&](bool on, const char* how) {
    base::Status status = WriteControlFile(session.control_file, on);
    writer->mutable_meta()->notes.push_back(
        fmt::format("capture {} at {} ns ({}){}", on ? "started" : "stopped", NowRealtimeNs(), how,
                    status.ok() ? "" : ": " + status.message()));
  };
  while (true) {
    if (child_done && !out->open() && !err->open()) break;
    int64_t now_ns = NowRealtimeNs();
    if (child_done && drain_deadline_ns == 0) {
      drain_deadline_ns = now_ns + int64_t{options.drain_timeout_ms} * 1000000;
    }
    if (child_done && now_ns >= drain_deadline_ns) {
      // Descendants still hold the pipes open (daemons): stop reading.
      out->Close();
      err->Close();
      writer->mutable_meta()->notes.push_back(
          "the command exited while descendants kept its output open; their later output is "
          "not captured");
      break;
    }
    std::vector<pollfd> fds;
    if (out->open()) fds.push_back({out->fd(), POLLIN, 0});
    if (err->open()) fds.push_back({err->fd(), POLLIN, 0});
    fds.push_back({signals.fd(), POLLIN, 0});
    if (session.listen_fd >= 0) fds.push_back({session.listen_fd, POLLIN, 0});
    int ready = poll(fds.data(), fds.size(), child_done ? 50 : session.watch ? 100 : 1000);
    if (ready < 0 && errno != EINTR) break;
    for (const pollfd& p : fds) {
      if (!(p.revents & (POLLIN | POLLHUP | POLLERR))) continue;
      if (p.fd == out->fd())
        out->Read(child, session.log, log_status);
      else if (p.fd == err->fd())
        err->Read(child, session.log, log_status);
      else if (p.fd == session.listen_fd) {
        int request = ServeControlRequest(session.listen_fd);
        if (request >= 0) set_capture(request == 1, "http");
      } else if (p.fd == signals.fd()) {
        unsigned char message[2];
        while (read(signals.fd(), message, sizeof(message)) == sizeof(message)) {
          int signal = message[0];
          bool from_terminal = message[1] != 0;
          if (signal == SIGCHLD) continue;
          if (session.range.signal && (signal == SIGUSR1 || signal == SIGUSR2)) {
            set_capture(signal == SIGUSR1, "signal");
            continue;
          }
          if (!child_done && !(from_terminal && (signal == SIGINT || signal == SIGQUIT))) {
            kill(child, signal);
          }
        }
      }
    }
    if (!child_done) {
      pid_t done = waitpid(child, &child_status, WNOHANG);
      if (done == child) child_done = true;
    }
    if (log_status->ok()) *log_status = session.log->Flush();
    if (log_status->ok()) lines->Flushed();
    StepWatch(session, child_done);
    now_ns = NowRealtimeNs();
    if (now_ns >= next_clock_ns) {
      writer->AddClockPair(wire::SampleHostClocks());
      (void)writer->Flush();
      next_clock_ns = now_ns + int64_t{options.clock_sample_interval_s} * 1000000000;
    }
  }
  if (session.listen_fd >= 0) close(session.listen_fd);
  if (!child_done) waitpid(child, &child_status, 0);
  return child_status;
}

// The exit status, the notes on how the command and the log capture ended, the last
// clock pairs; closes the bundle.
void FinishRecording(const std::string& bundle, const Child& child, int child_status,
                     LineCounter* lines, base::Status log_status, wire::LogWriter* log,
                     wire::BundleWriter* writer, RecordResult* result) {
  if (child.exec_error != 0) {
    result->exit_code = child.exec_error == ENOENT ? 127 : 126;
  } else if (WIFEXITED(child_status)) {
    result->exit_code = WEXITSTATUS(child_status);
  } else if (WIFSIGNALED(child_status)) {
    result->exit_code = 128 + WTERMSIG(child_status);
    result->notes.push_back(
        fmt::format("the command was killed by {}", SignalDescription(WTERMSIG(child_status))));
  }
  wire::BundleMeta* final_meta = writer->mutable_meta();
  final_meta->notes.push_back(fmt::format("command exit status {}", result->exit_code));
  if (log_status.ok()) log_status = log->Flush();
  if (log_status.ok()) lines->Flushed();
  if (!log_status.ok()) {
    // The command's output still reached the terminal; only the log lost lines.
    final_meta->notes.push_back(
        fmt::format("log capture failed: {} of {} output lines were not written to logs/ ({})",
                    lines->read - lines->flushed, lines->read, log_status.message()));
    result->notes.push_back(final_meta->notes.back());
  }
  std::vector<std::string> exits;
  if (child.exec_error == 0) NoteProcessExits(bundle, child.pid, child_status, &exits);
  for (const std::string& note : exits) {
    final_meta->notes.push_back(note);
    result->notes.push_back(note);
  }
  for (const wire::ClockPair& pair : ReadGpuClockPairs(bundle)) writer->AddClockPair(pair);
  writer->AddClockPair(wire::SampleHostClocks());
  base::Status close_status = writer->Close();
  if (!close_status.ok()) {
    result->notes.push_back("writing the bundle failed: " + close_status.message());
  }
}

}  // namespace

base::StatusOr<RecordResult> RunRecord(const RecordOptions& options) {
  if (options.command.empty()) return base::InvalidArgument("teller record: no command to run");
  TELLER_ASSIGN_OR_RETURN(const CaptureRange range, ParseCaptureRange(options.capture_range));

  // The output folder: writable, and not a bundle already.
  const std::string bundle = ResolveAbsolute(options.output_dir);
  std::error_code ec;
  fs::create_directories(bundle, ec);
  if (ec) return base::IoError("{}: cannot create the output folder: {}", bundle, ec.message());
  TELLER_RETURN_IF_ERROR(CheckWritable(bundle));

  const std::string control_file = bundle + "/" + kControlFileName;
  wire::BundleMeta meta;
  std::map<std::string, std::string> child_env;
  TELLER_RETURN_IF_ERROR(PlanRecording(options, bundle, range, control_file, &meta, &child_env));
  TELLER_ASSIGN_OR_RETURN(std::unique_ptr<wire::BundleWriter> writer,
                          wire::BundleWriter::Create(bundle, meta));
  RecordResult result;
  WatchState watch;
  Session session{options, range,  control_file, writer.get(),    nullptr,
                  -1,      bundle, nullptr,      &result.triggers};
  if (options.watch.enabled) {
    session.watch = &watch;
    TELLER_RETURN_IF_ERROR(WriteWatchRequest(bundle + "/" + kWatchFileName, 0));
  }
  TELLER_ASSIGN_OR_RETURN(session.log, writer->OpenLog("console"));
  if (range.controlled()) TELLER_RETURN_IF_ERROR(WriteControlFile(control_file, false));
  base::Status listen_status;
  session.listen_fd = range.http_port > 0 ? ListenLocal(range.http_port, &listen_status) : -1;
  if (!listen_status.ok()) return listen_status;

  SignalScope signals;
  TELLER_ASSIGN_OR_RETURN(const Child child, StartChild(options.command, child_env));
  result.child_pid = child.pid;
  if (child.exec_error != 0) {
    result.notes.push_back(
        fmt::format("cannot run '{}': {}", options.command[0], std::strerror(child.exec_error)));
    writer->mutable_meta()->notes.push_back(result.notes.back());
  }
  if (options.on_started && child.exec_error == 0) options.on_started(child.pid);

  LineCounter lines;
  StreamTee out(child.out_fd, options.stdout_fd, "stdout", &lines, session.watch);
  StreamTee err(child.err_fd, options.stderr_fd, "stderr", &lines, session.watch);
  base::Status log_status;
  const int child_status = PumpChild(session, child.pid, signals, &out, &err, &lines, &log_status);
  FinishRecording(bundle, child, child_status, &lines, log_status, session.log, writer.get(),
                  &result);
  // --watch: a failure seen as the command ended, or a failed end, once the bundle is whole.
  // An end by SIGINT or SIGTERM is someone stopping the service, not a failure.
  const bool stopped = result.exit_code == 128 + SIGINT || result.exit_code == 128 + SIGTERM;
  if (session.watch && !watch.fired && (watch.pending || (result.exit_code != 0 && !stopped))) {
    WatchTrigger trigger = watch.pending.value_or(
        WatchTrigger{"exit", fmt::format("the command ended with status {}", result.exit_code),
                     NowRealtimeNs()});
    result.triggers.push_back(trigger);
    if (options.on_trigger) options.on_trigger(trigger);
  }
  return result;
}

}  // namespace teller::record
