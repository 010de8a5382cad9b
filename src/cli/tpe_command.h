// `teller tpe train|encode|stats|table`: Trace Pair Encoding (paper 3.5) from the
// command line. Register before parsing, run after:
//   cli::TpeCommand tpe(&app);
//   ... app.parse(argc, argv) ...
//   if (tpe.selected()) return tpe.Run();
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "base/status.h"
#include "step_records/corpus.h"
#include "tpe/tpe_vocabulary.h"

namespace teller::cli {

class TpeCommand {
 public:
  explicit TpeCommand(CLI::App* app);
  // True when one of the `teller tpe` verbs was given.
  bool selected() const;
  // Runs the chosen verb; returns the exit code (0 ok, 1 failure, 2 usage).
  int Run() const;

 private:
  // The corpus of train, encode or stats, from the inputs, --unit and --split.
  struct VerbCorpus {
    step_records::CorpusUnit unit = step_records::CorpusUnit::kRequestStep;
    std::vector<std::string> inputs;  // the inputs, or the --split dataset when none
    std::vector<step_records::CorpusSource> sources;
    step_records::Corpus corpus;
  };

  int RunTrain() const;   // tpe_command.cc
  int RunEncode() const;  // tpe_measure_command.cc, as the next two
  int RunStats() const;
  int RunTable() const;
  // These return kExitOk, or the exit code of the error they printed.
  int LoadCorpus(std::string_view verb, VerbCorpus* out) const;
  int LoadCorpora(const std::vector<step_records::CorpusSource>& sources,
                  step_records::CorpusUnit unit,
                  const std::vector<step_records::Corpus*>& corpora) const;
  static base::StatusOr<tpe::TpeVocabulary> LoadVocabulary(const std::string& path);
  static double SecondsSince(std::chrono::steady_clock::time_point start);

  CLI::App* tpe_ = nullptr;
  CLI::App* train_ = nullptr;
  CLI::App* encode_ = nullptr;
  CLI::App* stats_ = nullptr;
  CLI::App* table_ = nullptr;
  // Shared by the verbs.
  std::vector<std::string> inputs_;
  std::string unit_ = "request-step";
  std::string split_;
  bool quiet_ = false;
  // train
  std::string output_;
  size_t vocab_size_ = 512;
  int64_t min_pair_count_ = 2;
  std::string merge_siblings_ = "on";  // train, table: "on" or "off"
  // encode (one vocabulary), stats (one or more)
  std::string vocab_path_;
  std::vector<std::string> vocab_paths_;
  int64_t step_ = -1;
  int32_t rank_ = -1;
  std::string request_;
  std::string format_ = "text";
  size_t max_tokens_ = 0;
  // table
  std::string train_split_ = "request_disjoint:train";
  std::string test_split_ = "request_disjoint:test";
  std::vector<size_t> vocab_sizes_ = {256, 512, 1024};
  std::string json_output_;
};

}  // namespace teller::cli
