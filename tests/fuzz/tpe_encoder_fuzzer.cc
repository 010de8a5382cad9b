// TPE encoder (src/tpe/tpe_encoder, tpe_vocabulary Train): the input picks a small
// name alphabet, a training corpus of random call trees, a train config and trees to
// encode (some with names the vocabulary never saw). Each tree is encoded and decoded;
// any violated invariant aborts:
//   - Encode succeeds on a valid serialization; ids are inside the vocabulary;
//     parent_idx points to an earlier token of smaller depth; durations sum to the
//     base durations; no more tokens than base tokens;
//   - the tokens' expansions, in order, are the base symbols (names the vocabulary
//     lacks as [UNK]);
//   - Decode gives back the parents and depths exactly, and the same total duration;
//   - training twice gives the same vocabulary, and its JSON loads back to the same.
// Durations are bounded to 2^40 ns (18 minutes): sums near INT64_MAX are out of scope.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "tpe/step_serializer.h"
#include "tpe/tpe_encoder.h"
#include "tpe/tpe_vocabulary.h"

namespace {

using namespace teller;
using namespace teller::tpe;

constexpr const char* kNames[] = {"step", "matmul", "softmax", "gemm",
                                  "nccl", "norm",   "copy",    "sync"};

// A pre-order tree of up to max_nodes nodes, names from the first `alphabet` names.
Serialization Tree(FuzzedDataProvider* in, SymbolTable* symbols, size_t alphabet,
                   size_t max_nodes) {
  Serialization s;
  size_t nodes = in->ConsumeIntegralInRange<size_t>(1, max_nodes);
  std::vector<int32_t> stack;  // open nodes, root first
  for (size_t node = 0; node < nodes && in->remaining_bytes() > 0; ++node) {
    uint8_t shape = in->ConsumeIntegral<uint8_t>();
    // Low bits: how many open levels to close; 7 starts a new root.
    size_t pops = shape & 7;
    if (pops == 7) {
      stack.clear();
    } else {
      while (pops-- > 0 && stack.size() > 1) stack.pop_back();
    }
    auto layer = static_cast<model::Layer>((shape >> 3) % model::kLayerCount);
    SymbolId name = symbols->Intern(kNames[in->ConsumeIntegralInRange<size_t>(0, alphabet - 1)]);
    int64_t duration = in->ConsumeIntegralInRange<int64_t>(0, int64_t{1} << 40);
    s.AppendNode(SymbolTable::LayerSymbol(layer), name, stack.empty() ? -1 : stack.back(),
                 duration);
    stack.push_back(static_cast<int32_t>(node));
  }
  return s;
}

void CheckRoundTrip(const TpeVocabulary& vocab, const SymbolTable& symbols,
                    const Serialization& s) {
  FUZZ_CHECK(ValidateSerialization(s).ok(), "harness made an invalid tree: %s",
             ValidateSerialization(s).ToString().c_str());
  TpeEncoder encoder(vocab, symbols);
  base::StatusOr<EncodedStep> encoded = encoder.Encode(s);
  FUZZ_CHECK(encoded.ok(), "encode failed: %s", encoded.status().ToString().c_str());
  const EncodedStep& e = *encoded;
  FUZZ_CHECK(e.parent_idx.size() == e.size() && e.duration_ns.size() == e.size() &&
                 e.depth.size() == e.size(),
             "encoded columns differ in length");
  FUZZ_CHECK(e.size() <= s.size(), "%zu tokens from %zu base tokens", e.size(), s.size());

  // Expected base ids: the vocabulary's id of each symbol's text, else [UNK].
  std::vector<TokenId> expected;
  for (SymbolId symbol : s.symbol) {
    TokenId id = kUnknownSymbol;
    for (size_t b = 0; b < vocab.base_size(); ++b) {
      if (vocab.base_symbols()[b] == symbols.Get(symbol)) {
        id = static_cast<TokenId>(b);
        break;
      }
    }
    expected.push_back(id);
  }
  std::vector<TokenId> expanded;
  int64_t total = 0, encoded_total = 0;
  for (int64_t d : s.dur_ns) total += d;
  for (size_t j = 0; j < e.size(); ++j) {
    FUZZ_CHECK(e.input_ids[j] < vocab.size(), "token %zu id %u outside %zu", j, e.input_ids[j],
               vocab.size());
    FUZZ_CHECK(e.parent_idx[j] >= -1 && e.parent_idx[j] < static_cast<int32_t>(j),
               "token %zu parent %d", j, e.parent_idx[j]);
    if (e.parent_idx[j] >= 0) {
      FUZZ_CHECK(e.depth[e.parent_idx[j]] < e.depth[j], "token %zu not deeper than its parent", j);
    }
    const std::vector<TokenId>& expansion = vocab.Expand(e.input_ids[j]);
    expanded.insert(expanded.end(), expansion.begin(), expansion.end());
    encoded_total += e.duration_ns[j];
  }
  FUZZ_CHECK(expanded == expected, "expansions (%zu) are not the base symbols (%zu)",
             expanded.size(), expected.size());
  FUZZ_CHECK(encoded_total == total, "durations %lld encoded, %lld base",
             static_cast<long long>(encoded_total), static_cast<long long>(total));

  base::StatusOr<Serialization> decoded = encoder.Decode(e);
  FUZZ_CHECK(decoded.ok(), "decode of an encoding failed: %s", decoded.status().ToString().c_str());
  FUZZ_CHECK(decoded->symbol == expected, "decoded symbols differ");
  FUZZ_CHECK(decoded->parent == s.parent, "decoded parents differ");
  FUZZ_CHECK(decoded->depth == s.depth, "decoded depths differ");
  const Serialization& checked = *decoded;
  FUZZ_CHECK(ValidateSerialization(checked).ok(), "decoded serialization invalid: %s",
             ValidateSerialization(checked).ToString().c_str());
  int64_t decoded_total = 0;
  for (int64_t d : decoded->dur_ns) decoded_total += d;
  FUZZ_CHECK(decoded_total == total, "decoded durations sum to %lld, expected %lld",
             static_cast<long long>(decoded_total), static_cast<long long>(total));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  size_t alphabet = in.ConsumeIntegralInRange<size_t>(1, std::size(kNames));
  SymbolTable symbols;
  std::vector<Serialization> corpus(in.ConsumeIntegralInRange<size_t>(0, 6));
  for (Serialization& s : corpus) s = Tree(&in, &symbols, alphabet, 40);
  TpeTrainConfig config;
  config.vocab_size = in.ConsumeIntegralInRange<size_t>(0, 200);
  config.min_pair_count = in.ConsumeIntegralInRange<int64_t>(-1, 3);
  base::StatusOr<TpeVocabulary> vocab = TpeVocabulary::Train(corpus, symbols, config);
  FUZZ_CHECK(vocab.ok(), "training on valid trees failed: %s", vocab.status().ToString().c_str());
  base::StatusOr<TpeVocabulary> again = TpeVocabulary::Train(corpus, symbols, config);
  FUZZ_CHECK(again.ok() && again->ToJson() == vocab->ToJson(), "training is not deterministic");
  base::StatusOr<TpeVocabulary> loaded = TpeVocabulary::FromJson(vocab->ToJson(), "trained");
  FUZZ_CHECK(loaded.ok(), "a trained vocabulary does not load: %s",
             loaded.status().ToString().c_str());
  FUZZ_CHECK(loaded->ToJson() == vocab->ToJson(), "vocabulary JSON does not round-trip");

  for (const Serialization& s : corpus) CheckRoundTrip(*loaded, symbols, s);
  // Trees over the whole alphabet: names the vocabulary never saw become [UNK].
  while (in.remaining_bytes() > 0) {
    Serialization s = Tree(&in, &symbols, std::size(kNames), 60);
    CheckRoundTrip(*loaded, symbols, s);
  }
  return 0;
}
