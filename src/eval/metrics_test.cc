#include "eval/metrics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

namespace teller::eval {
namespace {

constexpr double kTight = 1e-12;

// ---- Operator sets ----

using Sets = std::vector<std::vector<std::string>>;

TEST(SetMetricsTest, HandCheckedMacro) {
  const Sets predicted = {{"a", "b", "c"}, {}, {"a"}, {"x", "x", "y"}};
  const Sets truth = {{"b", "c", "d"}, {}, {}, {"x"}};
  const SetScore first = ScoreSetPair(predicted[0], truth[0]);
  EXPECT_NEAR(first.precision, 2.0 / 3.0, kTight);
  EXPECT_NEAR(first.f1, 2.0 / 3.0, kTight);
  EXPECT_NEAR(first.jaccard, 0.5, kTight);
  const SetScore both_empty = ScoreSetPair(predicted[1], truth[1]);
  EXPECT_EQ(both_empty.precision, 1.0);
  EXPECT_EQ(both_empty.jaccard, 1.0);
  const SetScore one_empty = ScoreSetPair(predicted[2], truth[2]);
  EXPECT_EQ(one_empty.recall, 0.0);
  EXPECT_EQ(one_empty.f1, 0.0);
  auto m = ComputeMacroSetMetrics(predicted, truth);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->items, 4);
  // Item 4 counts x once: P 1/2, R 1, F1 2/3, J 1/2.
  EXPECT_NEAR(m->precision, (2.0 / 3.0 + 1.0 + 0.0 + 0.5) / 4.0, kTight);
  EXPECT_NEAR(m->recall, (2.0 / 3.0 + 1.0 + 0.0 + 1.0) / 4.0, kTight);
  EXPECT_NEAR(m->f1, (2.0 / 3.0 + 1.0 + 0.0 + 2.0 / 3.0) / 4.0, kTight);
  EXPECT_NEAR(m->jaccard, (0.5 + 1.0 + 0.0 + 0.5) / 4.0, kTight);
}

TEST(SetMetricsTest, MacroPlusComparesFamilies) {
  const FamilyOf prefix = [](std::string_view name) {
    return std::string(name.substr(0, name.find('_')));
  };
  const Sets predicted = {{"gemm_fp16", "nccl_allreduce"}};
  const Sets truth = {{"gemm_bf16"}};
  auto exact = ComputeMacroSetMetrics(predicted, truth);
  auto lenient = ComputeMacroPlusSetMetrics(predicted, truth, prefix);
  ASSERT_TRUE(exact.ok() && lenient.ok());
  EXPECT_EQ(exact->f1, 0.0);
  EXPECT_NEAR(lenient->precision, 0.5, kTight);
  EXPECT_NEAR(lenient->recall, 1.0, kTight);
  EXPECT_NEAR(lenient->f1, 2.0 / 3.0, kTight);
  EXPECT_NEAR(lenient->jaccard, 0.5, kTight);
  EXPECT_FALSE(ComputeMacroPlusSetMetrics(predicted, truth, FamilyOf()).ok());
}

TEST(SetMetricsTest, EmptyOrMismatchedIsAnError) {
  EXPECT_FALSE(ComputeMacroSetMetrics(Sets{}, Sets{}).ok());
  EXPECT_FALSE(ComputeMacroSetMetrics(Sets{{"a"}}, Sets{{"a"}, {"b"}}).ok());
}

TEST(SetMetricsTest, JaccardAtMostF1AndF1BetweenPrecisionAndRecall) {
  SplitMix64 rng(5);
  const std::vector<std::string> names = {"a", "b", "c", "d", "e", "f"};
  Sets predicted, truth;
  for (int item = 0; item < 300; ++item) {
    std::vector<std::string> p, t;
    for (const std::string& name : names) {
      if (rng.UniformBelow(3) == 0) p.push_back(name);
      if (rng.UniformBelow(3) == 0) t.push_back(name);
    }
    const SetScore s = ScoreSetPair(p, t);
    EXPECT_LE(s.jaccard, s.f1 + kTight);
    EXPECT_GE(s.f1, std::min(s.precision, s.recall) - kTight);
    EXPECT_LE(s.f1, std::max(s.precision, s.recall) + kTight);
    predicted.push_back(std::move(p));
    truth.push_back(std::move(t));
  }
  auto m = ComputeMacroSetMetrics(predicted, truth);
  ASSERT_TRUE(m.ok());
  EXPECT_LE(m->jaccard, m->f1);
  // Mapping every name to one family can only help.
  auto plus = ComputeMacroPlusSetMetrics(predicted, truth,
                                         [](std::string_view) { return std::string("all"); });
  ASSERT_TRUE(plus.ok());
  EXPECT_GE(plus->f1, m->f1);
}

// ---- BLEU ----

TEST(BleuTest, Tokenizer) {
  EXPECT_EQ(
      TokenizeForBleu("  The NCCL all_reduce stalled, rank 3!"),
      (std::vector<std::string>{"the", "nccl", "all_reduce", "stalled", ",", "rank", "3", "!"}));
  EXPECT_TRUE(TokenizeForBleu(" \t\n").empty());
}

TEST(BleuTest, HandCheckedCatOnTheMat) {
  // Unigrams 5/6, bigrams 3/5, trigrams 1/4, 4-grams 0/3 -> 0.1/3 (smoothing), BP 1.
  auto b = ComputeCorpusBleu(std::vector<std::string>{"the cat sat on the mat"},
                             std::vector<std::vector<std::string>>{{"The cat is on the mat."}});
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->hypothesis_length, 6);
  EXPECT_EQ(b->reference_length, 7);  // the "." is a token
  const double bp = std::exp(1.0 - 7.0 / 6.0);
  EXPECT_NEAR(b->brevity_penalty, bp, kTight);
  EXPECT_NEAR(b->bleu[0], bp * 5.0 / 6.0, 1e-12);
  EXPECT_NEAR(b->bleu[1], bp * std::sqrt(5.0 / 6.0 * 3.0 / 5.0), 1e-12);
  EXPECT_NEAR(b->bleu[2], bp * 0.5, 1e-12);
  EXPECT_NEAR(b->bleu[3], bp * std::pow(0.125 * 0.1 / 3.0, 0.25), 1e-12);
  EXPECT_EQ(b->matched_ngrams[3], 0);
  EXPECT_EQ(b->total_ngrams[3], 3);
}

TEST(BleuTest, ClippingAndBrevity) {
  // Papineni's "the the the ..." example: 7 unigrams, "the" clipped to 2.
  auto clipped =
      ComputeCorpusBleu(std::vector<std::string>{"the the the the the the the"},
                        std::vector<std::vector<std::string>>{{"the cat is on the mat"}});
  ASSERT_TRUE(clipped.ok());
  EXPECT_NEAR(clipped->bleu[0], 2.0 / 7.0, kTight);
  // Two tokens against six: BP = exp(1 - 6/2), precisions 1.
  auto short_hyp =
      ComputeCorpusBleu(std::vector<std::string>{"the cat"},
                        std::vector<std::vector<std::string>>{{"the cat is on the mat"}});
  ASSERT_TRUE(short_hyp.ok());
  EXPECT_NEAR(short_hyp->bleu[0], std::exp(-2.0), kTight);
  EXPECT_NEAR(short_hyp->bleu[1], std::exp(-2.0), kTight);
  // Trigram and 4-gram totals count 1 each (NLTK): 0.1/1 smoothed.
  EXPECT_EQ(short_hyp->total_ngrams[2], 1);
  EXPECT_NEAR(short_hyp->bleu[2], std::exp(-2.0) * std::cbrt(0.1), kTight);
  // Closest reference length, the shorter on a tie (2 and 4 around 3).
  auto tie = ComputeCorpusBleu(std::vector<std::string>{"a b c"},
                               std::vector<std::vector<std::string>>{{"a b c d", "a b"}});
  ASSERT_TRUE(tie.ok());
  EXPECT_EQ(tie->reference_length, 2);
  EXPECT_EQ(tie->brevity_penalty, 1.0);
}

TEST(BleuTest, NltkDocumentationExamples) {
  const std::string hyp1 =
      "It is a guide to action which ensures that the military always obeys the commands of "
      "the party";
  const std::vector<std::string> refs1 = {
      "It is a guide to action that ensures that the military will forever heed Party commands",
      "It is the guiding principle which guarantees the military forces always being under the "
      "command of the Party",
      "It is the practical guide for the army always to heed the directions of the party"};
  const std::string hyp2 = "he read the book because he was interested in world history";
  const std::string ref2 = "he was interested in world history because he read the book";
  // nltk.translate.bleu_score docstrings (corpus_bleu / sentence_bleu, default weights).
  auto sentence = ComputeCorpusBleu(std::vector<std::string>{hyp1},
                                    std::vector<std::vector<std::string>>{refs1});
  ASSERT_TRUE(sentence.ok());
  EXPECT_NEAR(sentence->bleu[3], 0.5045666840058485, 1e-12);
  auto corpus = ComputeCorpusBleu(std::vector<std::string>{hyp1, hyp2},
                                  std::vector<std::vector<std::string>>{refs1, {ref2}});
  ASSERT_TRUE(corpus.ok());
  EXPECT_NEAR(corpus->bleu[3], 0.5920778868801042, 1e-12);
}

TEST(BleuTest, IdenticalTextScoresOne) {
  const std::vector<std::string> texts = {"Rank 3 stalls in all_reduce after step 120.",
                                          "kv cache allocation fails under memory pressure"};
  auto b = ComputeCorpusBleu(texts, std::vector<std::vector<std::string>>{{texts[0]}, {texts[1]}});
  ASSERT_TRUE(b.ok());
  for (int n = 0; n < 4; ++n) EXPECT_NEAR(b->bleu[n], 1.0, kTight) << "BLEU-" << n + 1;
}

TEST(BleuTest, EdgeCases) {
  using Refs = std::vector<std::vector<std::string>>;
  EXPECT_FALSE(ComputeCorpusBleu(std::vector<std::string>{}, Refs{}).ok());
  EXPECT_FALSE(ComputeCorpusBleu(std::vector<std::string>{"a"}, Refs{}).ok());
  EXPECT_FALSE(ComputeCorpusBleu(std::vector<std::string>{"a"}, Refs{{}}).ok());
  auto no_match = ComputeCorpusBleu(std::vector<std::string>{"x y z w"}, Refs{{"a b c d"}});
  ASSERT_TRUE(no_match.ok());
  for (double score : no_match->bleu) EXPECT_EQ(score, 0.0);
  auto empty_hyp = ComputeCorpusBleu(std::vector<std::string>{""}, Refs{{"a b"}});
  ASSERT_TRUE(empty_hyp.ok());
  EXPECT_EQ(empty_hyp->brevity_penalty, 0.0);
  EXPECT_EQ(empty_hyp->bleu[0], 0.0);
}

// ---- Low prior ----

TEST(SamplingTest, SplitMix64ReferenceAndDistinctSamples) {
  // First output of splitmix64 seeded with 1234567 (Vigna's reference code).
  SplitMix64 reference(1234567);
  EXPECT_EQ(reference.Next(), 6457827717110365317ULL);
  SplitMix64 rng(9);
  std::set<uint64_t> seen;
  for (int i = 0; i < 200; ++i) {
    const uint64_t value = rng.UniformBelow(5);
    ASSERT_LT(value, 5u);
    seen.insert(value);
  }
  EXPECT_EQ(seen.size(), 5u);
  const std::vector<int64_t> sample = SampleWithoutReplacement(50, 20, rng);
  ASSERT_EQ(sample.size(), 20u);
  const std::set<int64_t> distinct(sample.begin(), sample.end());
  EXPECT_EQ(distinct.size(), 20u);
  EXPECT_GE(*distinct.begin(), 0);
  EXPECT_LT(*distinct.rbegin(), 50);
}

struct ScoredData {
  std::vector<double> scores;
  std::vector<int> labels;
};

// Continuous scores: positives ~ U(0.3, 1), negatives ~ U(0, 0.7).
ScoredData SeparableData(int positives, int negatives) {
  SplitMix64 rng(42);
  ScoredData data;
  auto uniform = [&] { return static_cast<double>(rng.Next() >> 11) * 0x1.0p-53; };
  for (int i = 0; i < positives; ++i) {
    data.scores.push_back(0.3 + 0.7 * uniform());
    data.labels.push_back(1);
  }
  for (int i = 0; i < negatives; ++i) {
    data.scores.push_back(0.7 * uniform());
    data.labels.push_back(0);
  }
  return data;
}

TEST(LowPriorTest, NaturalPriorEqualsDirectComputation) {
  const ScoredData data = SeparableData(300, 700);
  auto binary = base::ComputeBinaryMetrics(base::ThresholdScores(data.scores, 0.5), data.labels);
  auto auroc = base::ComputeAuroc(data.scores, data.labels);
  auto ap = base::ComputeAveragePrecision(data.scores, data.labels);
  ASSERT_TRUE(binary.ok() && auroc.ok() && ap.ok());
  for (int32_t repeats : {1, 4}) {
    auto r = EvaluateAtPrior(data.scores, data.labels,
                             {.prior = 0.3, .repeats = repeats, .seed = 1, .threshold = 0.5});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->positives, 300);
    EXPECT_EQ(r->negatives, 700);
    EXPECT_NEAR(r->realized_prior, 0.3, kTight);
    EXPECT_NEAR(r->recall.mean, binary->recall, kTight);
    EXPECT_NEAR(r->precision.mean, binary->precision, kTight);
    EXPECT_NEAR(r->f1.mean, binary->f1, kTight);
    EXPECT_NEAR(r->accuracy.mean, binary->accuracy, kTight);
    EXPECT_NEAR(r->auroc.mean, *auroc, kTight);
    EXPECT_NEAR(r->auprc.mean, *ap, kTight);
    EXPECT_NEAR(r->auroc.std, 0.0, kTight);
    EXPECT_NEAR(r->f1.std, 0.0, kTight);
  }
}

TEST(LowPriorTest, AurocAndRecallArePriorInvariantInExpectation) {
  const ScoredData data = SeparableData(1000, 1000);
  const double auroc = *base::ComputeAuroc(data.scores, data.labels);
  const double recall =
      base::ComputeBinaryMetrics(base::ThresholdScores(data.scores, 0.5), data.labels)->recall;
  const double natural_ap = *base::ComputeAveragePrecision(data.scores, data.labels);
  double previous_ap = natural_ap;
  for (double prior : {0.2, 0.1, 0.05}) {
    auto r = EvaluateAtPrior(data.scores, data.labels,
                             {.prior = prior, .repeats = 50, .seed = 7, .threshold = 0.5});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->negatives, 1000);
    EXPECT_EQ(r->positives, std::llround(prior * 1000 / (1 - prior)));
    EXPECT_NEAR(r->auroc.mean, auroc, 0.01) << "prior " << prior;
    EXPECT_NEAR(r->recall.mean, recall, 0.03) << "prior " << prior;
    EXPECT_GT(r->auroc.std, 0.0);
    // Rarer positives: lower AUPRC.
    EXPECT_LT(r->auprc.mean, previous_ap) << "prior " << prior;
    previous_ap = r->auprc.mean;
  }
}

TEST(LowPriorTest, HighPriorSubsamplesNegatives) {
  const ScoredData data = SeparableData(100, 900);
  auto r = EvaluateAtPrior(data.scores, data.labels,
                           {.prior = 0.5, .repeats = 3, .seed = 1, .threshold = 0.5});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->positives, 100);
  EXPECT_EQ(r->negatives, 100);
  // Recall depends on the positives only, which are all kept.
  const double recall =
      base::ComputeBinaryMetrics(base::ThresholdScores(data.scores, 0.5), data.labels)->recall;
  EXPECT_NEAR(r->recall.mean, recall, kTight);
  EXPECT_NEAR(r->recall.std, 0.0, kTight);
}

TEST(LowPriorTest, DeterministicForASeed) {
  const ScoredData data = SeparableData(500, 500);
  const LowPriorOptions options{.prior = 0.05, .repeats = 10, .seed = 123, .threshold = 0.5};
  auto a = EvaluateAtPrior(data.scores, data.labels, options);
  auto b = EvaluateAtPrior(data.scores, data.labels, options);
  LowPriorOptions other = options;
  other.seed = 124;
  auto c = EvaluateAtPrior(data.scores, data.labels, other);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->auprc.mean, b->auprc.mean);
  EXPECT_EQ(a->f1.std, b->f1.std);
  EXPECT_NE(a->auprc.mean, c->auprc.mean);
}

TEST(LowPriorTest, BadOptionsAreErrors) {
  const ScoredData data = SeparableData(10, 3);
  EXPECT_FALSE(EvaluateAtPrior(data.scores, data.labels, {.prior = 0.0}).ok());
  EXPECT_FALSE(EvaluateAtPrior(data.scores, data.labels, {.prior = 1.0}).ok());
  EXPECT_FALSE(EvaluateAtPrior(data.scores, data.labels, {.prior = 0.5, .repeats = 0}).ok());
  // 3 negatives at a 1% prior round to 0 positives.
  EXPECT_FALSE(EvaluateAtPrior(data.scores, data.labels, {.prior = 0.01}).ok());
  const ScoredData one_class = SeparableData(10, 0);
  EXPECT_FALSE(EvaluateAtPrior(one_class.scores, one_class.labels, {.prior = 0.5}).ok());
}

// ---- Markdown ----

TEST(MarkdownTableTest, RendersRows) {
  const std::vector<std::string> header = {"View", "Prior", "F1"};
  const std::vector<std::vector<TableCell>> rows = {{std::string("H"), std::string("50%"), 0.92249},
                                                    {std::string("a|b"), std::string("5%"), NAN}};
  auto table = RenderMarkdownTable(header, rows);
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  EXPECT_EQ(*table,
            "| View | Prior | F1 |\n"
            "| --- | --- | --- |\n"
            "| H | 50% | 0.922 |\n"
            "| a\\|b | 5% | n/a |\n");
  const std::vector<std::vector<TableCell>> short_row = {{std::string("H")}};
  EXPECT_FALSE(RenderMarkdownTable(header, short_row).ok());
  EXPECT_EQ(FormatMetric(0.9995), "1.000");
  EXPECT_EQ(FormatMetric(0.12345, 2), "0.12");
}

}  // namespace
}  // namespace teller::eval
