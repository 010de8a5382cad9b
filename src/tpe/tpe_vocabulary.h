// TPE vocabulary learning (paper 3.5): BPE-style merges of frequent adjacent token
// pairs, only where the call structure allows.
//
// Merge rule. Tokens i and i+1 of a serialization may merge only when token i+1
// belongs to the same node as token i (a node's [layer, name] pair) or is the
// layer token of the first child of token i's node. A merged token keeps
// p'_i = p_i, Delta'_i = Delta_i + Delta_{i+1}, d'_i = d_i. Merges never cross
// siblings nor go up the tree, so every token is a chain of nodes, each the first
// child of the one before. The allowed boundaries are fixed by the base
// serialization: the maximal runs between forbidden boundaries ("chains") are the
// words of classic BPE, and learning is BPE over chain counts.
//
// Tie-breaking: the pair with the highest weighted count wins; ties go to the
// smaller (left id, right id). Training has no randomness.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "tpe/step_serializer.h"

namespace teller::tpe {

using TokenId = uint32_t;

inline constexpr const char* kVocabularyFormat = "teller-tpe-vocabulary";
inline constexpr int kVocabularyVersion = 1;

struct TpeTrainConfig {
  size_t vocab_size = 256;       // base symbols + merges; the target, not a minimum
  int64_t min_pair_count = 2;    // a pair seen fewer times is never merged
  std::string corpus;            // free text: what the corpus was (bundle, steps)
};

// True when tokens b-1 and b of s may belong to one merged token.
inline bool MergeableBoundary(const Serialization& s, size_t b) {
  return (b % 2 == 1) || s.parent[b] == static_cast<int32_t>(b) - 2;
}

class TpeVocabulary {
 public:
  TpeVocabulary() = default;

  // Learns merges from serializations whose symbols come from `symbols`.
  static base::StatusOr<TpeVocabulary> Train(const std::vector<Serialization>& corpus,
                                             const SymbolTable& symbols,
                                             const TpeTrainConfig& config);
  static base::StatusOr<TpeVocabulary> FromJson(std::string_view text, std::string_view origin);
  static base::StatusOr<TpeVocabulary> Load(const std::string& path);
  std::string ToJson() const;
  base::Status Save(const std::string& path) const;

  size_t size() const { return base_symbols_.size() + merges_.size(); }
  size_t base_size() const { return base_symbols_.size(); }
  const std::vector<std::string>& base_symbols() const { return base_symbols_; }
  // Merge k makes token base_size() + k from (left, right).
  const std::vector<std::pair<TokenId, TokenId>>& merges() const { return merges_; }
  const TpeTrainConfig& config() const { return config_; }
  // Training corpus size, recorded in the JSON.
  int64_t corpus_steps() const { return corpus_steps_; }
  int64_t corpus_tokens() const { return corpus_tokens_; }
  // The base symbols a token stands for.
  const std::vector<TokenId>& Expand(TokenId token) const { return expansion_[token]; }
  // Readable text of a token: base symbols joined by " ".
  std::string TokenText(TokenId token) const;

 private:
  base::Status BuildExpansions();

  TpeTrainConfig config_;
  int64_t corpus_steps_ = 0;
  int64_t corpus_tokens_ = 0;
  std::vector<std::string> base_symbols_;
  std::vector<std::pair<TokenId, TokenId>> merges_;
  std::vector<std::vector<TokenId>> expansion_;
};

}  // namespace teller::tpe
