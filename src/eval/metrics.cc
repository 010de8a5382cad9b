#include "eval/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <utility>

namespace teller::eval {
namespace {

bool IsBleuWordByte(unsigned char c) { return std::isalnum(c) || c == '_' || c >= 0x80; }

using NgramCounts = std::map<std::vector<std::string>, int64_t>;

NgramCounts CountNgrams(const std::vector<std::string>& tokens, size_t n) {
  NgramCounts counts;
  for (size_t i = 0; i + n <= tokens.size(); ++i) {
    ++counts[std::vector<std::string>(tokens.begin() + i, tokens.begin() + i + n)];
  }
  return counts;
}

}  // namespace

// ---- Operator sets ----

base::StatusOr<SetMetrics> ComputeMacroSetMetrics(
    std::span<const std::vector<std::string>> predicted,
    std::span<const std::vector<std::string>> truth) {
  if (truth.empty()) return base::InvalidArgument("eval: operator-set metrics of no items");
  if (predicted.size() != truth.size()) {
    return base::InvalidArgument("eval: {} predicted sets but {} true sets", predicted.size(),
                                 truth.size());
  }
  SetMetrics metrics;
  metrics.items = static_cast<int64_t>(truth.size());
  for (size_t i = 0; i < truth.size(); ++i) {
    const SetScore score = ScoreSetPair(predicted[i], truth[i]);
    metrics.precision += score.precision;
    metrics.recall += score.recall;
    metrics.f1 += score.f1;
    metrics.jaccard += score.jaccard;
  }
  const double n = static_cast<double>(metrics.items);
  metrics.precision /= n;
  metrics.recall /= n;
  metrics.f1 /= n;
  metrics.jaccard /= n;
  return metrics;
}

base::StatusOr<SetMetrics> ComputeMacroPlusSetMetrics(
    std::span<const std::vector<std::string>> predicted,
    std::span<const std::vector<std::string>> truth, const FamilyOf& family_of) {
  if (!family_of) return base::InvalidArgument("eval: Macro+ needs a family function");
  auto to_families = [&](std::span<const std::vector<std::string>> sets) {
    std::vector<std::vector<std::string>> families;
    families.reserve(sets.size());
    for (const std::vector<std::string>& set : sets) {
      std::vector<std::string> mapped;
      mapped.reserve(set.size());
      for (const std::string& name : set) mapped.push_back(family_of(name));
      families.push_back(std::move(mapped));
    }
    return families;
  };
  return ComputeMacroSetMetrics(to_families(predicted), to_families(truth));
}

// ---- BLEU ----

std::vector<std::string> TokenizeForBleu(std::string_view text) {
  std::vector<std::string> tokens;
  std::string word;
  for (const char raw : text) {
    const auto c = static_cast<unsigned char>(raw);
    if (IsBleuWordByte(c)) {
      word.push_back(c < 0x80 ? static_cast<char>(std::tolower(c)) : raw);
      continue;
    }
    if (!word.empty()) tokens.push_back(std::move(word));
    word.clear();
    if (!std::isspace(c)) tokens.emplace_back(1, raw);
  }
  if (!word.empty()) tokens.push_back(std::move(word));
  return tokens;
}

base::StatusOr<BleuScores> ComputeCorpusBleu(std::span<const std::string> hypotheses,
                                             std::span<const std::vector<std::string>> references) {
  if (hypotheses.empty()) return base::InvalidArgument("eval: BLEU of an empty corpus");
  if (hypotheses.size() != references.size()) {
    return base::InvalidArgument("eval: BLEU: {} hypotheses but {} reference lists",
                                 hypotheses.size(), references.size());
  }
  constexpr size_t kMaxOrder = 4;
  BleuScores scores;
  for (size_t i = 0; i < hypotheses.size(); ++i) {
    if (references[i].empty()) {
      return base::InvalidArgument("eval: BLEU: hypothesis {} has no reference", i);
    }
    const std::vector<std::string> hypothesis = TokenizeForBleu(hypotheses[i]);
    std::vector<std::vector<std::string>> tokenized_references;
    for (const std::string& reference : references[i]) {
      tokenized_references.push_back(TokenizeForBleu(reference));
    }
    const auto hypothesis_length = static_cast<int64_t>(hypothesis.size());
    // Closest reference length; on a tie the shorter one.
    int64_t closest = -1;
    for (const auto& reference : tokenized_references) {
      const auto length = static_cast<int64_t>(reference.size());
      const int64_t distance = std::abs(length - hypothesis_length);
      const int64_t best_distance = std::abs(closest - hypothesis_length);
      if (closest < 0 || distance < best_distance ||
          (distance == best_distance && length < closest)) {
        closest = length;
      }
    }
    scores.hypothesis_length += hypothesis_length;
    scores.reference_length += closest;
    for (size_t n = 1; n <= kMaxOrder; ++n) {
      const NgramCounts hypothesis_counts = CountNgrams(hypothesis, n);
      // Clip each n-gram's count by its largest count in any one reference.
      NgramCounts max_reference_counts;
      for (const auto& reference : tokenized_references) {
        for (const auto& [ngram, count] : CountNgrams(reference, n)) {
          int64_t& best = max_reference_counts[ngram];
          best = std::max(best, count);
        }
      }
      int64_t hypothesis_ngrams = 0;
      for (const auto& [ngram, count] : hypothesis_counts) {
        const auto found = max_reference_counts.find(ngram);
        if (found != max_reference_counts.end()) {
          scores.matched_ngrams[n - 1] += std::min(count, found->second);
        }
        hypothesis_ngrams += count;
      }
      // As NLTK: a hypothesis shorter than n still adds 1 to the denominator.
      scores.total_ngrams[n - 1] += std::max<int64_t>(1, hypothesis_ngrams);
    }
  }
  const double c = static_cast<double>(scores.hypothesis_length);
  const double r = static_cast<double>(scores.reference_length);
  if (scores.hypothesis_length == 0) {
    scores.brevity_penalty = 0.0;
  } else {
    scores.brevity_penalty = c > r ? 1.0 : std::exp(1.0 - r / c);
  }
  if (scores.matched_ngrams[0] == 0) return scores;  // no unigram match: every BLEU-n is 0
  // Smoothing method 1: a zero match count becomes epsilon.
  constexpr double kEpsilon = 0.1;
  double log_precision_sum = 0.0;
  for (size_t n = 1; n <= kMaxOrder; ++n) {
    const auto matched = static_cast<double>(scores.matched_ngrams[n - 1]);
    const auto total = static_cast<double>(scores.total_ngrams[n - 1]);
    log_precision_sum += std::log((matched == 0.0 ? kEpsilon : matched) / total);
    scores.bleu[n - 1] =
        scores.brevity_penalty * std::exp(log_precision_sum / static_cast<double>(n));
  }
  return scores;
}

// ---- Low prior ----

uint64_t SplitMix64::Next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t SplitMix64::UniformBelow(uint64_t bound) {
  // Reject the top partial block so every residue is equally likely.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
  uint64_t value = Next();
  while (value >= limit) value = Next();
  return value % bound;
}

std::vector<int64_t> SampleWithoutReplacement(int64_t n, int64_t k, SplitMix64& rng) {
  std::vector<int64_t> pool(static_cast<size_t>(n));
  std::iota(pool.begin(), pool.end(), int64_t{0});
  for (int64_t i = 0; i < k; ++i) {
    const auto j = i + static_cast<int64_t>(rng.UniformBelow(static_cast<uint64_t>(n - i)));
    std::swap(pool[static_cast<size_t>(i)], pool[static_cast<size_t>(j)]);
  }
  pool.resize(static_cast<size_t>(k));
  return pool;
}

base::StatusOr<LowPriorResult> EvaluateAtPrior(std::span<const double> scores,
                                               std::span<const int> labels,
                                               const LowPriorOptions& options) {
  if (!(options.prior > 0.0 && options.prior < 1.0)) {
    return base::InvalidArgument("eval: prior {} is outside (0, 1)", options.prior);
  }
  if (options.repeats < 1) {
    return base::InvalidArgument("eval: low-prior repeats {} < 1", options.repeats);
  }
  TELLER_ASSIGN_OR_RETURN(const int64_t positive_count,
                          base::CheckScoredLabels(scores, labels, "low-prior evaluation"));
  std::vector<size_t> positives;
  std::vector<size_t> negatives;
  for (size_t i = 0; i < labels.size(); ++i) (labels[i] == 1 ? positives : negatives).push_back(i);
  if (positive_count == 0 || negatives.empty()) {
    return base::InvalidArgument(
        "eval: low-prior evaluation needs both classes ({} positives, {} negatives)",
        positive_count, negatives.size());
  }
  const double p = options.prior;
  const auto all_positives = static_cast<int64_t>(positives.size());
  const auto all_negatives = static_cast<int64_t>(negatives.size());
  LowPriorResult result;
  // Keep every negative and subsample positives; when there are too few positives
  // for that, keep every positive and subsample negatives instead.
  const auto wanted_positives =
      static_cast<int64_t>(std::llround(p * static_cast<double>(all_negatives) / (1.0 - p)));
  if (wanted_positives <= all_positives) {
    result.positives = wanted_positives;
    result.negatives = all_negatives;
  } else {
    result.positives = all_positives;
    result.negatives = std::min<int64_t>(
        all_negatives, std::llround(static_cast<double>(all_positives) * (1.0 - p) / p));
  }
  if (result.positives < 1 || result.negatives < 1) {
    return base::InvalidArgument(
        "eval: prior {} leaves an empty class ({} positives and {} negatives available)", p,
        all_positives, all_negatives);
  }
  result.realized_prior = static_cast<double>(result.positives) /
                          static_cast<double>(result.positives + result.negatives);

  SplitMix64 rng(options.seed);
  std::vector<double> accuracy, precision, recall, f1, auprc, auroc;
  std::vector<double> subset_scores;
  std::vector<int> subset_labels;
  for (int32_t repeat = 0; repeat < options.repeats; ++repeat) {
    subset_scores.clear();
    subset_labels.clear();
    auto take = [&](const std::vector<size_t>& pool, int64_t count) {
      if (count == static_cast<int64_t>(pool.size())) {
        for (const size_t index : pool) {
          subset_scores.push_back(scores[index]);
          subset_labels.push_back(labels[index]);
        }
        return;
      }
      for (const int64_t k :
           SampleWithoutReplacement(static_cast<int64_t>(pool.size()), count, rng)) {
        const size_t index = pool[static_cast<size_t>(k)];
        subset_scores.push_back(scores[index]);
        subset_labels.push_back(labels[index]);
      }
    };
    take(positives, result.positives);
    take(negatives, result.negatives);
    TELLER_ASSIGN_OR_RETURN(
        const base::BinaryMetrics binary,
        base::ComputeBinaryMetrics(base::ThresholdScores(subset_scores, options.threshold),
                                   subset_labels));
    accuracy.push_back(binary.accuracy);
    precision.push_back(binary.precision);
    recall.push_back(binary.recall);
    f1.push_back(binary.f1);
    TELLER_ASSIGN_OR_RETURN(const double ap,
                            base::ComputeAveragePrecision(subset_scores, subset_labels));
    TELLER_ASSIGN_OR_RETURN(const double roc, base::ComputeAuroc(subset_scores, subset_labels));
    auprc.push_back(ap);
    auroc.push_back(roc);
  }
  TELLER_ASSIGN_OR_RETURN(result.accuracy, base::ComputeMeanStd(accuracy));
  TELLER_ASSIGN_OR_RETURN(result.precision, base::ComputeMeanStd(precision));
  TELLER_ASSIGN_OR_RETURN(result.recall, base::ComputeMeanStd(recall));
  TELLER_ASSIGN_OR_RETURN(result.f1, base::ComputeMeanStd(f1));
  TELLER_ASSIGN_OR_RETURN(result.auprc, base::ComputeMeanStd(auprc));
  TELLER_ASSIGN_OR_RETURN(result.auroc, base::ComputeMeanStd(auroc));
  return result;
}

// ---- Markdown ----

std::string FormatMetric(double value, int decimals) {
  if (std::isnan(value)) return "n/a";
  return fmt::format("{:.{}f}", value, decimals);
}

base::StatusOr<std::string> RenderMarkdownTable(std::span<const std::string> header,
                                                std::span<const std::vector<TableCell>> rows) {
  if (header.empty()) return base::InvalidArgument("eval: Markdown table with no columns");
  auto escape = [](const std::string& text) {
    std::string out;
    for (const char c : text) {
      if (c == '|') out.push_back('\\');
      out.push_back(c == '\n' ? ' ' : c);
    }
    return out;
  };
  std::string out = "|";
  for (const std::string& name : header) out += " " + escape(name) + " |";
  out += "\n|";
  for (size_t i = 0; i < header.size(); ++i) out += " --- |";
  out += "\n";
  for (size_t r = 0; r < rows.size(); ++r) {
    if (rows[r].size() != header.size()) {
      return base::InvalidArgument("eval: Markdown table row {} has {} cells, expected {}", r,
                                   rows[r].size(), header.size());
    }
    out += "|";
    for (const TableCell& cell : rows[r]) {
      const std::string text = std::holds_alternative<double>(cell)
                                   ? FormatMetric(std::get<double>(cell))
                                   : escape(std::get<std::string>(cell));
      out += " " + text + " |";
    }
    out += "\n";
  }
  return out;
}

}  // namespace teller::eval
