// The log-based comparison methods of the paper's Table 2 (RobustLog, LAnoBERT, Logs2Graphs,
// MAD-GAN): what they read and return, as plain structs the trainer plugin
// (learn/trainer_plugin.h), the only part of teller that links libtorch, takes and
// gives back. learn/log_comparisons.h makes them from step records. What each keeps of
// its paper: docs/comparisons.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace teller::learn {

enum class LogComparisonId { kRobustLog, kLanoBert, kLogs2Graphs, kMadGan };
inline constexpr LogComparisonId kLogComparisons[] = {
    LogComparisonId::kRobustLog, LogComparisonId::kLanoBert, LogComparisonId::kLogs2Graphs,
    LogComparisonId::kMadGan};

inline constexpr std::string_view kLogComparisonNames[] = {"robustlog", "lanobert", "logs2graphs",
                                                           "mad_gan"};
inline std::string_view LogComparisonName(LogComparisonId id) {
  return kLogComparisonNames[static_cast<int>(id)];
}
inline std::optional<LogComparisonId> ParseLogComparisonId(std::string_view name) {
  for (LogComparisonId id : kLogComparisons) {
    if (LogComparisonName(id) == name) return id;
  }
  return std::nullopt;
}
// MAD-GAN reads the step time series; the others read the aligned log lines.
inline bool ReadsLogs(LogComparisonId id) { return id != LogComparisonId::kMadGan; }

// Word ids of a log line (LAnoBERT): the reserved ids, then the train part's words.
inline constexpr int32_t kWordPad = 0;
inline constexpr int32_t kWordUnknown = 1;
inline constexpr int32_t kWordMask = 2;
inline constexpr int32_t kFirstWord = 3;

// One step record.
struct LogComparisonRecord {
  std::vector<int32_t> templates;  // rows of LogComparisonData::template_vectors, time order
  std::vector<int32_t> lines;      // rows of LogComparisonData::lines, time order
  std::vector<float> series;       // series_window x series_features, oldest step first
  bool anomaly = false;
};

// One part of a split. Its tables are its own; train and test share how they are
// made (the word ids and the template weights come from the train part).
struct LogComparisonData {
  int32_t template_dims = 0;
  std::vector<float> template_vectors;      // templates x template_dims, unit length
  int32_t word_count = kFirstWord;          // every word id is below it
  std::vector<std::vector<int32_t>> lines;  // word ids of each distinct line
  int32_t series_window = 0;
  int32_t series_features = 0;
  std::vector<LogComparisonRecord> records;

  int64_t template_count() const {
    return template_dims > 0 ? static_cast<int64_t>(template_vectors.size()) / template_dims : 0;
  }
  bool has_logs() const {
    for (const LogComparisonRecord& r : records) {
      if (!r.templates.empty()) return true;
    }
    return false;
  }
};

struct LogComparisonOptions {
  uint64_t seed = 1;
  int32_t threads = 2;
  int32_t epochs = 0;  // 0: the method's default (docs/comparisons.md)
  int32_t dim = 32;    // hidden width
};

// Scores of the test records (higher: more anomalous) and the threshold that flags
// them: 0.5 for RobustLog (a probability), else the train scores' quantile at the
// train part's share of anomalies, as for the classical unsupervised methods.
struct LogComparisonScores {
  std::vector<float> scores;
  float threshold = 0;
  int64_t parameters = 0;
  int32_t epochs = 0;
  double train_seconds = 0;
};

}  // namespace teller::learn
