#include "eval/paper_tables.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <iterator>

#include "eval/single_stream_row.h"
#include "learn/model_folder.h"
#include "learn/trainer_plugin.h"
#include "step_records/dataset_testing.h"
#include "wire/labels_file.h"

namespace teller::eval {
namespace {

class PaperTables : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string folder = step_records::BuildSmallDataset("eval_tables_dataset");
    folder_ = new std::string(folder);
    train_ =
        new step_records::RecordSet(step_records::LoadParts(folder, "request_disjoint", {"train"}));
    test_ =
        new step_records::RecordSet(step_records::LoadParts(folder, "request_disjoint", {"test"}));
  }
  static void TearDownTestSuite() {
    delete train_;
    delete test_;
    delete folder_;
  }
  // An oracle that knows the labels, or says the opposite of them.
  static std::vector<ModelOutput> Oracle(bool inverted) {
    std::vector<ModelOutput> outputs;
    for (const step_records::StepRecord& r : test_->records) {
      ModelOutput o;
      const bool abnormal = r.is_anomaly != inverted;
      o.step_probability = abnormal ? 0.9 : 0.1;
      o.type_probability.assign(diagnose::kFaultCategoryCount, 0.0);
      const int type = static_cast<int>(r.fault_type);
      o.type_probability[inverted ? (type + 1) % diagnose::kFaultCategoryCount : type] = 1.0;
      if (!inverted) o.predicted_operators = r.AffectedOperators(test_->symbols);
      outputs.push_back(std::move(o));
    }
    return outputs;
  }
  static step_records::RecordSet* train_;
  static step_records::RecordSet* test_;
  static std::string* folder_;
};
std::string* PaperTables::folder_ = nullptr;
step_records::RecordSet* PaperTables::train_ = nullptr;
step_records::RecordSet* PaperTables::test_ = nullptr;

TEST_F(PaperTables, OracleScoresOneAndItsOppositeZero) {
  EvalOptions options;
  options.priors = {0.2};
  options.repeats = 5;
  auto good = EvaluateMethods(*train_, *test_, Oracle(false), "oracle", options);
  ASSERT_TRUE(good.ok()) << good.status().message();
  ASSERT_EQ(good->methods.size(), 1u);
  const MethodResult& m = good->methods[0];
  ASSERT_GT(good->test_anomalous, 0);
  EXPECT_DOUBLE_EQ(m.step.f1, 1.0);
  EXPECT_DOUBLE_EQ(m.auroc, 1.0);
  EXPECT_DOUBLE_EQ(m.type.macro_f1, 1.0);
  ASSERT_TRUE(m.has_operators);
  EXPECT_DOUBLE_EQ(m.operators.f1, 1.0);
  EXPECT_DOUBLE_EQ(m.operators_family.f1, 1.0);
  ASSERT_FALSE(m.per_engine.empty());
  for (const auto& [engine, metrics] : m.per_engine) {
    if (metrics.counts.true_positives + metrics.counts.false_negatives > 0) {
      EXPECT_DOUBLE_EQ(metrics.f1, 1.0) << engine;
    }
  }
  EXPECT_NE(good->Markdown().find("per engine"), std::string::npos);
  ASSERT_EQ(m.priors.size(), 1u);
  EXPECT_DOUBLE_EQ(m.priors[0].second.f1.mean, 1.0);

  auto bad = EvaluateMethods(*train_, *test_, Oracle(true), "inverted", options);
  ASSERT_TRUE(bad.ok());
  EXPECT_DOUBLE_EQ(bad->methods[0].step.f1, 0.0);
  EXPECT_DOUBLE_EQ(bad->methods[0].auroc, 0.0);
  EXPECT_DOUBLE_EQ(bad->methods[0].type.accuracy, 0.0);
  EXPECT_DOUBLE_EQ(bad->methods[0].operators.f1, 0.0);
}

TEST_F(PaperTables, ComparisonMethodsRunOnStatisticalAndStructuralFeatures) {
  EvalOptions options;
  options.methods = {"isolation_forest", "random_forest"};
  options.priors = {0.1};
  options.repeats = 5;
  auto report = EvaluateMethods(*train_, *test_, {}, "", options);
  ASSERT_TRUE(report.ok()) << report.status().message();
  // isolation forest: unsupervised only; random forest: plain and w/ struct.
  ASSERT_EQ(report->methods.size(), 3u);
  EXPECT_EQ(report->methods[0].group, "unsupervised");
  EXPECT_FALSE(report->methods[0].has_type);
  EXPECT_EQ(report->methods[1].group, "supervised");
  EXPECT_TRUE(report->methods[1].has_type);
  EXPECT_EQ(report->methods[2].group, "supervised w/ struct");
  for (const MethodResult& m : report->methods) {
    EXPECT_GE(m.step.f1, 0.0);
    EXPECT_LE(m.step.f1, 1.0);
    EXPECT_EQ(m.step.counts.total(), report->test_records);
  }
  const std::string markdown = report->Markdown();
  EXPECT_NE(markdown.find("random_forest"), std::string::npos);
  EXPECT_NE(markdown.find("Low fault prior"), std::string::npos);
  auto json = nlohmann::json::parse(report->Json());
  EXPECT_EQ(json["methods"].size(), 3u);

  options.methods = {"no_such_learner"};
  auto unknown = EvaluateMethods(*train_, *test_, {}, "", options);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("no_such_learner"), std::string::npos);
}

// The log comparison methods run in the trainer plugin; without it they are a note and the
// other rows still come.
TEST_F(PaperTables, LogComparisonsGiveRowsOrSayTheyNeedTheTrainer) {
  EvalOptions options;
  options.methods = {"isolation_forest", "mad_gan"};
  options.priors = {0.1};
  options.repeats = 5;
  options.threads = 1;
  auto report = EvaluateMethods(*train_, *test_, {}, "", options);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->methods.front().name, "isolation_forest");
  if (!learn::LoadTrainerPlugin().ok()) {
    ASSERT_EQ(report->methods.size(), 1u);
    ASSERT_EQ(report->notes.size(), 1u);
    EXPECT_NE(report->notes[0].find("need libtorch"), std::string::npos);
    EXPECT_NE(report->Markdown().find("Not run: mad_gan"), std::string::npos);
    return;
  }
  ASSERT_EQ(report->methods.size(), 2u);
  const MethodResult& gan = report->methods[1];
  EXPECT_EQ(gan.name, "mad_gan");
  EXPECT_EQ(gan.group, "log-based");
  EXPECT_EQ(gan.step.counts.total(), report->test_records);
  EXPECT_GE(gan.auroc, 0.0);
  EXPECT_LE(gan.auroc, 1.0);
  EXPECT_TRUE(report->notes.empty());
}

// The single-stream variant's row: step detection and fault type from its type token,
// and its decoded sentences scored in slot form (or a note without the trainer).
// "all" is every classical and log comparison method; the single-stream variant only by name.
TEST(ExpandMethodNames, AllIsEveryMethodButTheSingleStream) {
  const std::vector<std::string> all = ExpandMethodNames({"all"});
  for (const char* name : {"kmeans", "xgboost", "robustlog", "mad_gan"}) {
    EXPECT_EQ(std::count(all.begin(), all.end(), name), 1) << name;
  }
  EXPECT_EQ(std::count(all.begin(), all.end(), kSingleStreamMethod), 0);
  const std::vector<std::string> with =
      ExpandMethodNames({"all", std::string(kSingleStreamMethod)});
  ASSERT_EQ(with.size(), all.size() + 1);
  EXPECT_EQ(with.back(), kSingleStreamMethod);
  EXPECT_EQ(ExpandMethodNames({"svm", "gmm"}), (std::vector<std::string>{"svm", "gmm"}));
}

TEST_F(PaperTables, SingleStreamGivesARowOrSaysItNeedsTheTrainer) {
  EvalOptions options;
  options.methods = {"single_stream"};
  options.priors = {0.1};
  options.repeats = 5;
  options.threads = 1;
  options.single_stream_epochs = 2;
  auto report = EvaluateMethods(*train_, *test_, {}, "", options);
  ASSERT_TRUE(report.ok()) << report.status().message();
  if (!learn::LoadTrainerPlugin().ok()) {
    ASSERT_TRUE(report->methods.empty());
    ASSERT_EQ(report->notes.size(), 1u);
    EXPECT_NE(report->notes[0].find("single_stream"), std::string::npos);
    return;
  }
  ASSERT_EQ(report->methods.size(), 1u);
  const MethodResult& row = report->methods[0];
  EXPECT_EQ(row.name, "teller single-stream");
  EXPECT_TRUE(row.has_type);
  EXPECT_EQ(row.step.counts.total(), report->test_records);
  EXPECT_FALSE(row.type.classes.empty());
  ASSERT_EQ(report->slot_form.size(), 1u);
  const SlotFormScores& said = report->slot_form[0];
  EXPECT_LE(said.records, report->test_anomalous);
  EXPECT_LE(said.grounded, said.records);
  EXPECT_LE(said.type_right, said.records);
  if (said.records > 0) {
    EXPECT_FALSE(said.example.empty());
    EXPECT_GE(said.bleu.bleu[0], said.bleu.bleu[3]);
  }
  const auto json = nlohmann::json::parse(report->Json());
  EXPECT_EQ(json["slot_form"][0]["method"], "teller single-stream");
  EXPECT_NE(report->Markdown().find("Generated explanations, record level"), std::string::npos);
}

// The rules' explanations of every faulty run, scored against the references:
// BLEU-n lies in [0, 1] and falls with n; the report carries them.
TEST_F(PaperTables, RuleExplanationsAreScoredAgainstTheReferences) {
  auto dataset = step_records::ReadDataset(*folder_);
  ASSERT_TRUE(dataset.ok());
  std::unordered_set<std::string> keys;
  for (const char* part : {"train", "val", "test"}) {
    auto part_keys = step_records::ReadSplitKeys(*folder_, "request_disjoint", part);
    ASSERT_TRUE(part_keys.ok());
    keys.insert(part_keys->begin(), part_keys->end());
  }
  auto scores = ScoreRuleExplanations(*dataset, keys);
  ASSERT_TRUE(scores.ok()) << scores.status().message();
  EXPECT_GT(scores->runs, 0);
  // One per run whose injected fault changed something (a fault whose window lies past
  // the run's end has no reference to be held to).
  int64_t faulty = 0, phrasings = 0;
  for (const step_records::DatasetBundle& bundle : dataset->bundles) {
    std::ifstream in(bundle.path + "/labels.json");
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto labels = wire::ParseLabels(text, bundle.path);
    ASSERT_TRUE(labels.ok()) << labels.status().message();
    bool manifested = false;
    for (const wire::LabelsFault& fault : labels->faults) {
      if (!fault.manifested) continue;
      manifested = true;
      phrasings += static_cast<int64_t>(fault.explanations.size());
    }
    faulty += manifested;
  }
  EXPECT_EQ(scores->runs, faulty);
  // Table 9: every reference of the simulator against its own labels names the fault's
  // category and places it where and when it was; the rules' explanation is checked once
  // a run.
  EXPECT_EQ(scores->reference_criteria.checked, phrasings);
  EXPECT_EQ(scores->rule_criteria.checked, faulty);
  EXPECT_DOUBLE_EQ(scores->reference_criteria.share[static_cast<size_t>(Criterion::kAnomaly)], 1.0);
  EXPECT_DOUBLE_EQ(scores->reference_criteria.share[static_cast<size_t>(Criterion::kFaultType)],
                   1.0);
  EXPECT_DOUBLE_EQ(scores->reference_criteria.share[static_cast<size_t>(Criterion::kCausal)], 1.0);
  for (int n = 0; n < 4; ++n) {
    EXPECT_GE(scores->bleu.bleu[n], 0.0);
    EXPECT_LE(scores->bleu.bleu[n], 1.0);
    if (n > 0) {
      EXPECT_LE(scores->bleu.bleu[n], scores->bleu.bleu[n - 1]);
    }
  }
  EXPECT_FALSE(scores->example_hypothesis.empty());
  EXPECT_FALSE(scores->example_reference.empty());
  auto none = ScoreRuleExplanations(*dataset, {});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->runs, 0);

  auto report = EvaluateMethods(*train_, *test_, Oracle(false), "oracle", EvalOptions{});
  ASSERT_TRUE(report.ok());
  report->explanations = *scores;
  EXPECT_NE(report->Markdown().find("**Explanations**"), std::string::npos);
  EXPECT_NE(report->Markdown().find("| Causal consistency |"), std::string::npos);
  const auto json = nlohmann::json::parse(report->Json());
  EXPECT_EQ(json["explanations"]["runs"], scores->runs);
}

// The shipped model's decoder explains the same runs: every run gets a sentence (its
// grounded one, else the rules'), the share the grounding check dropped is counted, and
// the report shows both rows.
TEST_F(PaperTables, TheModelsExplanationsAreScoredBesideTheRules) {
  auto model = learn::LoadModel(learn::FindShippedModel(learn::kShippedDefaultModel));
  ASSERT_TRUE(model.ok()) << model.status().message();
  ASSERT_GT(model->options.model.explain_vocab, 0);
  auto dataset = step_records::ReadDataset(*folder_);
  ASSERT_TRUE(dataset.ok());
  auto keys = step_records::ReadSplitKeys(*folder_, "request_disjoint", "test");
  ASSERT_TRUE(keys.ok());
  auto scores = ScoreRuleExplanations(*dataset, *keys, nullptr, &*model);
  ASSERT_TRUE(scores.ok()) << scores.status().message();
  ASSERT_GT(scores->runs, 0);
  EXPECT_TRUE(scores->has_model);
  EXPECT_GT(scores->model_decoded, 0);
  EXPECT_LE(scores->model_decoded, scores->runs);
  EXPECT_LE(scores->model_grounded, scores->model_decoded);
  EXPECT_EQ(scores->model_criteria.checked, scores->runs);
  EXPECT_FALSE(scores->example_generated.empty());
  // A slot left in the sentence is one the trace could not fill: it was dropped.
  if (scores->example_generated.find('<') != std::string::npos) {
    EXPECT_FALSE(scores->example_problems.empty()) << scores->example_generated;
  }
  auto report = EvaluateMethods(*train_, *test_, Oracle(false), "oracle", EvalOptions{});
  ASSERT_TRUE(report.ok());
  report->explanations = *scores;
  EXPECT_NE(report->Markdown().find("| model (grounded, else rules) |"), std::string::npos);
  const auto json = nlohmann::json::parse(report->Json());
  EXPECT_EQ(json["explanations"]["model"]["decoded"], scores->model_decoded);
  EXPECT_EQ(json["explanations"]["model"]["grounded"], scores->model_grounded);
}

}  // namespace
}  // namespace teller::eval
