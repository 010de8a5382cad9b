// The inputs of the log-based comparison methods of the paper's Table 2
// (learn/log_comparison_data.h) made from step records, without torch; the trainer
// plugin fits and scores them (learn/trainer_plugin.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "learn/log_comparison_data.h"
#include "step_records/step_records.h"

namespace teller::learn {

struct LogComparisonInputOptions {
  int32_t template_dims = 64;   // the semantic template vector (RobustLog, Logs2Graphs)
  int32_t max_line_words = 24;  // words kept per line
  int32_t max_words = 1024;     // vocabulary, most frequent train words first
  int32_t series_window = 8;    // steps of one request per MAD-GAN window
};

struct LogComparisonInputs {
  LogComparisonData train, test;
};

// The inputs of both parts. Templates become TF-IDF weighted sums of hashed word
// vectors (idf from the train part's templates), so an unseen template lands near the
// known ones that share its words; lines become word ids with numbers masked; the
// series is each record's statistical step features over the request's last steps.
base::StatusOr<LogComparisonInputs> MakeLogComparisonInputs(
    const step_records::RecordSet& train, const step_records::RecordSet& test,
    const LogComparisonInputOptions& options = {});

// The words of a log line or template: lowercase runs of letters, digits and '_';
// a word holding a digit becomes "<num>"; Drain's <*> is dropped.
std::vector<std::string> LogWords(std::string_view text);

}  // namespace teller::learn
