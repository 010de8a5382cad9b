// The paper's metrics (section 4.4) that only eval uses: operator-set Macro / Macro+
// scores, corpus BLEU-1..4, low-prior resampling and a Markdown table formatter.
// Classification and ranking metrics (F1, macro F1, AUROC, average precision, mean/std)
// are in base/metrics.h, where every stage may use them. Columnar inputs,
// deterministic, no dependency beyond src/base. Definitions: docs/metrics.md.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/metrics.h"
#include "base/status.h"

namespace teller::eval {

// ---- Operator-set metrics (paper: Operator set-Macro and Macro+) ----

// One item (base/metrics.h): duplicates count once.
using base::ScoreSetPair;
using base::SetScore;

struct SetMetrics {
  int64_t items = 0;
  double precision = 0.0;  // each the mean over items of the per-item value
  double recall = 0.0;
  double f1 = 0.0;
  double jaccard = 0.0;
};

// Macro: mean over items of ScoreSetPair. Errors on no items or different lengths.
base::StatusOr<SetMetrics> ComputeMacroSetMetrics(
    std::span<const std::vector<std::string>> predicted,
    std::span<const std::vector<std::string>> truth);

// Maps an operator name to its family (caller-supplied, e.g. localize's classifier).
using FamilyOf = std::function<std::string(std::string_view operator_name)>;

// Macro+: both sets of every item are first mapped through family_of, then Macro.
base::StatusOr<SetMetrics> ComputeMacroPlusSetMetrics(
    std::span<const std::vector<std::string>> predicted,
    std::span<const std::vector<std::string>> truth, const FamilyOf& family_of);

// ---- BLEU ----

// Lowercases ASCII; a token is a run of letters, digits, '_' and non-ASCII bytes;
// every other non-space character is a token of its own.
std::vector<std::string> TokenizeForBleu(std::string_view text);

struct BleuScores {
  std::array<double, 4> bleu{};             // bleu[n - 1] = BLEU-n (uniform weights 1/n up to n)
  std::array<int64_t, 4> matched_ngrams{};  // clipped counts, summed over the corpus
  // Hypothesis n-grams summed over the corpus, each hypothesis counting at least 1.
  std::array<int64_t, 4> total_ngrams{};
  double brevity_penalty = 0.0;
  int64_t hypothesis_length = 0;  // tokens over the corpus
  int64_t reference_length = 0;   // closest reference length per hypothesis, summed
};

// Corpus-level BLEU with clipped n-gram precisions, brevity penalty and Chen & Cherry
// smoothing method 1 (a zero match count becomes 0.1). references[i] holds the
// references of hypotheses[i]. Errors on an empty corpus, different lengths, or a
// hypothesis with no reference.
base::StatusOr<BleuScores> ComputeCorpusBleu(std::span<const std::string> hypotheses,
                                             std::span<const std::vector<std::string>> references);

// ---- Low-prior evaluation (paper 5.4: priors 50/20/10/5 %, 50 repeats) ----

struct LowPriorOptions {
  double prior = 0.1;      // target fraction of positives, in (0, 1)
  int32_t repeats = 50;    // resampled subsets
  uint64_t seed = 1;       // splitmix64 seed: same seed, same subsets on every platform
  double threshold = 0.5;  // predicted positive where score >= threshold
};

struct LowPriorResult {
  int64_t positives = 0;  // per subset
  int64_t negatives = 0;
  double realized_prior = 0.0;  // positives / (positives + negatives)
  base::MeanStd accuracy;
  base::MeanStd precision;
  base::MeanStd recall;
  base::MeanStd f1;
  base::MeanStd auprc;  // average precision
  base::MeanStd auroc;
};

// Keeps one class whole and subsamples the other without replacement (see
// docs/metrics.md for the exact rule). Errors on bad options or input, or when one
// class is absent.
base::StatusOr<LowPriorResult> EvaluateAtPrior(std::span<const double> scores,
                                               std::span<const int> labels,
                                               const LowPriorOptions& options);

// Fixed-algorithm generator so subsets do not depend on the standard library.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next();
  // Uniform in [0, bound) by rejection; bound > 0.
  uint64_t UniformBelow(uint64_t bound);

 private:
  uint64_t state_;
};

// k distinct indices of [0, n) by a partial Fisher-Yates shuffle; k <= n.
std::vector<int64_t> SampleWithoutReplacement(int64_t n, int64_t k, SplitMix64& rng);

// ---- Markdown table ----

using TableCell = std::variant<std::string, double>;

// "0.750": fixed with `decimals` digits; NaN as "n/a".
std::string FormatMetric(double value, int decimals = 3);

// Header row, "| --- |" separator, one line per row; doubles through FormatMetric,
// '|' in text escaped. Errors when a row's width differs from the header's.
base::StatusOr<std::string> RenderMarkdownTable(std::span<const std::string> header,
                                                std::span<const std::vector<TableCell>> rows);

}  // namespace teller::eval
