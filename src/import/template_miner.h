// An online log template miner in the style of Drain (He et al., ICWS 2017): lines are
// tokenized on blanks, parameter-looking tokens are masked to <*> first, then a
// fixed-depth tree (token count, then the leading tokens) leads to a few candidate
// templates; the most similar one above a threshold absorbs the line (differing
// positions become <*>), else the line starts a new template. Ids are indexes into
// trace->templates and never change once given; the same input order gives the same ids.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/trace.h"

namespace teller::import {

struct TemplateMinerOptions {
  // Tree depth as in Drain: the root, the token-count level, depth - 2 leading-token levels.
  int depth = 4;
  // Share of equal (non-parameter) tokens a line needs to join a template.
  double similarity_threshold = 0.4;
  // Children per tree node before new tokens go to the <*> child.
  int max_children = 100;
  // Tokens looked at per line; the rest of a longer line is one trailing <*>.
  int max_tokens = 64;
};

class TemplateMiner {
 public:
  explicit TemplateMiner(TemplateMinerOptions options = {});

  // Starts from a trace's existing templates so ids and patterns carry over between
  // imports into the same trace. Call before the first Add.
  void LoadFrom(const model::Trace& trace);
  // Assigns the message to a template and returns its id.
  model::TemplateId Add(std::string_view message);
  // Writes every template's pattern and count to trace->templates (row = id).
  void StoreTo(model::Trace* trace) const;

  std::string Pattern(model::TemplateId id) const;
  int64_t Count(model::TemplateId id) const { return clusters_[id.value()].count; }
  size_t size() const { return clusters_.size(); }

 private:
  struct Cluster {
    std::vector<uint32_t> tokens;  // token ids; kWildcard for <*>
    int64_t count = 0;
  };
  struct Node {
    std::unordered_map<uint32_t, uint32_t> children;  // token id -> node index
    std::vector<uint32_t> clusters;                   // leaf: cluster indexes, oldest first
  };
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view text) const { return std::hash<std::string_view>()(text); }
  };

  static constexpr uint32_t kWildcard = 0;

  uint32_t InternToken(std::string_view text);
  void Tokenize(std::string_view message);
  uint32_t LeafFor(const std::vector<uint32_t>& tokens);
  uint32_t AddCluster(std::vector<uint32_t> tokens, int64_t count);

  TemplateMinerOptions options_;
  std::vector<std::string> token_text_;
  std::vector<uint8_t> token_routes_wild_;  // masked or has a digit: goes to the <*> child
  std::unordered_map<std::string, uint32_t, Hash, std::equal_to<>> token_index_;
  std::vector<Node> nodes_;  // nodes_[0] is the root; its children are keyed by token count
  std::vector<Cluster> clusters_;
  // Scratch reused per line.
  std::vector<uint32_t> line_tokens_;
  std::string mask_scratch_;
};

// Masks the parameter part of one token: "1234," -> "<*>,", "SeqNum=1234," -> "SeqNum=<*>,",
// "0x7f3b" -> "<*>", "cmpl-8b3f...-0." -> "<*>.", "12.5ms" -> "<*>". Returns the token or
// a view of *scratch.
std::string_view MaskToken(std::string_view token, std::string* scratch);

}  // namespace teller::import
