#include "tpe/tpe_encoder.h"

#include <limits>

namespace teller::tpe {

namespace {

uint64_t PairKey(TokenId left, TokenId right, MergeRelation relation) {
  return (static_cast<uint64_t>(left) << 32) | (static_cast<uint64_t>(right) << 2) |
         static_cast<uint64_t>(relation);
}

}  // namespace

TpeEncoder::TpeEncoder(const TpeVocabulary& vocab, const SymbolTable& symbols)
    : vocab_(vocab), merge_siblings_(vocab.merge_siblings()) {
  std::unordered_map<std::string_view, TokenId> base_index;
  for (size_t i = 0; i < vocab.base_symbols().size(); ++i) {
    base_index.emplace(vocab.base_symbols()[i], static_cast<TokenId>(i));
  }
  remap_.resize(symbols.size());
  for (size_t i = 0; i < symbols.size(); ++i) {
    auto it = base_index.find(symbols.Get(i));
    remap_[i] = it == base_index.end() ? kUnknownSymbol : it->second;
  }
  for (size_t k = 0; k < vocab.merges().size(); ++k) {
    auto [left, right] = vocab.merges()[k];
    uint64_t key = PairKey(left, right, vocab.relations()[k]);
    ranks_.emplace(
        key, std::make_pair(static_cast<uint32_t>(k), static_cast<TokenId>(vocab.base_size() + k)));
  }
}

base::StatusOr<EncodedStep> TpeEncoder::Encode(const Serialization& s) {
  TELLER_RETURN_IF_ERROR(ValidateSerialization(s));
  EncodedStep out;
  encoded_of_base_.assign(s.size(), -1);
  size_t begin = 0;
  while (begin < s.size()) {
    size_t end = begin + 1;
    chain_relation_.clear();
    chain_relation_.push_back(MergeRelation::kSameNode);
    while (end < s.size()) {
      MergeRelation relation = BoundaryRelation(s, end, merge_siblings_);
      if (relation == MergeRelation::kNone) break;
      chain_relation_.push_back(relation);
      ++end;
    }
    // The chain's symbols and relations, packed: its key in the cache.
    chain_.clear();
    chain_key_.clear();
    for (size_t i = begin; i < end; ++i) {
      SymbolId symbol = s.symbol[i];
      TokenId id = symbol < remap_.size() ? remap_[symbol] : kUnknownSymbol;
      if (id == kUnknownSymbol) ++unknown_symbols_;
      chain_.push_back(id);
      uint32_t element = (id << 2) | static_cast<uint32_t>(chain_relation_[i - begin]);
      chain_key_.append(reinterpret_cast<const char*>(&element), sizeof(element));
    }
    auto cached = chain_cache_.find(chain_key_);
    if (cached != chain_cache_.end()) {
      const std::vector<uint32_t>& pieces = cached->second;  // (token, start offset) pairs
      chain_.clear();
      chain_start_.clear();
      for (size_t p = 0; p < pieces.size(); p += 2) {
        chain_.push_back(pieces[p]);
        chain_start_.push_back(static_cast<uint32_t>(begin + pieces[p + 1]));
      }
    } else {
      // BPE on the chain [begin, end): merge the lowest-ranked pair until none applies.
      chain_start_.clear();
      for (size_t i = begin; i < end; ++i) chain_start_.push_back(static_cast<uint32_t>(i));
      while (chain_.size() > 1) {
        uint32_t best_rank = std::numeric_limits<uint32_t>::max();
        size_t best_at = 0;
        TokenId best_token = 0;
        for (size_t i = 0; i + 1 < chain_.size(); ++i) {
          auto it = ranks_.find(PairKey(chain_[i], chain_[i + 1], chain_relation_[i + 1]));
          if (it != ranks_.end() && it->second.first < best_rank) {
            best_rank = it->second.first;
            best_at = i;
            best_token = it->second.second;
          }
        }
        if (best_rank == std::numeric_limits<uint32_t>::max()) break;
        chain_[best_at] = best_token;
        chain_.erase(chain_.begin() + best_at + 1);
        chain_start_.erase(chain_start_.begin() + best_at + 1);
        chain_relation_.erase(chain_relation_.begin() + best_at + 1);
      }
      if (chain_cache_bytes_ + chain_key_.size() > kChainCacheBytes) {
        chain_cache_.clear();
        chain_cache_bytes_ = 0;
      }
      std::vector<uint32_t> pieces;
      pieces.reserve(2 * chain_.size());
      for (size_t t = 0; t < chain_.size(); ++t) {
        pieces.push_back(chain_[t]);
        pieces.push_back(static_cast<uint32_t>(chain_start_[t] - begin));
      }
      chain_cache_bytes_ += chain_key_.size() + pieces.size() * sizeof(uint32_t);
      chain_cache_.emplace(chain_key_, std::move(pieces));
    }
    for (size_t t = 0; t < chain_.size(); ++t) {
      size_t first = chain_start_[t];
      size_t last = t + 1 < chain_.size() ? chain_start_[t + 1] : end;
      int32_t index = static_cast<int32_t>(out.input_ids.size());
      int64_t duration = 0;
      for (size_t i = first; i < last; ++i) {
        encoded_of_base_[i] = index;
        duration += s.dur_ns[i];
      }
      int32_t parent = s.parent[first];
      out.input_ids.push_back(chain_[t]);
      out.parent_idx.push_back(parent < 0 ? -1 : encoded_of_base_[parent]);
      out.duration_ns.push_back(duration);
      out.depth.push_back(s.depth[first]);
      out.base_begin.push_back(static_cast<uint32_t>(first));
    }
    begin = end;
  }
  return out;
}

base::StatusOr<Serialization> TpeEncoder::Decode(const EncodedStep& e) const {
  size_t n = e.input_ids.size();
  if (e.parent_idx.size() != n || e.duration_ns.size() != n || e.depth.size() != n) {
    return base::InvalidArgument("tpe decode: column sizes differ ({} ids, {} parents)", n,
                                 e.parent_idx.size());
  }
  Serialization s;
  std::vector<uint32_t> base_begin(n + 1, 0);
  for (size_t j = 0; j < n; ++j) {
    TokenId id = e.input_ids[j];
    if (id >= vocab_.size()) {
      return base::InvalidArgument(
          "tpe decode: token {} has id {} outside the {}-token "
          "vocabulary",
          j, id, vocab_.size());
    }
    int32_t parent_token = e.parent_idx[j];
    if (parent_token >= static_cast<int32_t>(j) || parent_token < -1) {
      return base::InvalidArgument(
          "tpe decode: token {} has parent {}, expected -1 or an "
          "earlier token",
          j, parent_token);
    }
    base_begin[j] = static_cast<uint32_t>(s.size());
    const std::vector<TokenId>& expansion = vocab_.Expand(id);
    const std::vector<MergeRelation>& shape = vocab_.ExpandRelations(id);
    // The token's duration goes on its first layer token (a token may start with
    // the name of a node whose layer token is in the token before).
    const size_t duration_at = s.size() % 2 == 1 && expansion.size() > 1 ? 1 : 0;
    for (size_t k = 0; k < expansion.size(); ++k) {
      size_t i = s.size();
      bool layer_slot = i % 2 == 0;
      if (layer_slot != SymbolTable::IsLayerSymbol(expansion[k])) {
        return base::InvalidArgument(
            "tpe decode: token {} puts \"{}\" at base position {}, "
            "expected a {} token",
            j, vocab_.base_symbols()[expansion[k]], i, layer_slot ? "layer" : "name");
      }
      int32_t parent = -1;
      uint16_t depth = e.depth[j];
      if (!layer_slot) {  // a name token: same node as the token before
        parent = s.parent[i - 1];
        depth = s.depth[i - 1];
      } else if (k > 0 && shape[k - 1] == MergeRelation::kNextSibling) {
        // Inside a token: next sibling of the node before.
        parent = s.parent[i - 2];
        depth = s.depth[i - 2];
      } else if (k > 0) {  // inside a token: first child of the node before
        parent = static_cast<int32_t>(i) - 2;
        depth = static_cast<uint16_t>(s.depth[i - 2] + 1);
      } else if (parent_token >= 0) {
        // The parent is the last node of depth d-1 inside the parent token (in
        // pre-order, every node between a node and its parent is deeper).
        if (e.depth[j] == 0) {
          return base::InvalidArgument("tpe decode: token {} has depth 0 and parent {}", j,
                                       parent_token);
        }
        for (uint32_t b = base_begin[parent_token]; b < base_begin[parent_token + 1]; ++b) {
          if (b % 2 == 0 && s.depth[b] + 1 == e.depth[j]) parent = static_cast<int32_t>(b);
        }
        if (parent < 0) {
          return base::InvalidArgument(
              "tpe decode: token {} (depth {}) has no node of depth {} "
              "in its parent token {}",
              j, e.depth[j], e.depth[j] - 1, parent_token);
        }
      }
      s.symbol.push_back(expansion[k]);
      s.parent.push_back(parent);
      s.dur_ns.push_back(k == duration_at ? e.duration_ns[j] : 0);
      s.depth.push_back(depth);
    }
    base_begin[j + 1] = static_cast<uint32_t>(s.size());
  }
  if (s.size() % 2 != 0) {
    return base::InvalidArgument("tpe decode: {} base tokens, expected [layer, name] pairs",
                                 s.size());
  }
  return s;
}

base::StatusOr<CompressionStats> TpeEncoder::Measure(const std::vector<Serialization>& corpus) {
  CompressionStats stats;
  int64_t unknown_before = unknown_symbols_;
  for (const Serialization& s : corpus) {
    TELLER_ASSIGN_OR_RETURN(EncodedStep encoded, Encode(s));
    ++stats.steps;
    stats.nodes += static_cast<int64_t>(s.node_count());
    stats.base_tokens += static_cast<int64_t>(s.size());
    stats.encoded_tokens += static_cast<int64_t>(encoded.size());
  }
  stats.unknown_symbols = unknown_symbols_ - unknown_before;
  return stats;
}

}  // namespace teller::tpe
