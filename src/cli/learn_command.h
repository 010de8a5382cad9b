// `teller train` (the root-cause model on a dataset split) and `teller paper-tables` (the
// paper's tables for the model and the comparison methods). Register before parsing, run
// after, like TpeCommand.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace teller::cli {

class LearnCommand {
 public:
  explicit LearnCommand(CLI::App* app);
  bool selected() const;
  int Run() const;

 private:
  int RunTrain() const;
  int RunPaperTables() const;

  CLI::App* train_ = nullptr;
  CLI::App* paper_tables_ = nullptr;
  // Shared.
  std::string dataset_;
  std::string split_ = "request_disjoint";
  std::string view_ = "horizontal";
  uint64_t seed_ = 1;
  int32_t threads_ = 2;
  bool quiet_ = false;
  bool explanations_ = true;
  bool record_statistics_ = true;
  bool operator_tokens_ = true;
  bool statistics_head_ = true;
  double modality_dropout_ = 0.3;
  double explain_weight_ = 1.0;
  double normal_share_ = 1.0;
  int summary_bins_ = 8;
  // train
  std::string output_;
  std::string variant_ = "full";
  int32_t epochs_ = 12;
  int32_t patience_ = 3;
  int32_t batch_size_ = 8;
  double learning_rate_ = 2e-3;
  int32_t dim_ = 64;
  double dropout_ = 0.1;
  int32_t max_tokens_ = 256;
  size_t tpe_vocab_ = 512;
  // paper-tables
  std::string model_;
  std::string train_part_ = "train";
  std::string test_part_ = "test";
  std::string methods_ = "all";
  std::string markdown_;
  std::string json_;
  int32_t repeats_ = 50;
};

}  // namespace teller::cli
