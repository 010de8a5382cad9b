#include "tpe/step_serializer.h"

#include <algorithm>

#include "tpe/operator_token.h"

namespace teller::tpe {

SymbolTable::SymbolTable() {
  for (int i = 0; i < model::kLayerCount; ++i) {
    Intern(fmt::format("[{}]", model::LayerName(static_cast<model::Layer>(i))));
  }
  Intern("[UNK]");
}

SymbolId SymbolTable::Intern(std::string_view text) {
  auto it = index_.find(std::string(text));
  if (it != index_.end()) return it->second;
  SymbolId id = static_cast<SymbolId>(texts_.size());
  texts_.emplace_back(text);
  index_.emplace(texts_.back(), id);
  return id;
}

SymbolId SymbolTable::Find(std::string_view text) const {
  auto it = index_.find(std::string(text));
  return it == index_.end() ? kUnknownSymbol : it->second;
}

void Serialization::AppendNode(SymbolId layer, SymbolId name, int32_t parent_node,
                               int64_t duration_ns) {
  int32_t parent_token = parent_node < 0 ? -1 : 2 * parent_node;
  uint16_t node_depth = parent_token < 0 ? 0 : static_cast<uint16_t>(depth[parent_token] + 1);
  symbol.push_back(layer);
  symbol.push_back(name);
  parent.push_back(parent_token);
  parent.push_back(parent_token);
  dur_ns.push_back(duration_ns);
  dur_ns.push_back(0);
  depth.push_back(node_depth);
  depth.push_back(node_depth);
}

void AppendSerialization(const Serialization& part, Serialization* out) {
  const int32_t offset = static_cast<int32_t>(out->size());
  for (size_t i = 0; i < part.size(); ++i) {
    out->symbol.push_back(part.symbol[i]);
    out->parent.push_back(part.parent[i] < 0 ? -1 : part.parent[i] + offset);
    out->dur_ns.push_back(part.dur_ns[i]);
    out->depth.push_back(part.depth[i]);
  }
}

base::Status ValidateSerialization(const Serialization& s) {
  size_t n = s.symbol.size();
  if (s.parent.size() != n || s.dur_ns.size() != n || s.depth.size() != n) {
    return base::InvalidArgument("serialization: column sizes differ ({} symbols, {} parents)", n,
                                 s.parent.size());
  }
  if (n % 2 != 0) return base::InvalidArgument("serialization: odd token count {}", n);
  for (size_t i = 0; i < n; i += 2) {
    if (!SymbolTable::IsLayerSymbol(s.symbol[i])) {
      return base::InvalidArgument("serialization: token {} is not a layer token", i);
    }
    if (SymbolTable::IsLayerSymbol(s.symbol[i + 1])) {
      return base::InvalidArgument("serialization: token {} is a layer token, expected a name",
                                   i + 1);
    }
    int32_t p = s.parent[i];
    if (s.parent[i + 1] != p || s.depth[i + 1] != s.depth[i] || s.dur_ns[i + 1] != 0) {
      return base::InvalidArgument("serialization: name token {} does not match its node", i + 1);
    }
    if (p >= static_cast<int32_t>(i) || p < -1 || (p >= 0 && p % 2 != 0)) {
      return base::InvalidArgument(
          "serialization: token {} has parent {}, expected an earlier "
          "layer token",
          i, p);
    }
    if (p >= 0 && s.depth[i] != s.depth[p] + 1) {
      return base::InvalidArgument("serialization: token {} has depth {}, parent depth {}", i,
                                   s.depth[i], s.depth[p]);
    }
  }
  return base::OkStatus();
}

std::string NormalizeName(std::string_view name) {
  std::string out;
  out.reserve(std::min(name.size(), kMaxNameBytes));
  int nesting = 0;  // inside <...>, (...) or [...]
  for (char c : name) {
    if (c == '<' || c == '(' || c == '[') {
      // Keep a leading "[...]" label (e.g. "[memcpy HtoD]"): only strip groups after text.
      if (out.empty() && nesting == 0 && c == '[') {
        out.push_back(c);
        continue;
      }
      ++nesting;
      continue;
    }
    if ((c == '>' || c == ')' || c == ']') && nesting > 0) {
      --nesting;
      continue;
    }
    if (nesting > 0) continue;
    if (c == ' ' || c == '\t' || c == '\n') {
      if (!out.empty() && out.back() != ' ') out.push_back(' ');
      continue;
    }
    out.push_back(c);
  }
  while (!out.empty() && (out.back() == ' ' || out.back() == ':')) out.pop_back();
  // Drop a leading return type: "void foo" -> "foo".
  std::string_view rest = out;
  for (bool dropped = true; dropped;) {
    dropped = false;
    for (std::string_view prefix : {"void ", "static ", "__global__ "}) {
      if (rest.substr(0, prefix.size()) == prefix) {
        rest.remove_prefix(prefix.size());
        dropped = true;
      }
    }
  }
  if (rest.size() != out.size()) out = std::string(rest);
  // Drop a "#N" counter suffix (ProfilerStep#12).
  size_t hash = out.rfind('#');
  if (hash != std::string::npos && hash + 1 < out.size() &&
      std::all_of(out.begin() + hash + 1, out.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    out.erase(hash);
  }
  if (out.size() > kMaxNameBytes) out.resize(kMaxNameBytes);
  if (out.empty()) return std::string(1, '?');
  return out;
}

StepSerializer::StepSerializer(const model::Trace& trace, SymbolTable* symbols,
                               NameSpelling spelling)
    : trace_(trace), symbols_(symbols), spelling_(spelling) {}

SymbolId StepSerializer::NameSymbol(model::Layer layer, base::StringId name) {
  const uint64_t key = uint64_t{name.value()} << 8 | static_cast<uint8_t>(layer);
  auto it = name_cache_.find(key);
  if (it != name_cache_.end()) return it->second;
  const std::string_view text = trace_.str(name);
  SymbolId id = symbols_->Intern(
      spelling_ == NameSpelling::kOperatorToken ? OperatorToken(layer, text) : NormalizeName(text));
  name_cache_.emplace(key, id);
  return id;
}

base::StatusOr<Serialization> StepSerializer::SerializeStep(model::StepIndex step) {
  if (!step.valid() || step.value() >= trace_.steps.size()) {
    return base::InvalidArgument("tpe: step {} out of range ({} steps)", step.value(),
                                 trace_.steps.size());
  }
  uint32_t begin = trace_.steps.node_begin[step.value()].value();
  uint32_t end = trace_.steps.node_end[step.value()].value();
  std::vector<model::NodeIndex> nodes;
  nodes.reserve(end - begin);
  for (uint32_t n = begin; n < end; ++n) nodes.push_back(model::NodeIndex(n));
  return SerializeNodes(step, nodes);
}

base::StatusOr<Serialization> StepSerializer::SerializeNodes(
    model::StepIndex step, const std::vector<model::NodeIndex>& nodes) {
  if (!step.valid() || step.value() >= trace_.steps.size()) {
    return base::InvalidArgument("tpe: step {} out of range ({} steps)", step.value(),
                                 trace_.steps.size());
  }
  uint32_t begin = trace_.steps.node_begin[step.value()].value();
  uint32_t end = trace_.steps.node_end[step.value()].value();
  if (end < begin || end > trace_.nodes.size()) {
    return base::InvalidArgument("tpe: step {} has node range [{}, {}) outside {} nodes",
                                 step.value(), begin, end, trace_.nodes.size());
  }
  position_.assign(end - begin, -2);  // -2: not selected
  for (model::NodeIndex n : nodes) {
    if (!n.valid() || n.value() < begin || n.value() >= end) {
      return base::InvalidArgument("tpe: node {} is not in step {} [{}, {})", n.value(),
                                   step.value(), begin, end);
    }
    position_[n.value() - begin] = -1;  // selected, position assigned below
  }
  Serialization out;
  out.symbol.reserve(2 * nodes.size());
  out.parent.reserve(2 * nodes.size());
  out.dur_ns.reserve(2 * nodes.size());
  out.depth.reserve(2 * nodes.size());
  int32_t count = 0;
  // Step nodes are stored in pre-order, so walking the range in index order keeps
  // any parent-closed subset in pre-order.
  for (uint32_t n = begin; n < end; ++n) {
    if (position_[n - begin] == -2) continue;
    model::NodeIndex parent = trace_.nodes.parent[n];
    int32_t parent_node = -1;
    if (parent.valid() && parent.value() >= begin && parent.value() < end) {
      parent_node = position_[parent.value() - begin];
      if (parent_node < 0) {
        return base::InvalidArgument("tpe: node {} is selected but its parent {} is not", n,
                                     parent.value());
      }
    }
    model::EventRow event = trace_.nodes.event[n];
    SymbolId layer = SymbolTable::LayerSymbol(trace_.events.layer[event.value()]);
    SymbolId name =
        NameSymbol(trace_.events.layer[event.value()], trace_.events.name[event.value()]);
    out.AppendNode(layer, name, parent_node, trace_.events.dur_ns[event.value()]);
    position_[n - begin] = count++;
  }
  return out;
}

}  // namespace teller::tpe
