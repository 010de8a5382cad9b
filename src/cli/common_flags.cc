#include "cli/common_flags.h"

namespace teller::cli {

void AddCommonFlags(CLI::App* app, CommonFlags* flags, const std::string& what) {
  app->add_option("inputs", flags->inputs, what)->required();
  app->add_option("--rank", flags->rank,
                  "global rank of inputs that do not say (default: from file names like rank3)");
  app->add_option("--year", flags->year,
                  "year of log timestamps that carry none (default: from the trace)");
  app->add_flag("-q,--quiet", flags->quiet, "no progress on stderr");
  app->add_option("--threads", flags->threads,
                  "trace files (Kineto, nsys) and a bundle's process folders imported side by side "
                  "and a Kineto file's events parsed in parts (default 0: one per core; "
                  "the trace is the same whatever the count)")
      ->check(CLI::Range(0, 256));
}

store::OpenOptions ToOpenOptions(const CommonFlags& flags, base::ProgressSink* progress,
                                 bool reconstruct) {
  store::OpenOptions options;
  options.import.rank_hint = flags.rank;
  options.import.year_hint = flags.year;
  options.import.progress = progress;
  options.import.threads = flags.threads;
  options.reconstruct = reconstruct;
  return options;
}

void AddTimingsFlag(CLI::App* app, bool* timings) {
  app->add_flag("--timings", *timings,
                "print the wall time of each phase (import stages, reconstruct, store write) on "
                "stderr as one JSON line");
}

}  // namespace teller::cli
