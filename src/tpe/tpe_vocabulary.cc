#include "tpe/tpe_vocabulary.h"

#include <map>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "base/file_util.h"

namespace teller::tpe {
namespace {

uint64_t PairKey(TokenId left, TokenId right) {
  return (static_cast<uint64_t>(left) << 32) | right;
}

// Replaces every non-overlapping (left, right), left to right, with merged.
void ApplyMerge(std::vector<TokenId>* word, TokenId left, TokenId right, TokenId merged) {
  size_t out = 0;
  for (size_t i = 0; i < word->size(); ++i) {
    if (i + 1 < word->size() && (*word)[i] == left && (*word)[i + 1] == right) {
      (*word)[out++] = merged;
      ++i;
    } else {
      (*word)[out++] = (*word)[i];
    }
  }
  word->resize(out);
}

}  // namespace

base::StatusOr<TpeVocabulary> TpeVocabulary::Train(const std::vector<Serialization>& corpus,
                                                   const SymbolTable& symbols,
                                                   const TpeTrainConfig& config) {
  TpeVocabulary vocab;
  vocab.config_ = config;
  for (size_t i = 0; i < symbols.size(); ++i) vocab.base_symbols_.emplace_back(symbols.Get(i));

  // Chains (maximal runs of mergeable boundaries) with their counts.
  std::map<std::vector<TokenId>, int64_t> chain_counts;
  std::vector<TokenId> chain;
  for (size_t step = 0; step < corpus.size(); ++step) {
    const Serialization& s = corpus[step];
    TELLER_RETURN_IF_ERROR(
        ValidateSerialization(s).WithContext(fmt::format("training step {}", step)));
    ++vocab.corpus_steps_;
    vocab.corpus_tokens_ += static_cast<int64_t>(s.size());
    chain.clear();
    for (size_t i = 0; i < s.size(); ++i) {
      if (s.symbol[i] >= symbols.size()) {
        return base::InvalidArgument("training step {}: token {} has symbol {} outside {} symbols",
                                     step, i, s.symbol[i], symbols.size());
      }
      if (i > 0 && !MergeableBoundary(s, i)) {
        ++chain_counts[chain];
        chain.clear();
      }
      chain.push_back(s.symbol[i]);
    }
    if (!chain.empty()) ++chain_counts[chain];
  }
  std::vector<std::vector<TokenId>> words;
  std::vector<int64_t> counts;
  for (auto& [word, count] : chain_counts) {
    if (word.size() < 2) continue;
    words.push_back(word);
    counts.push_back(count);
  }

  std::unordered_map<uint64_t, int64_t> pair_counts;
  while (vocab.size() < config.vocab_size) {
    pair_counts.clear();
    for (size_t w = 0; w < words.size(); ++w) {
      const std::vector<TokenId>& word = words[w];
      for (size_t i = 0; i + 1 < word.size(); ++i) {
        pair_counts[PairKey(word[i], word[i + 1])] += counts[w];
      }
    }
    uint64_t best_key = 0;
    int64_t best_count = 0;
    for (const auto& [key, count] : pair_counts) {
      if (count > best_count || (count == best_count && key < best_key)) {
        best_key = key;
        best_count = count;
      }
    }
    if (best_count < config.min_pair_count || best_count == 0) break;
    TokenId left = static_cast<TokenId>(best_key >> 32);
    TokenId right = static_cast<TokenId>(best_key & 0xffffffffu);
    TokenId merged = static_cast<TokenId>(vocab.size());
    vocab.merges_.emplace_back(left, right);
    size_t kept = 0;
    for (size_t w = 0; w < words.size(); ++w) {
      ApplyMerge(&words[w], left, right, merged);
      if (words[w].size() >= 2) {  // a single token has no pairs left
        if (kept != w) {
          words[kept] = std::move(words[w]);
          counts[kept] = counts[w];
        }
        ++kept;
      }
    }
    words.resize(kept);
    counts.resize(kept);
  }
  TELLER_RETURN_IF_ERROR(vocab.BuildExpansions());
  return vocab;
}

base::Status TpeVocabulary::BuildExpansions() {
  expansion_.clear();
  expansion_.reserve(size());
  for (size_t i = 0; i < base_symbols_.size(); ++i) {
    expansion_.push_back({static_cast<TokenId>(i)});
  }
  for (size_t k = 0; k < merges_.size(); ++k) {
    auto [left, right] = merges_[k];
    if (left >= expansion_.size() || right >= expansion_.size()) {
      return base::InvalidArgument("tpe vocabulary: merge {} uses token {} before it exists", k,
                                   std::max(left, right));
    }
    std::vector<TokenId> tokens = expansion_[left];
    tokens.insert(tokens.end(), expansion_[right].begin(), expansion_[right].end());
    expansion_.push_back(std::move(tokens));
  }
  return base::OkStatus();
}

std::string TpeVocabulary::TokenText(TokenId token) const {
  std::string text;
  for (TokenId base : expansion_[token]) {
    if (!text.empty()) text.push_back(' ');
    text += base_symbols_[base];
  }
  return text;
}

std::string TpeVocabulary::ToJson() const {
  nlohmann::json doc;
  doc["format"] = kVocabularyFormat;
  doc["version"] = kVocabularyVersion;
  doc["config"] = {{"vocab_size", config_.vocab_size},
                   {"min_pair_count", config_.min_pair_count},
                   {"corpus", config_.corpus},
                   {"corpus_steps", corpus_steps_},
                   {"corpus_tokens", corpus_tokens_},
                   {"tie_break", "count desc, then (left, right) asc"}};
  doc["base_symbols"] = base_symbols_;
  nlohmann::json merges = nlohmann::json::array();
  for (auto [left, right] : merges_) merges.push_back({left, right});
  doc["merges"] = std::move(merges);
  return doc.dump(1);
}

base::StatusOr<TpeVocabulary> TpeVocabulary::FromJson(std::string_view text,
                                                      std::string_view origin) {
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    return base::InvalidArgument("{}: not JSON, expected a TPE vocabulary", origin);
  }
  if (!doc.is_object() || !doc.contains("format") || doc["format"] != kVocabularyFormat) {
    return base::InvalidArgument("{}: \"format\" is not \"{}\"; not a TPE vocabulary", origin,
                                 kVocabularyFormat);
  }
  if (!doc.contains("version") || !doc["version"].is_number_integer() ||
      doc["version"].get<int>() != kVocabularyVersion) {
    return base::InvalidArgument("{}: vocabulary version {}, expected {}", origin,
                                 doc.contains("version") ? doc["version"].dump() : "missing",
                                 kVocabularyVersion);
  }
  TpeVocabulary vocab;
  try {
    const nlohmann::json& config = doc.at("config");
    vocab.config_.vocab_size = config.at("vocab_size").get<size_t>();
    vocab.config_.min_pair_count = config.at("min_pair_count").get<int64_t>();
    vocab.config_.corpus = config.at("corpus").get<std::string>();
    vocab.corpus_steps_ = config.at("corpus_steps").get<int64_t>();
    vocab.corpus_tokens_ = config.at("corpus_tokens").get<int64_t>();
    vocab.base_symbols_ = doc.at("base_symbols").get<std::vector<std::string>>();
    for (const nlohmann::json& merge : doc.at("merges")) {
      if (!merge.is_array() || merge.size() != 2) {
        return base::InvalidArgument("{}: merge {} is not a [left, right] pair", origin,
                                     merge.dump());
      }
      vocab.merges_.emplace_back(merge[0].get<TokenId>(), merge[1].get<TokenId>());
    }
  } catch (const nlohmann::json::exception& e) {
    return base::InvalidArgument("{}: malformed TPE vocabulary: {}", origin, e.what());
  }
  SymbolTable reserved;
  if (vocab.base_symbols_.size() < reserved.size()) {
    return base::InvalidArgument("{}: {} base symbols, expected at least the {} reserved ones",
                                 origin, vocab.base_symbols_.size(), reserved.size());
  }
  for (size_t i = 0; i < reserved.size(); ++i) {
    if (vocab.base_symbols_[i] != reserved.Get(i)) {
      return base::InvalidArgument("{}: base symbol {} is \"{}\", expected \"{}\"", origin, i,
                                   vocab.base_symbols_[i], reserved.Get(i));
    }
  }
  TELLER_RETURN_IF_ERROR(vocab.BuildExpansions().WithContext(origin));
  return vocab;
}

base::StatusOr<TpeVocabulary> TpeVocabulary::Load(const std::string& path) {
  TELLER_ASSIGN_OR_RETURN(std::string text, base::ReadFile(path));
  return FromJson(text, path);
}

base::Status TpeVocabulary::Save(const std::string& path) const {
  return base::WriteFileAtomic(path, ToJson());
}

}  // namespace teller::tpe
