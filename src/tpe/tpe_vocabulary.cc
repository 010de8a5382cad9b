#include "tpe/tpe_vocabulary.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include <map>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/file_util.h"

namespace teller::tpe {
namespace {

// Token ids are kept below 2^30 so that a word element and a pair key pack into one
// integer each.
constexpr size_t kMaxTokens = size_t{1} << 30;
// A token may stand for at most this many base tokens (a whole long chain).
constexpr size_t kMaxExpansion = size_t{1} << 20;

// A pair (left, right) joined by relation, as one sortable key.
uint64_t PairKey(TokenId left, TokenId right, MergeRelation relation) {
  return (static_cast<uint64_t>(left) << 32) | (static_cast<uint64_t>(right) << 2) |
         static_cast<uint64_t>(relation);
}

// A word element: token << 2 | relation to the element before (0 for the first).
uint32_t Element(TokenId token, MergeRelation relation) {
  return (token << 2) | static_cast<uint32_t>(relation);
}

// Replaces every non-overlapping (left, right) joined by relation, left to right,
// with merged (which keeps left's relation to the element before).
void ApplyMerge(std::vector<uint32_t>* word, TokenId left, TokenId right, MergeRelation relation,
                TokenId merged) {
  const uint32_t right_element = Element(right, relation);
  size_t out = 0;
  for (size_t i = 0; i < word->size(); ++i) {
    uint32_t element = (*word)[i];
    if (i + 1 < word->size() && (element >> 2) == left && (*word)[i + 1] == right_element) {
      (*word)[out++] = (merged << 2) | (element & 3u);
      ++i;
    } else {
      (*word)[out++] = element;
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
  if (symbols.size() >= kMaxTokens) {
    return base::InvalidArgument("tpe training: {} symbols, at most {}", symbols.size(),
                                 kMaxTokens - 1);
  }
  for (size_t i = 0; i < symbols.size(); ++i) vocab.base_symbols_.emplace_back(symbols.Get(i));

  // Chains (maximal runs of mergeable boundaries) with their counts.
  std::map<std::vector<uint32_t>, int64_t> chain_counts;
  std::vector<uint32_t> chain;
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
      MergeRelation relation = MergeRelation::kSameNode;
      if (i > 0) {
        relation = BoundaryRelation(s, i, config.merge_siblings);
        if (relation == MergeRelation::kNone) {
          ++chain_counts[chain];
          chain.clear();
          relation = MergeRelation::kSameNode;
        }
      }
      chain.push_back(Element(s.symbol[i], chain.empty() ? MergeRelation::kSameNode : relation));
    }
    if (!chain.empty()) ++chain_counts[chain];
  }
  std::vector<std::vector<uint32_t>> words;
  std::vector<int64_t> counts;
  for (auto& [word, count] : chain_counts) {
    if (word.size() < 2) continue;
    words.push_back(word);
    counts.push_back(count);
  }

  std::unordered_map<uint64_t, int64_t> pair_counts;
  while (vocab.size() < config.vocab_size && vocab.size() < kMaxTokens) {
    pair_counts.clear();
    for (size_t w = 0; w < words.size(); ++w) {
      const std::vector<uint32_t>& word = words[w];
      for (size_t i = 0; i + 1 < word.size(); ++i) {
        pair_counts[PairKey(word[i] >> 2, word[i + 1] >> 2,
                            static_cast<MergeRelation>(word[i + 1] & 3u))] += counts[w];
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
    TokenId right = static_cast<TokenId>((best_key >> 2) & 0x3fffffffu);
    MergeRelation relation = static_cast<MergeRelation>(best_key & 3u);
    TokenId merged = static_cast<TokenId>(vocab.size());
    vocab.merges_.emplace_back(left, right);
    vocab.relations_.push_back(relation);
    size_t kept = 0;
    for (size_t w = 0; w < words.size(); ++w) {
      ApplyMerge(&words[w], left, right, relation, merged);
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
  expansion_relations_.clear();
  expansion_.reserve(size());
  expansion_relations_.reserve(size());
  for (size_t i = 0; i < base_symbols_.size(); ++i) {
    expansion_.push_back({static_cast<TokenId>(i)});
    expansion_relations_.emplace_back();
  }
  for (size_t k = 0; k < merges_.size(); ++k) {
    auto [left, right] = merges_[k];
    if (left >= expansion_.size() || right >= expansion_.size()) {
      return base::InvalidArgument("tpe vocabulary: merge {} uses token {} before it exists", k,
                                   std::max(left, right));
    }
    MergeRelation relation = relations_[k];
    const bool left_ends_layer = SymbolTable::IsLayerSymbol(expansion_[left].back());
    const bool right_starts_layer = SymbolTable::IsLayerSymbol(expansion_[right].front());
    const bool valid =
        left_ends_layer ? relation == MergeRelation::kSameNode && !right_starts_layer
                        : right_starts_layer &&
                              (relation == MergeRelation::kFirstChild ||
                               (relation == MergeRelation::kNextSibling && config_.merge_siblings));
    if (!valid) {
      return base::InvalidArgument(
          "tpe vocabulary: merge {} ({}, {}, relation {}) joins tokens the merge rule{} cannot "
          "join",
          k, left, right, static_cast<int>(relation),
          config_.merge_siblings ? "" : " without merge_siblings");
    }
    if (expansion_[left].size() + expansion_[right].size() > kMaxExpansion) {
      return base::InvalidArgument(
          "tpe vocabulary: merge {} makes a token of more than {} base "
          "tokens",
          k, kMaxExpansion);
    }
    std::vector<TokenId> tokens = expansion_[left];
    tokens.insert(tokens.end(), expansion_[right].begin(), expansion_[right].end());
    std::vector<MergeRelation> relations = expansion_relations_[left];
    relations.push_back(relation);
    relations.insert(relations.end(), expansion_relations_[right].begin(),
                     expansion_relations_[right].end());
    expansion_.push_back(std::move(tokens));
    expansion_relations_.push_back(std::move(relations));
  }
  return base::OkStatus();
}

std::string TpeVocabulary::TokenText(TokenId token) const {
  std::string text;
  const std::vector<TokenId>& bases = expansion_[token];
  for (size_t k = 0; k < bases.size(); ++k) {
    if (k > 0) {
      text += expansion_relations_[token][k - 1] == MergeRelation::kNextSibling ? " | " : " ";
    }
    text += base_symbols_[bases[k]];
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
                   {"merge_siblings", config_.merge_siblings},
                   {"relations", "0 same node, 1 first child, 2 next sibling"},
                   {"tie_break", "count desc, then (left, right, relation) asc"}};
  doc["base_symbols"] = base_symbols_;
  nlohmann::json merges = nlohmann::json::array();
  for (size_t k = 0; k < merges_.size(); ++k) {
    merges.push_back({merges_[k].first, merges_[k].second, static_cast<int>(relations_[k])});
  }
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
  const int version = doc.contains("version") && doc["version"].is_number_integer()
                          ? doc["version"].get<int>()
                          : -1;
  if (version != 1 && version != kVocabularyVersion) {
    return base::InvalidArgument("{}: vocabulary version {}, expected 1 or {}", origin,
                                 doc.contains("version") ? doc["version"].dump() : "missing",
                                 kVocabularyVersion);
  }
  TpeVocabulary vocab;
  try {
    const nlohmann::json& config = doc.at("config");
    // Counts must be written as integers: a float is refused, never cast.
    const auto count = [&](const char* key) -> int64_t {
      const nlohmann::json& value = config.at(key);
      if (value.is_number_unsigned() && value.get<uint64_t>() <= uint64_t{INT64_MAX}) {
        return static_cast<int64_t>(value.get<uint64_t>());
      }
      if (value.is_number_integer() && !value.is_number_unsigned()) return value.get<int64_t>();
      throw std::invalid_argument(
          fmt::format("config \"{}\" is {}, expected an integer", key, value.dump()));
    };
    const int64_t vocab_size = count("vocab_size");
    if (vocab_size < 0) throw std::invalid_argument("config \"vocab_size\" is negative");
    vocab.config_.vocab_size = static_cast<size_t>(vocab_size);
    vocab.config_.min_pair_count = count("min_pair_count");
    vocab.config_.corpus = config.at("corpus").get<std::string>();
    vocab.corpus_steps_ = count("corpus_steps");
    vocab.corpus_tokens_ = count("corpus_tokens");
    // Version 1 and files without the field: the first-child-only rule.
    vocab.config_.merge_siblings = version >= 2 && config.contains("merge_siblings") &&
                                   config.at("merge_siblings").get<bool>();
    vocab.base_symbols_ = doc.at("base_symbols").get<std::vector<std::string>>();
    for (const nlohmann::json& merge : doc.at("merges")) {
      // Version 1: [left, right], the relation follows from the rule; version 2:
      // [left, right, relation].
      const size_t fields = version >= 2 ? 3 : 2;
      if (!merge.is_array() || merge.size() != fields) {
        return base::InvalidArgument("{}: merge {} is not a [left, right{}] array", origin,
                                     merge.dump(), fields == 3 ? ", relation" : "");
      }
      for (const nlohmann::json& field : merge) {
        if (!field.is_number_unsigned() || field.get<uint64_t>() >= kMaxTokens) {
          return base::InvalidArgument("{}: merge {} has a field that is not a token id", origin,
                                       merge.dump());
        }
      }
      vocab.merges_.emplace_back(merge[0].get<TokenId>(), merge[1].get<TokenId>());
      if (fields == 3) {
        if (merge[2].get<uint64_t>() > static_cast<uint64_t>(MergeRelation::kNextSibling)) {
          return base::InvalidArgument("{}: merge {}: relation is not 0, 1 or 2", origin,
                                       merge.dump());
        }
        vocab.relations_.push_back(static_cast<MergeRelation>(merge[2].get<uint64_t>()));
      } else {
        vocab.relations_.push_back(MergeRelation::kNone);  // derived below
      }
    }
  } catch (const std::exception& e) {
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
  // A merge joins tokens that exist before it (base symbols and earlier merges).
  for (size_t k = 0; k < vocab.merges_.size(); ++k) {
    const auto [left, right] = vocab.merges_[k];
    const size_t defined = vocab.base_symbols_.size() + k;
    if (left >= defined || right >= defined) {
      return base::InvalidArgument(
          "{}: merge {} uses token {} before it exists ({} tokens "
          "precede it)",
          origin, k, std::max(left, right), defined);
    }
  }
  if (version == 1) {
    // A join after a layer token is the node's name; after a name, a first child.
    for (size_t k = 0; k < vocab.merges_.size(); ++k) {
      TokenId left = vocab.merges_[k].first;
      TokenId last = left;
      // The last base symbol of left: follow right halves down to a base token.
      while (last >= vocab.base_symbols_.size() && last - vocab.base_symbols_.size() < k) {
        last = vocab.merges_[last - vocab.base_symbols_.size()].second;
      }
      vocab.relations_[k] =
          SymbolTable::IsLayerSymbol(last) ? MergeRelation::kSameNode : MergeRelation::kFirstChild;
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
