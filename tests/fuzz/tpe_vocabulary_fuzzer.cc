// TPE vocabulary loader (TpeVocabulary::FromJson in src/tpe/tpe_vocabulary). Any
// text must load or be refused with a Status; what loads must expand every token,
// write JSON that loads back to the same JSON, and encode a small tree whose
// names are its own base symbols.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "tpe/step_serializer.h"
#include "tpe/tpe_encoder.h"
#include "tpe/tpe_vocabulary.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace teller;
  using namespace teller::tpe;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  base::StatusOr<TpeVocabulary> vocab = TpeVocabulary::FromJson(text, "fuzz.json");
  if (!vocab.ok()) return 0;
  FUZZ_CHECK(vocab->size() == vocab->base_size() + vocab->merges().size(), "size mismatch");
  for (size_t token = 0; token < vocab->size(); ++token) {
    for (TokenId base : vocab->Expand(static_cast<TokenId>(token))) {
      FUZZ_CHECK(base < vocab->base_size(), "token %zu expands to %u, not a base symbol", token,
                 base);
    }
    (void)vocab->TokenText(static_cast<TokenId>(token));
  }
  std::string json = vocab->ToJson();
  base::StatusOr<TpeVocabulary> again = TpeVocabulary::FromJson(json, "again.json");
  FUZZ_CHECK(again.ok(), "written vocabulary does not load: %s", again.status().ToString().c_str());
  FUZZ_CHECK(again->ToJson() == json, "vocabulary JSON does not round-trip");

  // One node per base name, each the first child of the one before (one chain), so
  // every merge the vocabulary has may apply.
  SymbolTable symbols;
  Serialization s;
  int32_t parent = -1;
  for (size_t b = kReservedSymbols; b < vocab->base_size() && b < kReservedSymbols + 32; ++b) {
    SymbolId name = symbols.Intern(vocab->base_symbols()[b]);
    if (name < kReservedSymbols) continue;  // a later copy of "[K]" or "[UNK]"
    s.AppendNode(SymbolTable::LayerSymbol(static_cast<model::Layer>(b % model::kLayerCount)), name,
                 parent, 1);
    parent = static_cast<int32_t>(s.node_count()) - 1;
  }
  TpeEncoder encoder(*vocab, symbols);
  base::StatusOr<EncodedStep> encoded = encoder.Encode(s);
  FUZZ_CHECK(encoded.ok(), "encode failed: %s", encoded.status().ToString().c_str());
  base::StatusOr<Serialization> decoded = encoder.Decode(*encoded);
  FUZZ_CHECK(decoded.ok(), "decode of an encoding failed: %s", decoded.status().ToString().c_str());
  FUZZ_CHECK(decoded->parent == s.parent && decoded->depth == s.depth,
             "decode does not give back the tree");
  return 0;
}
