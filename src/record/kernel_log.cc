#include "record/kernel_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "fmt/format.h"

namespace teller::record {

std::string ReadKernelLog() {
  const int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return "";
  std::string text;
  char record[8192];
  for (;;) {
    const ssize_t n = read(fd, record, sizeof(record));
    if (n < 0 && errno == EPIPE) continue;  // overwritten while read: the next one
    if (n <= 0) break;                      // EAGAIN: the end
    // "priority,sequence,microseconds,flags;message\n" then continuation lines.
    const std::string_view line(record, static_cast<size_t>(n));
    const size_t header_end = line.find(';');
    if (header_end == std::string_view::npos) continue;
    std::string_view message = line.substr(header_end + 1);
    message = message.substr(0, message.find('\n'));
    text.append(message);
    text.push_back('\n');
  }
  close(fd);
  return text;
}

std::string FindOomKill(std::string_view kernel_log, int64_t pid) {
  for (const std::string_view verb : {"Killed process ", "Kill process "}) {
    const std::string needle = fmt::format("{}{} (", verb, pid);
    for (size_t at = kernel_log.find(needle); at != std::string_view::npos;
         at = kernel_log.find(needle, at + 1)) {
      const size_t begin = kernel_log.rfind('\n', at);
      const size_t line_begin = begin == std::string_view::npos ? 0 : begin + 1;
      const std::string_view line =
          kernel_log.substr(line_begin, kernel_log.find('\n', at) - line_begin);
      if (line.find("out of memory") != std::string_view::npos ||
          line.find("Out of memory") != std::string_view::npos ||
          line.find("oom") != std::string_view::npos) {
        return std::string(line);
      }
    }
  }
  return "";
}

}  // namespace teller::record
