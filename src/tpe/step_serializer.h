// Step serialization (paper 3.5): a step's call-chain subtree, or any node subset
// closed under parents, as [layer, name] token pairs in pre-order.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "model/trace.h"

namespace teller::tpe {

using SymbolId = uint32_t;

// Base symbols: the layer tokens "[STEP]" .. "[OTHER]" at ids 0..kLayerCount-1,
// "[UNK]" at kUnknownSymbol, then normalized event names in first-seen order.
inline constexpr SymbolId kUnknownSymbol = model::kLayerCount;
inline constexpr SymbolId kReservedSymbols = model::kLayerCount + 1;

class SymbolTable {
 public:
  SymbolTable();
  SymbolId Intern(std::string_view text);
  // kUnknownSymbol when absent.
  SymbolId Find(std::string_view text) const;
  std::string_view Get(SymbolId id) const { return texts_[id]; }
  size_t size() const { return texts_.size(); }
  static SymbolId LayerSymbol(model::Layer layer) { return static_cast<SymbolId>(layer); }
  static bool IsLayerSymbol(SymbolId id) { return id < static_cast<SymbolId>(model::kLayerCount); }

 private:
  std::vector<std::string> texts_;
  std::unordered_map<std::string, SymbolId> index_;
};

// One serialized step, columnar. Node k owns tokens 2k (layer) and 2k+1 (name).
// parent: index of the parent node's layer token, -1 for a root; a name token has
// the same parent and depth as its node. depth counts from the roots (0). dur_ns:
// the node's duration on its layer token, 0 on the name token, so the sum over
// tokens is the sum over nodes.
struct Serialization {
  std::vector<SymbolId> symbol;
  std::vector<int32_t> parent;
  std::vector<int64_t> dur_ns;
  std::vector<uint16_t> depth;

  size_t size() const { return symbol.size(); }
  size_t node_count() const { return symbol.size() / 2; }
  // Appends one node; parent_node is a node index (-1 for a root).
  void AppendNode(SymbolId layer, SymbolId name, int32_t parent_node, int64_t duration_ns);
  bool operator==(const Serialization&) const = default;
};

// Appends part's tokens after out's, shifting part's parent indices: several
// ranks' projections of one step serialized as one record.
void AppendSerialization(const Serialization& part, Serialization* out);

// Checks the invariants above: paired tokens, layer symbols on even tokens, parents
// before children and on layer tokens, depth = parent depth + 1.
base::Status ValidateSerialization(const Serialization& serialization);

// A stable base name: template arguments <...>, argument lists (...) and [...]
// suffix groups removed, a leading return type ("void ") dropped, a "#N" counter
// suffix dropped, whitespace collapsed, at most kMaxNameBytes bytes.
inline constexpr size_t kMaxNameBytes = 96;
std::string NormalizeName(std::string_view name);

// How a node's name becomes its symbol: NormalizeName (the raw name's stable part,
// version 1 models) or OperatorToken (what the operator is: operator_token.h).
enum class NameSpelling : uint8_t { kNormalized, kOperatorToken };

// Serializes steps of one reconstructed trace into one SymbolTable. Keeps a
// (layer, StringId) -> SymbolId cache, so each distinct event name is spelled once.
class StepSerializer {
 public:
  StepSerializer(const model::Trace& trace, SymbolTable* symbols,
                 NameSpelling spelling = NameSpelling::kNormalized);

  // The whole step subtree [node_begin, node_end).
  base::StatusOr<Serialization> SerializeStep(model::StepIndex step);
  // A subset of the step's nodes (any order); it must be closed under parents.
  base::StatusOr<Serialization> SerializeNodes(model::StepIndex step,
                                               const std::vector<model::NodeIndex>& nodes);

 private:
  SymbolId NameSymbol(model::Layer layer, base::StringId name);

  const model::Trace& trace_;
  SymbolTable* symbols_;
  NameSpelling spelling_;
  std::unordered_map<uint64_t, SymbolId> name_cache_;  // key: name << 8 | layer
  std::vector<int32_t> position_;  // node offset in step -> node position in output, -1 absent
};

}  // namespace teller::tpe
