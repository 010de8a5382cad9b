// TPE vocabulary loader (TpeVocabulary::FromJson in src/tpe/tpe_vocabulary). Any
// text must load or be refused with a Status; what loads must expand every token,
// write JSON that loads back to the same JSON, and encode a small tree whose
// names are its own base symbols.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz_util.h"
#include "tpe/step_serializer.h"
#include "tpe/tpe_encoder.h"
#include "tpe/tpe_vocabulary.h"

namespace {

// Known findings in TpeVocabulary::FromJson (docs/fuzzing.md), reported to the tpe
// owners; inputs that hit one are skipped so a run can look further (build with
// -DTELLER_FUZZ_NO_KNOWN_SKIPS to hit them again). The float merge ids and the
// self-doubling merges found first are fixed.
//  1. A "config" count written as a float that does not fit its integer field
//     ("vocab_size": 1e300, "corpus_steps": -3e125) is converted with undefined
//     behaviour (UBSan float-cast-overflow inside nlohmann's get<T>()).
bool HitsKnownIssue(std::string_view text) {
#ifdef TELLER_FUZZ_NO_KNOWN_SKIPS
  return false;
#endif
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return false;
  if (doc.contains("config") && doc["config"].is_object()) {
    for (const auto& [key, value] : doc["config"].items()) {
      if (value.is_number_float()) {
        double v = value.get<double>();
        if (!(v > -1 && v < 9.2e18)) return true;
      }
    }
  }
  //  2. merge_cycle.json: in a version 1 file, the loop that finds the
  // last base symbol of a merge's left token follows right halves of earlier merges
  // without a bound, and merges whose right halves point at each other never end it.
  if (!doc.contains("base_symbols") || !doc["base_symbols"].is_array() ||
      !doc.contains("merges") || !doc["merges"].is_array()) {
    return false;
  }
  const uint64_t base = doc["base_symbols"].size();
  std::vector<uint64_t> right;
  std::vector<uint64_t> left;
  for (const nlohmann::json& merge : doc["merges"]) {
    if (!merge.is_array() || merge.size() < 2 || !merge[0].is_number_unsigned() ||
        !merge[1].is_number_unsigned()) {
      return false;
    }
    left.push_back(merge[0].get<uint64_t>());
    right.push_back(merge[1].get<uint64_t>());
  }
  for (size_t k = 0; k < left.size(); ++k) {
    uint64_t last = left[k];
    size_t steps = 0;
    while (last >= base && last - base < k) {
      last = right[last - base];
      if (++steps > left.size()) return true;
    }
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace teller;
  using namespace teller::tpe;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (HitsKnownIssue(text)) return 0;
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
  FUZZ_CHECK(again.ok(), "written vocabulary does not load: %s",
             again.status().ToString().c_str());
  FUZZ_CHECK(again->ToJson() == json, "vocabulary JSON does not round-trip");

  // One node per base name, each the first child of the one before (one chain), so
  // every merge the vocabulary has may apply.
  SymbolTable symbols;
  Serialization s;
  int32_t parent = -1;
  for (size_t b = kReservedSymbols; b < vocab->base_size() && b < kReservedSymbols + 32; ++b) {
    SymbolId name = symbols.Intern(vocab->base_symbols()[b]);
    if (name < kReservedSymbols) continue;  // a later copy of "[K]" or "[UNK]"
    s.AppendNode(SymbolTable::LayerSymbol(static_cast<model::Layer>(b % model::kLayerCount)),
                 name, parent, 1);
    parent = static_cast<int32_t>(s.node_count()) - 1;
  }
  TpeEncoder encoder(*vocab, symbols);
  base::StatusOr<EncodedStep> encoded = encoder.Encode(s);
  FUZZ_CHECK(encoded.ok(), "encode failed: %s", encoded.status().ToString().c_str());
  base::StatusOr<Serialization> decoded = encoder.Decode(*encoded);
  FUZZ_CHECK(decoded.ok(), "decode of an encoding failed: %s",
             decoded.status().ToString().c_str());
  FUZZ_CHECK(decoded->parent == s.parent && decoded->depth == s.depth,
             "decode does not give back the tree");
  return 0;
}
