// TPE vocabulary learning (paper 3.5): BPE-style merges of frequent adjacent token
// pairs, only where the call structure allows.
//
// Merge rule. In pre-order, base token b may join token b-1 in one merged token
// when (MergeRelation):
//   kSameNode:    b is the name token of b-1's node (the [layer, name] pair);
//   kFirstChild:  b is the layer token of the first child of b-1's node;
//   kNextSibling: b is the layer token of the next sibling of b-1's node (same
//                 parent; b-1's node is then a leaf). Only with merge_siblings.
// A merged token keeps p'_i = p_i, Delta'_i = Delta_i + Delta_{i+1}, d'_i = d_i,
// and records the relation of every internal join, so it knows its own shape: an
// inner node's parent is the previous inner node (child) or that node's parent
// (sibling). Tokens with the same symbols and different shapes are different
// tokens; merges are learned over (left, right, relation). Moves up the tree never
// join. The allowed boundaries are fixed by the base serialization: the maximal
// runs between forbidden boundaries ("chains") are the words of classic BPE, and
// learning is BPE over chain counts.
//
// Tie-breaking: the pair with the highest weighted count wins; ties go to the
// smaller (left id, right id, relation). Training has no randomness.
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
// Version 2 added config.merge_siblings and the relation of each merge; version 1
// files load as the first-child-only rule.
inline constexpr int kVocabularyVersion = 2;

// How base token b joins base token b-1 inside a merged token; kNone: it may not.
enum class MergeRelation : uint8_t { kSameNode = 0, kFirstChild = 1, kNextSibling = 2, kNone = 3 };

struct TpeTrainConfig {
  size_t vocab_size = 256;     // base symbols + merges; the target, not a minimum
  int64_t min_pair_count = 2;  // a pair seen fewer times is never merged
  std::string corpus;          // free text: what the corpus was (bundle, steps)
  // Also join a leaf with its next sibling (kNextSibling); false: the version-1
  // rule (a node's pair and first children only).
  bool merge_siblings = true;
};

// The relation of token b of s to token b-1 (b >= 1), kNone when they may not
// belong to one merged token.
inline MergeRelation BoundaryRelation(const Serialization& s, size_t b, bool merge_siblings) {
  if (b % 2 == 1) return MergeRelation::kSameNode;
  if (s.parent[b] == static_cast<int32_t>(b) - 2) return MergeRelation::kFirstChild;
  if (merge_siblings && s.parent[b] == s.parent[b - 2]) return MergeRelation::kNextSibling;
  return MergeRelation::kNone;
}

// True when tokens b-1 and b of s may belong to one merged token under the
// first-child-only rule (merge_siblings = false).
inline bool MergeableBoundary(const Serialization& s, size_t b) {
  return BoundaryRelation(s, b, /*merge_siblings=*/false) != MergeRelation::kNone;
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
  // Merge k makes token base_size() + k from (left, right), joined by relations()[k].
  const std::vector<std::pair<TokenId, TokenId>>& merges() const { return merges_; }
  const std::vector<MergeRelation>& relations() const { return relations_; }
  bool merge_siblings() const { return config_.merge_siblings; }
  const TpeTrainConfig& config() const { return config_; }
  // Training corpus size, recorded in the JSON.
  int64_t corpus_steps() const { return corpus_steps_; }
  int64_t corpus_tokens() const { return corpus_tokens_; }
  // The base symbols a token stands for.
  const std::vector<TokenId>& Expand(TokenId token) const { return expansion_[token]; }
  // Its shape: element k-1 is how base k joins base k-1 (size Expand().size() - 1).
  const std::vector<MergeRelation>& ExpandRelations(TokenId token) const {
    return expansion_relations_[token];
  }
  // Readable text of a token: base symbols joined by " ", " | " before a next
  // sibling.
  std::string TokenText(TokenId token) const;

 private:
  base::Status BuildExpansions();

  TpeTrainConfig config_;
  int64_t corpus_steps_ = 0;
  int64_t corpus_tokens_ = 0;
  std::vector<std::string> base_symbols_;
  std::vector<std::pair<TokenId, TokenId>> merges_;
  std::vector<MergeRelation> relations_;
  std::vector<std::vector<TokenId>> expansion_;
  std::vector<std::vector<MergeRelation>> expansion_relations_;
};

}  // namespace teller::tpe
