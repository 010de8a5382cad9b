// Measures SaveTrace and LoadTrace on a synthetic trace shaped like a serving capture
// (launch/kernel pairs, args on a quarter of the events, one node per event, a step
// per 1000 events, a log line per 100). Prints rows/s; not a test, no thresholds.
//   store_rate [events=1000000] [path=/tmp/teller_store_rate.db]
#include <sqlite3.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "store/trace_store.h"

namespace {

using namespace teller::model;  // NOLINT: a small tool

Trace MakeSyntheticTrace(size_t event_count) {
  Trace t;
  auto s = [&](std::string_view text) { return t.strings.Intern(text); };
  ProcessIndex p = t.processes.Append(1000, s("node0"), s("vllm"), 0, s("synthetic"));
  ThreadIndex host = t.threads.Append(p, 1000, s("MainThread"), false, -1);
  ThreadIndex stream = t.threads.Append(p, 7, s("stream 7"), true, 0);
  std::vector<teller::base::StringId> kernels, ops;
  for (int i = 0; i < 200; ++i) kernels.push_back(s("kernel_" + std::to_string(i)));
  for (int i = 0; i < 50; ++i) ops.push_back(s("aten::op_" + std::to_string(i)));
  StringId launch_name = s("cudaLaunchKernel"), key_grid = s("grid"), key_shape = s("shape");
  StringId shape = s("[[8, 4096], [4096, 4096]]");
  t.events.Reserve(event_count);
  constexpr size_t kEventsPerStep = 1000;
  for (size_t i = 0; i < event_count; ++i) {
    auto at = static_cast<int64_t>(i) * 1000;
    auto correlation = CorrelationId(static_cast<int64_t>(i / 2));
    EventRow row = (i % 2 == 0)
                       ? t.events.Append(Layer::kRt, EventPhase::kComplete, launch_name, p, host,
                                         at, 400, EventId::Invalid(), correlation)
                       : t.events.Append(Layer::kK, EventPhase::kComplete, kernels[i % 200], p,
                                         stream, at + 200, 5000, EventId::Invalid(), correlation);
    if (i % 4 == 1) {
      t.AddIntArg(row, key_grid, static_cast<int64_t>(i));
      t.AddStringArg(row, key_shape, shape);
    }
    StepIndex step(static_cast<uint32_t>(i / kEventsPerStep));
    t.nodes.event.push_back(row);
    t.nodes.parent.push_back(i % kEventsPerStep == 0 ? NodeIndex::Invalid()
                                                     : NodeIndex(static_cast<uint32_t>(i - 1)));
    t.nodes.depth.push_back(static_cast<uint16_t>(i % kEventsPerStep == 0 ? 0 : 1 + i % 2));
    t.nodes.step.push_back(step);
    if (i % 100 == 0) {
      t.AppendLog(at, p, 1000, 0, LogLevel::kInfo, LogStream::kStdout, StringId(0),
                  TemplateId::Invalid(), ops[i % 50], s("vllm.log"), static_cast<int64_t>(i));
    }
  }
  for (size_t step = 0; step * kEventsPerStep < event_count; ++step) {
    size_t begin = step * kEventsPerStep;
    size_t end = std::min(event_count, begin + kEventsPerStep);
    t.steps.event.push_back(EventRow(static_cast<uint32_t>(begin)));
    t.steps.process.push_back(p);
    t.steps.thread.push_back(host);
    t.steps.rank.push_back(0);
    t.steps.number.push_back(static_cast<int64_t>(step));
    t.steps.name.push_back(s("decode"));
    t.steps.phase.push_back(StepPhase::kDecode);
    t.steps.source.push_back(StepSource::kEngineStep);
    t.steps.start_ns.push_back(static_cast<int64_t>(begin) * 1000);
    t.steps.end_ns.push_back(static_cast<int64_t>(end) * 1000);
    t.steps.node_begin.push_back(NodeIndex(static_cast<uint32_t>(begin)));
    t.steps.node_end.push_back(NodeIndex(static_cast<uint32_t>(end)));
    t.steps.requests_begin.push_back(static_cast<uint32_t>(t.step_requests.size()));
    t.steps.requests_count.push_back(8);
    t.steps.global_step.push_back(static_cast<int64_t>(step));
    for (int r = 0; r < 8; ++r) {
      t.step_requests.push_back(RequestIndex(static_cast<uint32_t>(step / 4 * 8 + r)));
    }
  }
  size_t requests = (t.steps.size() / 4 + 1) * 8;
  for (size_t r = 0; r < requests; ++r) {
    t.requests.id.push_back(s("req-" + std::to_string(r)));
    t.requests.first_ns.push_back(0);
    t.requests.last_ns.push_back(1);
    t.requests.step_count.push_back(4);
  }
  t.reconstructed = true;
  return t;
}

size_t TotalRows(const Trace& t) {
  return t.strings.size() + t.processes.size() + t.threads.size() + t.events.size() +
         t.args.size() + t.collectives.size() + t.templates.size() + t.logs.size() +
         t.stats.entries().size() + t.nodes.size() + t.steps.size() + t.step_requests.size() +
         t.requests.size() + t.collective_matches.size();
}

// CPU seconds of this process (user + system): on a shared machine wall time
// includes waiting for a core, CPU time does not.
double CpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// The floor for loading events: a bare sqlite3_step scan reading every column.
double RawEventScanSeconds(const std::string& path, size_t* rows) {
  sqlite3* db = nullptr;
  sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_exec(db, "PRAGMA mmap_size=1073741824", nullptr, nullptr, nullptr);
  sqlite3_stmt* stmt = nullptr;
  sqlite3_prepare_v2(db, "SELECT * FROM events", -1, &stmt, nullptr);
  double cpu_start = CpuSeconds();
  int64_t sum = 0;
  *rows = 0;
  while (sqlite3_step(stmt) == SQLITE_ROW) {
    for (int i = 0; i < sqlite3_column_count(stmt); ++i) {
      if (sqlite3_column_type(stmt, i) == SQLITE_TEXT) {
        sum += sqlite3_column_bytes(stmt, i);
      } else {
        sum += sqlite3_column_int64(stmt, i);
      }
    }
    ++*rows;
  }
  double seconds = CpuSeconds() - cpu_start;
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  if (sum == 42) std::printf(" ");
  return seconds;
}

}  // namespace

int main(int argc, char** argv) {
  size_t events = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1000000;
  std::string path = argc > 2 ? argv[2] : "/tmp/teller_store_rate.db";
  Trace trace = MakeSyntheticTrace(events);
  size_t rows = TotalRows(trace);

  auto start = std::chrono::steady_clock::now();
  double cpu_start = CpuSeconds();
  teller::base::Status saved = teller::store::SaveTrace(trace, path);
  double write_s = Seconds(start);
  double write_cpu_s = CpuSeconds() - cpu_start;
  if (!saved.ok()) {
    std::fprintf(stderr, "store_rate: %s\n", saved.c_message());
    return 1;
  }
  start = std::chrono::steady_clock::now();
  cpu_start = CpuSeconds();
  auto loaded = teller::store::LoadTrace(path);
  double load_s = Seconds(start);
  double load_cpu_s = CpuSeconds() - cpu_start;
  if (!loaded.ok()) {
    std::fprintf(stderr, "store_rate: %s\n", loaded.status().c_message());
    return 1;
  }
  size_t scanned = 0;
  double scan_s = RawEventScanSeconds(path, &scanned);
  auto file_bytes = std::filesystem::file_size(path);
  std::printf("events %zu, rows in all tables %zu, file %.1f MB (%.1f bytes/row)\n", events, rows,
              file_bytes / 1e6, static_cast<double>(file_bytes) / static_cast<double>(rows));
  std::printf("write: %.3f s wall, %.3f s cpu: %.2f M rows/s, %.2f M events/s (by cpu time)\n",
              write_s, write_cpu_s, rows / write_cpu_s / 1e6, events / write_cpu_s / 1e6);
  std::printf("load:  %.3f s wall, %.3f s cpu: %.2f M rows/s, %.2f M events/s (by cpu time)\n",
              load_s, load_cpu_s, rows / load_cpu_s / 1e6, events / load_cpu_s / 1e6);
  std::printf("raw sqlite3_step scan of events: %.3f s cpu, %.2f M rows/s\n", scan_s,
              scanned / scan_s / 1e6);
  std::filesystem::remove(path);
  return loaded->events.size() == events ? 0 : 1;
}
