#include "import/template_miner.h"

#include <algorithm>

namespace teller::import {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsHexDigit(char c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

bool IsLeadingPunct(char c) {
  return c == '(' || c == '[' || c == '{' || c == '\'' || c == '"' || c == '<' || c == '#';
}
bool IsTrailingPunct(char c) {
  return c == ')' || c == ']' || c == '}' || c == '\'' || c == '"' || c == ',' || c == ';' ||
         c == ':' || c == '.' || c == '!' || c == '?' || c == '>';
}

// A token core that is a value rather than a word: numbers (with a short unit), hex,
// ids, uuids, addresses, dates and clock times.
bool IsParameter(std::string_view v) {
  if (v.empty()) return false;
  if (StartsWith(v, "cmpl-") || StartsWith(v, "chatcmpl-") || StartsWith(v, "req-")) return true;
  size_t digits = 0;
  for (char c : v) digits += IsDigit(c);
  if (digits == 0) return false;
  if (v.size() > 2 && v[0] == '0' && (v[1] == 'x' || v[1] == 'X')) {
    return std::all_of(v.begin() + 2, v.end(), IsHexDigit);
  }
  bool hex_like = std::all_of(v.begin(), v.end(), [](char c) {
    return IsHexDigit(c) || c == '.' || c == ':' || c == '-' || c == '_' || c == '/' || c == '+' ||
           c == '%';
  });
  if (hex_like) return true;
  // Number with a unit: "12ms", "3.5GiB", "1.2x", "45tok/s".
  size_t i = 0;
  if (v[0] == '-' || v[0] == '+') ++i;
  size_t number_start = i;
  while (i < v.size() && (IsDigit(v[i]) || v[i] == '.' || v[i] == ',')) ++i;
  if (i == number_start || !IsDigit(v[number_start])) return false;
  std::string_view unit = v.substr(i);
  return unit.size() <= 5 && std::all_of(unit.begin(), unit.end(),
                                         [](char c) { return IsAlpha(c) || c == '/' || c == '%'; });
}

}  // namespace

std::string_view MaskToken(std::string_view token, std::string* scratch) {
  size_t begin = 0, end = token.size();
  while (begin < end && IsLeadingPunct(token[begin])) ++begin;
  while (end > begin && IsTrailingPunct(token[end - 1])) --end;
  if (begin == end) return token;
  std::string_view core = token.substr(begin, end - begin);
  size_t value_begin = 0;
  size_t equals = core.rfind('=');
  if (equals != std::string_view::npos) {
    value_begin = equals + 1;
    while (value_begin < core.size() && (core[value_begin] == '\'' || core[value_begin] == '"')) {
      ++value_begin;
    }
  }
  std::string_view value = core.substr(value_begin);
  if (!IsParameter(value)) return token;
  if (begin == 0 && value_begin == 0 && end == token.size()) return "<*>";
  scratch->clear();
  scratch->append(token.substr(0, begin + value_begin));
  scratch->append("<*>");
  scratch->append(token.substr(end));
  return *scratch;
}

TemplateMiner::TemplateMiner(TemplateMinerOptions options) : options_(options) {
  if (options_.depth < 3) options_.depth = 3;
  if (options_.max_tokens < 1) options_.max_tokens = 1;
  if (options_.max_children < 2) options_.max_children = 2;
  InternToken("<*>");  // kWildcard
  nodes_.emplace_back();
}

uint32_t TemplateMiner::InternToken(std::string_view text) {
  auto it = token_index_.find(text);
  if (it != token_index_.end()) return it->second;
  uint32_t id = static_cast<uint32_t>(token_text_.size());
  token_text_.emplace_back(text);
  bool wild =
      text.find("<*>") != std::string_view::npos || std::any_of(text.begin(), text.end(), IsDigit);
  token_routes_wild_.push_back(wild ? 1 : 0);
  token_index_.emplace(std::string(text), id);
  return id;
}

void TemplateMiner::Tokenize(std::string_view message) {
  line_tokens_.clear();
  size_t i = 0;
  const size_t max_tokens = static_cast<size_t>(options_.max_tokens);
  while (i < message.size()) {
    while (i < message.size() && (message[i] == ' ' || message[i] == '\t')) ++i;
    if (i == message.size()) break;
    size_t end = i;
    while (end < message.size() && message[end] != ' ' && message[end] != '\t') ++end;
    if (line_tokens_.size() == max_tokens) {
      line_tokens_.back() = kWildcard;  // the rest of a long line
      break;
    }
    line_tokens_.push_back(InternToken(MaskToken(message.substr(i, end - i), &mask_scratch_)));
    i = end;
  }
}

uint32_t TemplateMiner::LeafFor(const std::vector<uint32_t>& tokens) {
  auto child = [this](uint32_t node, uint32_t key) {
    auto it = nodes_[node].children.find(key);
    if (it != nodes_[node].children.end()) return it->second;
    uint32_t index = static_cast<uint32_t>(nodes_.size());
    nodes_[node].children.emplace(key, index);
    nodes_.emplace_back();
    return index;
  };
  uint32_t node = child(0, static_cast<uint32_t>(tokens.size()));
  size_t levels = std::min(tokens.size(), static_cast<size_t>(options_.depth - 2));
  for (size_t d = 0; d < levels; ++d) {
    uint32_t key = token_routes_wild_[tokens[d]] ? kWildcard : tokens[d];
    const auto& children = nodes_[node].children;
    if (key != kWildcard && !children.count(key) &&
        children.size() >= static_cast<size_t>(options_.max_children)) {
      key = kWildcard;
    }
    node = child(node, key);
  }
  return node;
}

uint32_t TemplateMiner::AddCluster(std::vector<uint32_t> tokens, int64_t count) {
  uint32_t leaf = LeafFor(tokens);
  uint32_t id = static_cast<uint32_t>(clusters_.size());
  clusters_.push_back(Cluster{std::move(tokens), count});
  nodes_[leaf].clusters.push_back(id);
  return id;
}

void TemplateMiner::LoadFrom(const model::Trace& trace) {
  const model::TemplateTable& table = trace.templates;
  for (size_t row = 0; row < table.size(); ++row) {
    std::string_view pattern = trace.str(table.pattern[row]);
    std::vector<uint32_t> tokens;
    size_t i = 0;
    while (i < pattern.size()) {
      while (i < pattern.size() && pattern[i] == ' ') ++i;
      if (i == pattern.size()) break;
      size_t end = pattern.find(' ', i);
      if (end == std::string_view::npos) end = pattern.size();
      tokens.push_back(InternToken(pattern.substr(i, end - i)));
      i = end;
    }
    AddCluster(std::move(tokens), table.count[row]);
  }
}

model::TemplateId TemplateMiner::Add(std::string_view message) {
  Tokenize(message);
  const std::vector<uint32_t>& tokens = line_tokens_;
  uint32_t leaf = LeafFor(tokens);
  const size_t n = tokens.size();
  int64_t best = -1;
  double best_similarity = -1;
  size_t best_params = 0;
  for (uint32_t id : nodes_[leaf].clusters) {
    const std::vector<uint32_t>& pattern = clusters_[id].tokens;
    size_t equal = 0, params = 0;
    for (size_t k = 0; k < n; ++k) {
      if (pattern[k] == tokens[k]) {
        ++equal;
      } else if (pattern[k] == kWildcard) {
        ++params;
      }
    }
    double similarity = n == 0 ? 1.0 : static_cast<double>(equal) / static_cast<double>(n);
    if (similarity > best_similarity || (similarity == best_similarity && params > best_params)) {
      best = id;
      best_similarity = similarity;
      best_params = params;
    }
  }
  if (best >= 0 && best_similarity >= options_.similarity_threshold) {
    Cluster& cluster = clusters_[static_cast<size_t>(best)];
    for (size_t k = 0; k < n; ++k) {
      if (cluster.tokens[k] != tokens[k]) cluster.tokens[k] = kWildcard;
    }
    ++cluster.count;
    return model::TemplateId(static_cast<uint32_t>(best));
  }
  uint32_t id = static_cast<uint32_t>(clusters_.size());
  clusters_.push_back(Cluster{tokens, 1});
  nodes_[leaf].clusters.push_back(id);
  return model::TemplateId(id);
}

std::string TemplateMiner::Pattern(model::TemplateId id) const {
  std::string text;
  for (uint32_t token : clusters_[id.value()].tokens) {
    if (!text.empty()) text.push_back(' ');
    text.append(token_text_[token]);
  }
  return text;
}

void TemplateMiner::StoreTo(model::Trace* trace) const {
  model::TemplateTable& table = trace->templates;
  for (size_t i = 0; i < clusters_.size(); ++i) {
    base::StringId pattern = trace->strings.Intern(Pattern(model::TemplateId(i)));
    if (i < table.size()) {
      table.pattern[i] = pattern;
      table.count[i] = clusters_[i].count;
    } else {
      table.pattern.push_back(pattern);
      table.count.push_back(clusters_[i].count);
    }
  }
}

}  // namespace teller::import
