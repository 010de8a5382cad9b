#include "capture/process_status.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <csignal>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace teller::capture {
namespace {

// Appends the decimal digits of value to buf at *pos (async-signal-safe).
void AppendInt(char* buf, size_t size, size_t* pos, int value) {
  char digits[16];
  size_t n = 0;
  unsigned magnitude = value < 0 ? static_cast<unsigned>(-(value + 1)) + 1u : value;
  do {
    digits[n++] = static_cast<char>('0' + magnitude % 10);
    magnitude /= 10;
  } while (magnitude > 0 && n < sizeof(digits));
  if (value < 0 && *pos < size) buf[(*pos)++] = '-';
  while (n > 0 && *pos < size) buf[(*pos)++] = digits[--n];
}

void AppendText(char* buf, size_t size, size_t* pos, const char* text) {
  while (*text && *pos < size) buf[(*pos)++] = *text++;
}

std::string_view SignalName(int signal) {
  switch (signal) {
    case SIGSEGV:
      return "SIGSEGV";
    case SIGABRT:
      return "SIGABRT";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGILL:
      return "SIGILL";
    case SIGKILL:
      return "SIGKILL";
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    default:
      return "";
  }
}

}  // namespace

bool WriteExitStatus(const char* process_dir, ExitKind kind, int value) {
  char path[4096];
  size_t pos = 0;
  AppendText(path, sizeof(path) - 1, &pos, process_dir);
  AppendText(path, sizeof(path) - 1, &pos, "/");
  AppendText(path, sizeof(path) - 1, &pos, kExitStatusFileName);
  path[pos] = '\0';
  char line[64];
  size_t n = 0;
  if (kind == ExitKind::kSignal) {
    AppendText(line, sizeof(line), &n, "signal ");
    AppendInt(line, sizeof(line), &n, value);
  } else if (kind == ExitKind::kVanished || kind == ExitKind::kOomKilled) {
    AppendText(line, sizeof(line), &n, kind == ExitKind::kVanished ? "vanished" : "oom_killed");
  } else {
    AppendText(line, sizeof(line), &n, "exit");
    if (value >= 0) {
      AppendText(line, sizeof(line), &n, " ");
      AppendInt(line, sizeof(line), &n, value);
    }
  }
  AppendText(line, sizeof(line), &n, "\n");
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  bool ok = write(fd, line, n) == static_cast<ssize_t>(n);
  close(fd);
  return ok;
}

std::optional<ProcessExit> ParseExitStatus(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  auto parse_int = [](std::string_view digits, int* out) {
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), *out);
    return ec == std::errc() && end == digits.data() + digits.size();
  };
  ProcessExit exit;
  if (text == "exit") {
    exit.kind = ExitKind::kExit;
    return exit;
  }
  if (text == "vanished" || text == "oom_killed") {
    exit.kind = text == "vanished" ? ExitKind::kVanished : ExitKind::kOomKilled;
    return exit;
  }
  if (text.starts_with("exit ") && parse_int(text.substr(5), &exit.code)) {
    exit.kind = ExitKind::kExit;
    return exit;
  }
  if (text.starts_with("signal ") && parse_int(text.substr(7), &exit.signal)) {
    exit.kind = ExitKind::kSignal;
    return exit;
  }
  return std::nullopt;
}

ProcessExit ReadExitStatus(const std::string& process_dir) {
  std::ifstream in(process_dir + "/" + kExitStatusFileName);
  if (!in) return {};
  std::stringstream text;
  text << in.rdbuf();
  return ParseExitStatus(text.str()).value_or(ProcessExit{});
}

std::string DescribeExit(const ProcessExit& exit) {
  switch (exit.kind) {
    case ExitKind::kExit:
      return exit.code >= 0 ? fmt::format("exited with status {}", exit.code) : "exited";
    case ExitKind::kSignal: {
      std::string_view name = SignalName(exit.signal);
      return name.empty() ? fmt::format("killed by signal {}", exit.signal)
                          : fmt::format("killed by signal {} ({})", exit.signal, name);
    }
    case ExitKind::kVanished:
      return "ended without an exit record while the command went on: killed by SIGKILL (the "
             "kernel log "
             "names no OOM kill)";
    case ExitKind::kOomKilled:
      return "killed by the kernel's OOM killer (SIGKILL)";
    case ExitKind::kUnknown:
      break;
  }
  return "ended without an exit record (killed by SIGKILL or the OOM killer?)";
}

std::string FormatProgress(const ProcessProgress& progress) {
  std::string text = fmt::format("now {}\n", progress.now_ns);
  for (const OpenWork& work : progress.open) {
    std::string name = work.name;
    std::replace(name.begin(), name.end(), '\n', ' ');
    text += fmt::format("{} {} {} {} {} {}\n", work.step ? "step" : "range", work.since_ns,
                        work.completions, work.longest_ns, work.tid, name);
  }
  text += "recent_steps";
  for (int64_t ns : progress.recent_step_ns) text += fmt::format(" {}", ns);
  text += fmt::format("\nring_bytes {}\n", progress.ring_bytes);
  return text;
}

ProcessProgress ParseProgress(std::string_view text) {
  ProcessProgress progress;
  std::istringstream lines{std::string(text)};
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string key;
    fields >> key;
    if (key == "now") {
      fields >> progress.now_ns;
    } else if (key == "ring_bytes") {
      fields >> progress.ring_bytes;
    } else if (key == "recent_steps") {
      for (int64_t ns = 0; fields >> ns;) progress.recent_step_ns.push_back(ns);
    } else if (key == "step" || key == "range") {
      OpenWork work;
      work.step = key == "step";
      if (!(fields >> work.since_ns >> work.completions >> work.longest_ns >> work.tid)) continue;
      std::getline(fields >> std::ws, work.name);
      progress.open.push_back(std::move(work));
    }
  }
  return progress;
}

}  // namespace teller::capture
