#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "base/metrics.h"
#include "learn/log_comparison_models.h"
#include "learn/log_comparisons.h"
#include "learn/trainer_plugin.h"

namespace teller::learn {
namespace {

enum class Fault { kNone, kNewTemplate, kReordered, kSlow };

void AddLog(step_records::RecordSet* set, step_records::StepRecord* record,
            const std::string& pattern, const std::string& text) {
  step_records::RecordLog log;
  log.template_id = set->templates.Intern(pattern);
  log.text = text;
  record->logs.push_back(std::move(log));
}

// One request step: three scheduler lines in order (reversed for kReordered), an
// error line for kNewTemplate, a step ten times longer for kSlow.
step_records::StepRecord MakeStep(step_records::RecordSet* set, int request, int step, Fault fault,
                                  std::mt19937_64* rng) {
  step_records::StepRecord record;
  record.bundle = "run";
  record.request = "req-" + std::to_string(request);
  record.step = step;
  record.ranks = {0};
  record.duration_ns = 1000000 + static_cast<int64_t>((*rng)() % 200000);
  if (fault == Fault::kSlow) record.duration_ns *= 10;
  const std::string n = std::to_string((*rng)() % 500);
  std::vector<std::pair<std::string, std::string>> lines = {
      {"scheduler step <*> started", "scheduler step " + n + " started"},
      {"running batch of <*> tokens", "running batch of " + n + " tokens"},
      {"step <*> finished", "step " + n + " finished"}};
  if (fault == Fault::kReordered) std::reverse(lines.begin(), lines.end());
  if (fault == Fault::kNewTemplate) {
    lines.insert(lines.begin() + 1, {"cuda error out of memory allocating <*> bytes",
                                     "CUDA error: out of memory allocating " + n + " bytes"});
  }
  for (const auto& [pattern, text] : lines) AddLog(set, &record, pattern, text);
  record.has_labels = true;
  record.is_anomaly = fault != Fault::kNone;
  return record;
}

// Requests of ten steps; every seventh request is faulty from its fifth step on.
step_records::RecordSet MakeSet(int requests, Fault fault, uint64_t seed) {
  step_records::RecordSet set;
  std::mt19937_64 rng(seed);
  for (int q = 0; q < requests; ++q) {
    for (int s = 0; s < 10; ++s) {
      const bool faulty = q % 7 == 3 && s >= 5;
      set.records.push_back(MakeStep(&set, q, s, faulty ? fault : Fault::kNone, &rng));
    }
  }
  return set;
}

double Auroc(const LogComparisonScores& scores, const LogComparisonData& test) {
  std::vector<double> values(scores.scores.begin(), scores.scores.end());
  std::vector<int> labels;
  for (const LogComparisonRecord& r : test.records) labels.push_back(r.anomaly ? 1 : 0);
  auto auroc = base::ComputeAuroc(values, labels);
  EXPECT_TRUE(auroc.ok());
  return auroc.ok() ? *auroc : 0;
}

double FitAndRank(LogComparisonId id, Fault fault) {
  auto inputs = MakeLogComparisonInputs(MakeSet(28, fault, 1), MakeSet(14, fault, 2));
  EXPECT_TRUE(inputs.ok()) << inputs.status().message();
  if (!inputs.ok()) return 0;
  LogComparisonOptions options;
  options.threads = 1;
  auto scores = FitLogComparison(id, inputs->train, inputs->test, options);
  EXPECT_TRUE(scores.ok()) << scores.status().message();
  if (!scores.ok()) return 0;
  EXPECT_EQ(scores->scores.size(), inputs->test.records.size());
  EXPECT_GT(scores->parameters, 1000);
  EXPECT_LT(scores->parameters, 200000);
  for (float s : scores->scores) EXPECT_TRUE(std::isfinite(s));
  return Auroc(*scores, inputs->test);
}

TEST(LogComparisons, RobustLogRanksAnUnseenTemplateFirst) {
  EXPECT_GT(FitAndRank(LogComparisonId::kRobustLog, Fault::kNewTemplate), 0.9);
}

TEST(LogComparisons, RobustLogRanksReorderedLogsFirst) {
  EXPECT_GT(FitAndRank(LogComparisonId::kRobustLog, Fault::kReordered), 0.9);
}

TEST(LogComparisons, LanoBertRanksAnUnseenLineFirst) {
  EXPECT_GT(FitAndRank(LogComparisonId::kLanoBert, Fault::kNewTemplate), 0.9);
}

TEST(LogComparisons, Logs2GraphsRanksAnUnseenTemplateFirst) {
  EXPECT_GT(FitAndRank(LogComparisonId::kLogs2Graphs, Fault::kNewTemplate), 0.9);
}

TEST(LogComparisons, Logs2GraphsRanksAReversedTransitionFirst) {
  EXPECT_GT(FitAndRank(LogComparisonId::kLogs2Graphs, Fault::kReordered), 0.9);
}

TEST(LogComparisons, MadGanRanksSlowStepsFirst) {
  EXPECT_GT(FitAndRank(LogComparisonId::kMadGan, Fault::kSlow), 0.9);
}

TEST(LogComparisons, SameSeedSameScores) {
  auto inputs = MakeLogComparisonInputs(MakeSet(14, Fault::kNewTemplate, 1),
                                        MakeSet(7, Fault::kNewTemplate, 2));
  ASSERT_TRUE(inputs.ok());
  LogComparisonOptions options;
  options.threads = 1;
  options.epochs = 2;
  auto first =
      FitLogComparison(LogComparisonId::kLogs2Graphs, inputs->train, inputs->test, options);
  auto second =
      FitLogComparison(LogComparisonId::kLogs2Graphs, inputs->train, inputs->test, options);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->scores, second->scores);
}

TEST(LogComparisons, InputsShareWordsAndTemplateWeights) {
  auto inputs =
      MakeLogComparisonInputs(MakeSet(14, Fault::kNone, 1), MakeSet(14, Fault::kNewTemplate, 2));
  ASSERT_TRUE(inputs.ok());
  const LogComparisonData& train = inputs->train;
  const LogComparisonData& test = inputs->test;
  EXPECT_EQ(train.template_count(), 3);
  EXPECT_EQ(test.template_count(), 4);
  EXPECT_EQ(train.word_count, test.word_count);
  // Numbers are masked, so three distinct lines whatever the step numbers.
  EXPECT_EQ(train.lines.size(), 3u);
  // The error line's words are unknown to the train part.
  const auto& error_line = test.lines[static_cast<size_t>(test.records[35].lines[1])];
  EXPECT_EQ(std::count(error_line.begin(), error_line.end(), kWordUnknown), 6);
  for (int64_t t = 0; t < test.template_count(); ++t) {
    double norm = 0;
    for (int32_t d = 0; d < test.template_dims; ++d) {
      const float x = test.template_vectors[static_cast<size_t>(t * test.template_dims + d)];
      norm += static_cast<double>(x) * x;
    }
    EXPECT_NEAR(norm, 1.0, 1e-4);
  }
  // Windows of the request's last steps, the first step repeated before it.
  const size_t width = static_cast<size_t>(train.series_features);
  ASSERT_EQ(train.records[0].series.size(), width * 8);
  EXPECT_TRUE(std::equal(train.records[0].series.begin(), train.records[0].series.begin() + width,
                         train.records[0].series.end() - static_cast<std::ptrdiff_t>(width)));
  EXPECT_TRUE(std::equal(train.records[1].series.end() - static_cast<std::ptrdiff_t>(2 * width),
                         train.records[1].series.end() - static_cast<std::ptrdiff_t>(width),
                         train.records[0].series.end() - static_cast<std::ptrdiff_t>(width)));
}

TEST(LogComparisons, LogWordsMaskNumbersAndWildcards) {
  EXPECT_EQ(LogWords("[TP0] Decode batch, #token: 80 <*> x_y"),
            (std::vector<std::string>{"<num>", "decode", "batch", "token", "<num>", "x_y"}));
}

TEST(LogComparisons, EmptyOrLoglessInputsAreStatuses) {
  step_records::RecordSet empty;
  EXPECT_FALSE(MakeLogComparisonInputs(empty, MakeSet(7, Fault::kNone, 1)).ok());
  step_records::RecordSet train = MakeSet(14, Fault::kSlow, 1), test = MakeSet(7, Fault::kSlow, 2);
  for (auto* set : {&train, &test}) {
    for (auto& record : set->records) record.logs.clear();
  }
  auto inputs = MakeLogComparisonInputs(train, test);
  ASSERT_TRUE(inputs.ok());
  LogComparisonOptions options;
  options.epochs = 1;
  options.threads = 1;
  for (LogComparisonId id :
       {LogComparisonId::kRobustLog, LogComparisonId::kLanoBert, LogComparisonId::kLogs2Graphs}) {
    auto scores = FitLogComparison(id, inputs->train, inputs->test, options);
    ASSERT_FALSE(scores.ok());
    EXPECT_EQ(scores.status().code(), base::StatusCode::kNotFound);
    EXPECT_NE(scores.status().message().find("no log lines"), std::string::npos);
  }
  // MAD-GAN reads the step series, not the logs.
  EXPECT_TRUE(
      FitLogComparison(LogComparisonId::kMadGan, inputs->train, inputs->test, options).ok());
  LogComparisonData none;
  EXPECT_EQ(FitLogComparison(LogComparisonId::kMadGan, none, inputs->test, options).status().code(),
            base::StatusCode::kInvalidArgument);
}

TEST(LogComparisons, RobustLogNeedsBothClasses) {
  auto inputs = MakeLogComparisonInputs(MakeSet(7, Fault::kNone, 1), MakeSet(7, Fault::kNone, 2));
  ASSERT_TRUE(inputs.ok());
  auto scores = FitLogComparison(LogComparisonId::kRobustLog, inputs->train, inputs->test, {});
  ASSERT_FALSE(scores.ok());
  EXPECT_NE(scores.status().message().find("abnormal"), std::string::npos);
}

TEST(LogComparisons, ThePluginFitsThem) {
  auto plugin = LoadTrainerPlugin();
  ASSERT_TRUE(plugin.ok()) << plugin.status().message();
  ASSERT_NE((*plugin)->fit_log_comparison, nullptr);
  auto inputs = MakeLogComparisonInputs(MakeSet(14, Fault::kNewTemplate, 1),
                                        MakeSet(7, Fault::kNewTemplate, 2));
  ASSERT_TRUE(inputs.ok());
  LogComparisonOptions options;
  options.epochs = 1;
  auto scores = (*plugin)->fit_log_comparison(LogComparisonId::kRobustLog, inputs->train,
                                              inputs->test, options);
  ASSERT_TRUE(scores.ok()) << scores.status().message();
  EXPECT_EQ(scores->scores.size(), inputs->test.records.size());
  EXPECT_FLOAT_EQ(scores->threshold, 0.5f);
}

}  // namespace
}  // namespace teller::learn
