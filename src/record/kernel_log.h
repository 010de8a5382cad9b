// The kernel's word on a process that ended without an exit record: the OOM killer's
// line for its pid ("Memory cgroup out of memory: Killed process 4242 (python3) ...",
// "Out of memory: Killed process ...", older kernels' "Kill process 4242 (...)").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace teller::record {

// The kernel log as /dev/kmsg gives it, one message per line without the record
// header; "" when it cannot be read (no permission, a container without it).
std::string ReadKernelLog();

// The OOM killer's line for pid in the log's text, "" when it has none.
std::string FindOomKill(std::string_view kernel_log, int64_t pid);

}  // namespace teller::record
