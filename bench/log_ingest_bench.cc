// teller's service-log import, timed in-process: writes LINES mixed engine log lines
// (vLLM request lines, SGLang decode batches, NCCL INFO, uvicorn access lines) to FILE,
// then imports it (read, sanitize, parse, intern, mine templates, append).
// Usage: log_ingest_bench FILE [LINES] (default 1,000,000)
// Prints one JSON line: lines, templates, seconds, cpu_seconds, peak RSS.
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <string>

#include "bench_util.h"
#include "import/importer.h"
#include "import/log_testing.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: log_ingest_bench FILE [LINES]\n");
    return 2;
  }
  const int64_t lines = argc > 2 ? std::strtoll(argv[2], nullptr, 10) : 1000000;
  {
    std::ofstream out(argv[1], std::ios::binary);
    for (int64_t i = 0; i < lines; ++i) out << teller::import::testing::MixedEngineLogLine(i);
    if (!out) {
      std::fprintf(stderr, "%s: cannot write\n", argv[1]);
      return 1;
    }
  }
  teller::model::Trace trace;
  teller::import::ImportOptions options;
  options.year_hint = 2025;
  const double start = teller::bench::NowSeconds();
  const std::clock_t cpu_start = std::clock();
  teller::base::Status status = teller::import::ImportLogFile(argv[1], options, &trace);
  const double cpu_seconds = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  const double seconds = teller::bench::NowSeconds() - start;
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", status.ToString().c_str());
    return 1;
  }
  std::printf(
      "{\"lines\":%zu,\"templates\":%zu,\"seconds\":%.6f,\"cpu_seconds\":%.6f,"
      "\"peak_rss_bytes\":%ld}\n",
      trace.logs.size(), trace.templates.size(), seconds, cpu_seconds,
      teller::bench::PeakRssBytes());
  return 0;
}
