// Encoding a serialization with a learned vocabulary to the model inputs
// (input_ids, parent_idx, duration, depth), and decoding back (paper 3.5).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "tpe/step_serializer.h"
#include "tpe/tpe_vocabulary.h"

namespace teller::tpe {

// One encoded step. Token j covers a run of base tokens starting at base token s:
// parent_idx[j] is the encoded token holding base token parent[s] (-1 for a root),
// duration_ns[j] the sum of the covered base durations, depth[j] = depth[s].
struct EncodedStep {
  std::vector<TokenId> input_ids;
  std::vector<int32_t> parent_idx;
  std::vector<int64_t> duration_ns;
  std::vector<uint16_t> depth;
  // Base token offset where token j starts: tokens cover consecutive runs, token j
  // the base tokens [base_begin[j], base_begin[j + 1]) (the last one to the end).
  // Filled by Encode; Decode does not need it.
  std::vector<uint32_t> base_begin;

  size_t size() const { return input_ids.size(); }
};

// Events per step before and after encoding.
struct CompressionStats {
  int64_t steps = 0;
  int64_t nodes = 0;        // call-chain nodes (events)
  int64_t base_tokens = 0;  // 2 per node
  int64_t encoded_tokens = 0;
  int64_t unknown_symbols = 0;  // names absent from the vocabulary, encoded as [UNK]
  double NodesPerStep() const { return steps ? double(nodes) / steps : 0; }
  double TokensPerStep() const { return steps ? double(encoded_tokens) / steps : 0; }
  // Base tokens over encoded tokens (the paper's compression ratio).
  double Ratio() const { return encoded_tokens ? double(base_tokens) / encoded_tokens : 0; }
  // Nodes over encoded tokens: events per step before / after.
  double NodeRatio() const { return encoded_tokens ? double(nodes) / encoded_tokens : 0; }
};

class TpeEncoder {
 public:
  // `symbols` is the table the serializations to encode were made with; names
  // absent from the vocabulary become [UNK]. Encoding follows the vocabulary's rule
  // (vocab.merge_siblings()).
  TpeEncoder(const TpeVocabulary& vocab, const SymbolTable& symbols);

  base::StatusOr<EncodedStep> Encode(const Serialization& serialization);
  // The base serialization, with symbols as vocabulary base ids. Durations: a merged
  // token's sum sits on its first layer token (the others get 0), so per-node
  // durations come back exactly only for tokens that cover one node.
  base::StatusOr<Serialization> Decode(const EncodedStep& encoded) const;

  // Encodes all and counts; the first error is returned.
  base::StatusOr<CompressionStats> Measure(const std::vector<Serialization>& corpus);

 private:
  const TpeVocabulary& vocab_;
  std::vector<TokenId> remap_;  // symbol table id -> vocabulary base id
  // (left, right, relation) -> (rank, merged)
  std::unordered_map<uint64_t, std::pair<uint32_t, TokenId>> ranks_;
  bool merge_siblings_ = false;
  int64_t unknown_symbols_ = 0;
  std::vector<TokenId> chain_;
  std::vector<MergeRelation> chain_relation_;  // relation of each chain token to the one before
  std::vector<uint32_t> chain_start_;          // base offset of each chain token
  std::vector<int32_t> encoded_of_base_;
  // Encoded chains by packed (symbol, relation) key: (token, start offset) pairs.
  // Steps repeat their chains, so most chains are encoded once.
  static constexpr size_t kChainCacheBytes = size_t{64} << 20;
  std::string chain_key_;
  std::unordered_map<std::string, std::vector<uint32_t>> chain_cache_;
  size_t chain_cache_bytes_ = 0;
};

}  // namespace teller::tpe
