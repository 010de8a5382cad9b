// Test helpers for the capture and record tests: run a program with extra environment,
// and read a bundle back into per-process, per-thread event lists that are easy to
// compare ("push engine:engine.step", "pop", "mark tick", "start async", ...).
#pragma once

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "capture/process_status.h"
#include "wire/bundle_reader.h"

namespace teller::capture::testing {

struct RunResult {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;
  std::string output;  // stdout and stderr together
};

// Runs argv[0] (a path) with the current environment plus `env` (NAME=value).
// on_start(pid) runs in the parent right after the fork (e.g. to kill the child).
template <typename OnStart>
RunResult RunProgram(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                     OnStart on_start) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return {};
  pid_t pid = fork();
  if (pid == 0) {
    dup2(pipe_fds[1], 1);
    dup2(pipe_fds[1], 2);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    for (const std::string& entry : env) putenv(const_cast<char*>(entry.c_str()));
    std::vector<char*> args;
    for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(pipe_fds[1]);
  on_start(pid, pipe_fds[0]);
  RunResult result;
  char buffer[4096];
  ssize_t n;
  while ((n = read(pipe_fds[0], buffer, sizeof(buffer))) > 0) result.output.append(buffer, n);
  close(pipe_fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

inline RunResult RunProgram(const std::vector<std::string>& argv,
                            const std::vector<std::string>& env) {
  return RunProgram(argv, env, [](pid_t, int) {});
}

struct HostRangeCopy {
  std::string name;
  int layer = 0;
  int64_t tid = 0;
  int64_t start_ns = 0, end_ns = 0;
  std::map<std::string, std::string> args;  // lists joined by ','
};

struct DumpedProcess {
  std::string dir;
  int64_t pid = 0;
  std::string name, command;
  // As the last ProcessInfo record says them (a later one restates the process).
  int32_t rank = -1;
  int32_t world_size = -1;
  std::string rank_source;
  size_t process_records = 0;
  std::map<int64_t, std::string> thread_names;
  // By tid, in time order (buffered push/pop/mark and direct start/end interleave
  // differently in the file; ties keep file order).
  std::map<int64_t, std::vector<std::string>> events;
  std::map<int64_t, std::vector<std::pair<int64_t, std::string>>> timed_events;
  std::vector<HostRangeCopy> host_ranges;
  std::vector<int64_t> timestamps;  // of every timed record, in file order
  ProcessExit exit;
  size_t records = 0;

  // Events of the thread with this name (empty when none).
  std::vector<std::string> ThreadEvents(const std::string& thread_name) const {
    for (const auto& [tid, name] : thread_names) {
      if (name == thread_name) {
        auto it = events.find(tid);
        return it == events.end() ? std::vector<std::string>() : it->second;
      }
    }
    return {};
  }
};

class DumpVisitor : public wire::RecordVisitor {
 public:
  explicit DumpVisitor(DumpedProcess* out) : out_(out) {}
  void OnProcessInfo(const wire::ProcessInfoRecord& r) override {
    ++out_->records;
    out_->pid = r.pid;
    out_->name = r.name;
    out_->command = r.command;
    out_->rank = r.rank;
    out_->world_size = r.world_size;
    out_->rank_source = r.rank_source;
    ++out_->process_records;
  }
  void OnThreadInfo(const wire::ThreadInfoRecord& r) override {
    ++out_->records;
    out_->thread_names[r.tid] = std::string(r.name);
  }
  void OnRangePush(const wire::RangePushRecord& r) override {
    Add(r.tid, r.ts_ns, "push " + Qualified(r.domain, r.name));
  }
  void OnRangePop(const wire::RangePopRecord& r) override { Add(r.tid, r.ts_ns, "pop"); }
  void OnRangeStart(const wire::RangeStartRecord& r) override {
    Add(r.tid, r.ts_ns, "start " + Qualified(r.domain, r.name));
  }
  void OnRangeEnd(const wire::RangeEndRecord& r) override { Add(r.tid, r.ts_ns, "end"); }
  void OnMark(const wire::MarkRecord& r) override {
    Add(r.tid, r.ts_ns, "mark " + Qualified(r.domain, r.name));
  }
  void OnHostRange(const wire::HostRangeRecord& r) override {
    ++out_->records;
    HostRangeCopy copy;
    copy.name = r.name;
    copy.layer = static_cast<int>(r.layer);
    copy.tid = r.tid;
    copy.start_ns = r.start_ns;
    copy.end_ns = r.end_ns;
    for (const wire::Arg& arg : r.args) {
      std::string value;
      switch (arg.type) {
        case wire::ArgType::kInt:
          value = std::to_string(arg.int_value);
          break;
        case wire::ArgType::kDouble:
          value = std::to_string(arg.double_value);
          break;
        case wire::ArgType::kString:
          value = arg.string_value;
          break;
        case wire::ArgType::kStringList:
          for (size_t i = 0; i < arg.list_value.size(); ++i) {
            if (i > 0) value += ",";
            value += arg.list_value[i];
          }
          break;
      }
      copy.args[std::string(arg.key)] = value;
    }
    out_->host_ranges.push_back(copy);
  }

 private:
  static std::string Qualified(std::string_view domain, std::string_view name) {
    return domain.empty() ? std::string(name) : std::string(domain) + ":" + std::string(name);
  }
  void Add(int64_t tid, int64_t ts_ns, std::string text) {
    ++out_->records;
    out_->timed_events[tid].emplace_back(ts_ns, std::move(text));
    out_->timestamps.push_back(ts_ns);
  }
  DumpedProcess* out_;
};

struct DumpedBundle {
  wire::BundleMeta meta;
  std::vector<DumpedProcess> processes;
  std::vector<wire::ReadIssue> issues;
  std::vector<wire::LogLineRecord> logs;  // views copied into log_text
  std::vector<std::string> log_text, log_stream;
};

inline DumpedBundle DumpBundle(const std::string& directory) {
  DumpedBundle out;
  auto reader = wire::BundleReader::Open(directory);
  EXPECT_TRUE(reader.ok()) << reader.status().ToString();
  if (!reader.ok()) return out;
  out.meta = reader->meta();
  for (size_t i = 0; i < reader->processes().size(); ++i) {
    DumpedProcess process;
    process.dir = reader->processes()[i].path;
    DumpVisitor visitor(&process);
    auto stats = reader->ReadProcess(i, &visitor, &out.issues);
    EXPECT_TRUE(stats.ok()) << stats.status().ToString();
    process.exit = ReadExitStatus(process.dir);
    for (auto& [tid, timed] : process.timed_events) {
      std::stable_sort(timed.begin(), timed.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      for (auto& [ts, text] : timed) process.events[tid].push_back(text);
    }
    out.processes.push_back(std::move(process));
  }
  base::Status status = reader->ReadLogs(
      [&](const wire::LogLineRecord& line, const std::string&, int64_t) {
        out.logs.push_back(line);
        out.log_text.emplace_back(line.text);
        out.log_stream.emplace_back(line.stream);
      },
      &out.issues);
  EXPECT_TRUE(status.ok()) << status.ToString();
  for (size_t i = 0; i < out.logs.size(); ++i) {
    out.logs[i].text = out.log_text[i];
    out.logs[i].stream = out.log_stream[i];
  }
  return out;
}

}  // namespace teller::capture::testing
