#include "learn/explanation_text.h"

#include <algorithm>
#include <cctype>
#include <regex>

#include <fmt/format.h>

#include "localize/operator_family.h"

namespace teller::learn {
namespace {

constexpr std::string_view kTwinCost = " Against the run's fault-free twin";

// Facts in the simulator's phrasings (sim/labels.cc), most specific first. Each match
// becomes its slot, spaced off so the words split around it.
struct SlotPattern {
  std::regex pattern;
  std::string replacement;
};
const std::vector<SlotPattern>& SlotPatterns() {
  static const std::vector<SlotPattern> kPatterns = [] {
    const std::string where = fmt::format(" {} ", kSlotWhere);
    const std::string when = fmt::format(" {} ", kSlotWhen);
    const std::string request = fmt::format(" {} ", kSlotRequest);
    const std::string number = fmt::format(" {} ", kSlotNumber);
    return std::vector<SlotPattern>{
        {std::regex(R"(rank \d+ \(GPU \d+ on node\d+\))"), where},
        {std::regex(R"([Ss]teps \d+-\d+)"), when},
        {std::regex(R"([Ss]tep \d+)"), when},
        {std::regex(R"((\d+)%)"), fmt::format(" {} % ", kSlotPercent)},
        {std::regex(R"(\b(cmpl-[0-9a-f]+|req-[A-Za-z0-9_-]*\d|[0-9a-f]{32})\b)"), request},
        {std::regex(R"(\b(Request|request|skipping|starvation of|misroute of) \d+\b)"),
         fmt::format(" $1 {} ", kSlotRequest)},
        {std::regex(R"(: \d+ is new)"), fmt::format(" : {} is new", kSlotRequest)},
        {std::regex(R"(layer \d+)"), fmt::format(" layer {} ", kSlotNumber)},
        {std::regex(R"(\d+\.\d+ GiB)"), fmt::format(" {} GiB", number)},
    };
  }();
  return kPatterns;
}

// A node named alone is a fact of the run and becomes <node>; a pair (the two ends of
// a link) stays words, checked against the trace's nodes.
std::string ReplaceLoneNodes(const std::string& s) {
  static const std::regex kNodes(R"(node\d+ and node\d+|\bnode\d+\b)");
  std::string out;
  size_t at = 0;
  for (auto it = std::sregex_iterator(s.begin(), s.end(), kNodes); it != std::sregex_iterator();
       ++it) {
    out += s.substr(at, static_cast<size_t>(it->position()) - at);
    const std::string match = it->str();
    out += match.find(" and ") != std::string::npos ? match : fmt::format(" {} ", kSlotNode);
    at = static_cast<size_t>(it->position() + it->length());
  }
  return out + s.substr(at);
}

bool IsClosingMark(std::string_view w) {
  return w == "." || w == "," || w == ":" || w == ";" || w == ")" || w == "%";
}
bool IsOpeningMark(std::string_view w) { return w == "(" || w == "~"; }

// Splits a whitespace-separated word into a leading "(" or "~", the word, and
// trailing stops; inner punctuation (send/recv, nvidia-smi, p~) stays.
void SplitWord(std::string word, std::vector<std::string>* out) {
  while (!word.empty() && (word.front() == '(' || word.front() == '~')) {
    out->push_back(std::string(1, word.front()));
    word.erase(0, 1);
  }
  std::vector<std::string> tail;
  while (word.size() > 1 && std::string_view(".,:;)").find(word.back()) != std::string::npos) {
    tail.push_back(std::string(1, word.back()));
    word.pop_back();
  }
  if (!word.empty()) out->push_back(std::move(word));
  out->insert(out->end(), tail.rbegin(), tail.rend());
}

std::string Joined(const std::vector<std::string>& words) {
  std::string text;
  bool glue = true;
  for (const std::string& w : words) {
    if (!glue && !IsClosingMark(w)) text += ' ';
    text += w;
    glue = IsOpeningMark(w);
  }
  // A capital at the start and after each full stop.
  bool capital = true;
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (capital && std::isalpha(c)) text[i] = static_cast<char>(std::toupper(c));
    if (std::isalnum(c) || c == '<') capital = false;
    if (c == '.' && (i + 1 == text.size() || text[i + 1] == ' ')) capital = true;
  }
  return text;
}

bool IsNumber(std::string_view w) {
  return !w.empty() && std::all_of(w.begin(), w.end(), [](char c) { return std::isdigit(c); });
}

// A literal node word (node0) that names a node the trace lacks.
void CheckNode(std::string_view w, const ExplanationGround& ground,
               std::vector<std::string>* problems) {
  if (w.size() <= 4 || w.substr(0, 4) != "node" || !IsNumber(w.substr(4))) return;
  if (!ground.nodes.count(std::stoi(std::string(w.substr(4))))) {
    problems->push_back(fmt::format("names {}, which the trace does not have", w));
  }
}

bool IsFamilyName(std::string_view w) {
  for (int f = 0; f < localize::kOperatorFamilyCount; ++f) {
    if (localize::OperatorFamilyName(static_cast<localize::OperatorFamily>(f)) == w) return true;
  }
  return false;
}

// Fills one slot, or says why it cannot be filled.
std::string FillSlot(std::string_view slot, const ExplanationGround& ground,
                     std::vector<std::string>* problems) {
  const std::string* value = nullptr;
  if (slot == kSlotWhere) value = &ground.where;
  if (slot == kSlotWhen) value = &ground.when;
  if (slot == kSlotNode) value = &ground.node;
  if (slot == kSlotPercent) value = &ground.percent;
  if (slot == kSlotRequest) value = &ground.request;
  if (value == nullptr || value->empty()) {
    problems->push_back(fmt::format("{} cannot be filled from the trace", slot));
    return std::string(slot);
  }
  return *value;
}

}  // namespace

std::vector<std::string> DelexicalizeExplanation(std::string_view text) {
  std::string s(text.substr(0, text.find(kTwinCost)));
  for (const SlotPattern& p : SlotPatterns()) s = std::regex_replace(s, p.pattern, p.replacement);
  s = ReplaceLoneNodes(s);
  std::vector<std::string> words;
  size_t at = 0;
  while (at < s.size()) {
    const size_t begin = s.find_first_not_of(' ', at);
    if (begin == std::string::npos) break;
    const size_t end = std::min(s.find(' ', begin), s.size());
    std::string word = s.substr(begin, end - begin);
    if (word.front() == '<' && word.back() == '>') {
      words.push_back(std::move(word));
    } else {
      SplitWord(std::move(word), &words);
    }
    at = end;
  }
  return words;
}

ExplanationVocabulary::ExplanationVocabulary() : words_{"[PAD]", "[BEGIN]", "[END]", "[UNK]"} {
  for (size_t i = 0; i < words_.size(); ++i) index_.emplace(words_[i], static_cast<int32_t>(i));
}

ExplanationVocabulary ExplanationVocabulary::FromWords(std::vector<std::string> words) {
  ExplanationVocabulary vocab;
  if (words.size() < vocab.words_.size() ||
      !std::equal(vocab.words_.begin(), vocab.words_.end(), words.begin())) {
    return vocab;
  }
  vocab.words_ = std::move(words);
  vocab.index_.clear();
  for (size_t i = 0; i < vocab.words_.size(); ++i)
    vocab.index_.emplace(vocab.words_[i], static_cast<int32_t>(i));
  return vocab;
}

ExplanationVocabulary ExplanationVocabulary::Build(
    const std::vector<std::vector<std::string>>& sentences) {
  ExplanationVocabulary vocab;
  for (const auto& sentence : sentences) {
    for (const std::string& w : sentence) {
      if (vocab.index_.emplace(w, static_cast<int32_t>(vocab.words_.size())).second)
        vocab.words_.push_back(w);
    }
  }
  return vocab;
}

int32_t ExplanationVocabulary::Id(const std::string& word) const {
  const auto found = index_.find(word);
  return found == index_.end() ? kExplainUnknown : found->second;
}

std::vector<int64_t> ExplanationVocabulary::Encode(const std::vector<std::string>& words) const {
  std::vector<int64_t> ids = {kExplainBegin};
  for (const std::string& w : words) {
    if (ids.size() + 1 >= kMaxExplanationTokens) break;
    ids.push_back(Id(w));
  }
  ids.push_back(kExplainEnd);
  return ids;
}

std::vector<std::string> ExplanationVocabulary::Decode(const std::vector<int32_t>& ids) const {
  std::vector<std::string> out;
  for (int32_t id : ids) {
    if (id == kExplainEnd) break;
    if (id <= kExplainUnknown || static_cast<size_t>(id) >= words_.size()) continue;
    out.push_back(words_[static_cast<size_t>(id)]);
  }
  return out;
}

RealizedExplanation RealizeExplanation(const std::vector<std::string>& words,
                                       const ExplanationGround& ground) {
  RealizedExplanation out;
  std::vector<std::string> filled;
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (w.size() > 2 && w.front() == '<' && w.back() == '>') {
      filled.push_back(FillSlot(w, ground, &out.problems));
      continue;
    }
    CheckNode(w, ground, &out.problems);
    std::string lowered = w;
    std::transform(lowered.begin(), lowered.end(), lowered.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    const bool family_named =
        i + 1 < words.size() &&
        (words[i + 1] == "kernels" || words[i + 1] == "family" || words[i + 1] == "operator");
    if (family_named && IsFamilyName(lowered) && !ground.families.count(lowered)) {
      out.problems.push_back(fmt::format("names the {} family, which the trace does not run", w));
    }
    if (lowered == "rank" && i + 1 < words.size() && IsNumber(words[i + 1]) &&
        !ground.ranks.count(std::stoi(words[i + 1]))) {
      out.problems.push_back(
          fmt::format("names rank {}, which the trace does not have", words[i + 1]));
    }
    filled.push_back(w);
  }
  if (words.empty()) out.problems.push_back("the decoder said nothing");
  out.text = Joined(filled);
  return out;
}

}  // namespace teller::learn
