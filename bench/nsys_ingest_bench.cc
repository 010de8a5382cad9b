// teller's nsys import of one export, timed in-process.
#include <cstdio>

#include "bench_util.h"
#include "import/importer.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: nsys_ingest_bench FILE.sqlite\n");
    return 2;
  }
  teller::model::Trace trace;
  double start = teller::bench::NowSeconds();
  teller::base::Status status = teller::import::ImportNsys(argv[1], {}, &trace);
  double seconds = teller::bench::NowSeconds() - start;
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", status.ToString().c_str());
    return 1;
  }
  std::printf("{\"events\":%zu,\"seconds\":%.6f,\"peak_rss_bytes\":%ld}\n", trace.events.size(),
              seconds, teller::bench::PeakRssBytes());
  return 0;
}
