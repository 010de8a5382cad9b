// teller's Kineto import of one file, timed in-process, on THREADS threads (default 0:
// one per core; 1 parses on one thread).
// Prints one JSON line: events, seconds, peak RSS, column bytes per event, string bytes.
#include <cstdio>
#include <cstdlib>

#include "bench_util.h"
#include "import/importer.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: kineto_ingest_bench FILE.json [THREADS]\n");
    return 2;
  }
  teller::model::Trace trace;
  double start = teller::bench::NowSeconds();
  teller::import::ImportOptions options;
  if (argc > 2) options.threads = std::atoi(argv[2]);
  teller::base::Status status = teller::import::ImportKineto(argv[1], options, &trace);
  double seconds = teller::bench::NowSeconds() - start;
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", status.ToString().c_str());
    return 1;
  }
  size_t events = trace.events.size();
  std::printf(
      "{\"events\":%zu,\"seconds\":%.6f,\"peak_rss_bytes\":%ld,\"column_bytes_per_event\":%.1f,"
      "\"string_bytes\":%zu}\n",
      events, seconds, teller::bench::PeakRssBytes(),
      events ? static_cast<double>(trace.ColumnBytes()) / events : 0.0, trace.strings.bytes());
  return 0;
}
