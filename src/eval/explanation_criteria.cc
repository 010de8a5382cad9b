#include "eval/explanation_criteria.h"

#include <algorithm>
#include <cctype>
#include <map>

namespace teller::eval {

namespace {

struct Cue {
  std::string_view words;
  int weight;
};

// Words that point to a category, weighed by how specific they are.
const std::map<std::string_view, std::vector<Cue>>& CategoryCues() {
  static const std::map<std::string_view, std::vector<Cue>> cues = {
      {"cuda_kernel",
       {{"throttl", 3},
        {"illegal memory access", 3},
        {"illegal address", 3},
        {"cuda/kernel", 3},
        {"'s gpu", 2},
        {"compute kernels", 2},
        {"kernels ran", 2},
        {"kernels slowed", 2},
        {"contention", 2},
        {"contended", 2},
        {"kernel", 1},
        {"gpu", 1}}},
      {"runtime_driver",
       {{"runtime/driver", 3}, {"launchkernel", 3},
        {"launch", 2},
        {"cudamemcpy", 2},
        {"memcpy", 2},
        {"host-device cop", 2},
        {"synchroniz", 2},
        {"driver", 2},
        {"runtime", 2},
        {"retried", 2},
        {"retries", 2},
        {"copies", 1},
        {"pcie", 1}}},
      {"communication_network",
       {{"straggler", 3},
        {"collective late", 3},
        {"communication", 3},
        {"collective", 2},
        {"nccl", 2},
        {"link", 2},
        {"interconnect", 2},
        {"network", 2},
        {"all-reduce", 1},
        {"allreduce", 1},
        {"all-gather", 1},
        {"send/recv", 1},
        {"sendrecv", 1}}},
      {"memory_resource",
       {{"starved of memory", 4}, {"memory pressure", 3},
        {"host memory", 3},
        {"memory/resource", 3},
        {"allocator", 3},
        {"fragment", 3},
        {"kv cache", 3},
        {"kv-cache", 3},
        {"out of memory", 3},
        {"host work", 2},
        {"cudamalloc", 2},
        {"swap", 2},
        {"preempt", 2},
        {"malloc", 1}}},
      {"scheduling_software",
       {{"out of their usual order", 4},
        {"engine loop", 3},
        {"reorder", 3},
        {"operator order", 3},
        {"misrout", 3},
        {"decode path", 3},
        {"starv", 3},
        {"scheduling", 3},
        {"scheduler", 2},
        {"pause", 2},
        {"stalled", 1},
        {"queue", 1}}},
  };
  return cues;
}

// Phrases of an explanation that finds nothing wrong.
constexpr std::string_view kNoFault[] = {"no cause stands", "healthy", "no fault",
                                         "nothing stands out", "no operator family deviates"};

// Words of a next action: a check, a command, a fix.
constexpr std::string_view kActions[] = {
    "check",   "look ", "inspect", "run ",   "rerun",     "use ",       "set ",        "fix",
    "reduce",  "raise", "lower",   "free ",  "roll back", "update",     "drain",       "pin ",
    "enable",  "move ", "tune",    "review", "diff ",     "verify",     "investigate", "find ",
    "compare", "warm ", "restart", "patch",  "action:",   "nvidia-smi", "evict",       "isolate"};

size_t Count(std::string_view text, std::string_view words) {
  size_t count = 0;
  for (size_t at = text.find(words); at != std::string_view::npos;
       at = text.find(words, at + words.size())) {
    ++count;
  }
  return count;
}

bool Contains(std::string_view text, std::string_view words) {
  return text.find(words) != std::string_view::npos;
}

std::string DetectCategory(std::string_view text) {
  std::string best;
  int best_score = 0;
  for (const auto& [category, cues] : CategoryCues()) {
    int score = 0;
    for (const Cue& cue : cues) score += cue.weight * static_cast<int>(Count(text, cue.words));
    if (score > best_score) best_score = score, best = std::string(category);
  }
  return best;
}

bool IsDigit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }
bool IsAlpha(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }

// Reads the integer at *pos (advancing past it); false when none starts there.
bool ReadInteger(std::string_view text, size_t* pos, int64_t* value) {
  size_t at = *pos;
  if (at >= text.size() || !IsDigit(text[at])) return false;
  int64_t v = 0;
  for (; at < text.size() && IsDigit(text[at]); ++at)
    v = std::min<int64_t>(v * 10 + (text[at] - '0'), 1LL << 40);
  *pos = at, *value = v;
  return true;
}

// Every place `word` (or its plural) starts a word and is followed by a space and a number.
template <typename OnNumbers>
void ForEachNamed(std::string_view text, std::string_view word, bool space_optional,
                  OnNumbers&& on_numbers) {
  for (size_t at = text.find(word); at != std::string_view::npos; at = text.find(word, at + 1)) {
    if (at > 0 && IsAlpha(text[at - 1])) continue;
    size_t pos = at + word.size();
    if (pos < text.size() && text[pos] == 's') ++pos;
    if (pos < text.size() && text[pos] == ' ') {
      ++pos;
    } else if (!space_optional) {
      continue;
    }
    on_numbers(pos);
  }
}

// "rank 3", "ranks 0, 1, 3 and 2 more": the numbers of a list (a count "N more" is none).
void ReadRankList(std::string_view text, size_t pos, std::vector<int32_t>* out) {
  int64_t value = 0;
  while (ReadInteger(text, &pos, &value)) {
    if (text.substr(pos, 5) == " more") return;
    out->push_back(static_cast<int32_t>(value));
    if (text.substr(pos, 2) == ", ") {
      pos += 2;
    } else if (text.substr(pos, 5) == " and ") {
      pos += 5;
    } else {
      return;
    }
  }
}

// "step 5", "steps 5-8", "steps 4,5", "steps 19-43".
void ReadStepList(std::string_view text, size_t pos,
                  std::vector<std::pair<int64_t, int64_t>>* out) {
  int64_t first = 0;
  while (ReadInteger(text, &pos, &first)) {
    int64_t last = first;
    if (pos + 1 < text.size() && text[pos] == '-' && IsDigit(text[pos + 1])) {
      ++pos;
      ReadInteger(text, &pos, &last);
    }
    out->emplace_back(first, last);
    if (pos + 1 < text.size() && text[pos] == ',' && IsDigit(text[pos + 1])) {
      ++pos;
    } else {
      return;
    }
  }
}

// A ratio (1.3x), a percentage (30%) or a duration (4.0 ms, 19 us).
bool NamesAmount(std::string_view text) {
  for (size_t at = 0; at < text.size(); ++at) {
    if (!IsDigit(text[at]) || (at > 0 && (IsDigit(text[at - 1]) || text[at - 1] == '.'))) continue;
    size_t end = at;
    while (end < text.size() && (IsDigit(text[end]) || text[end] == '.')) ++end;
    const std::string_view rest = text.substr(end, 4);
    const bool word_ends = end + 1 >= text.size() || !IsAlpha(text[end + 1]);
    if (rest.substr(0, 1) == "%" || (rest.substr(0, 1) == "x" && word_ends)) return true;
    for (std::string_view unit : {" ms", " us", " s", " ns", " µs"}) {
      const size_t after = end + unit.size();
      if (text.substr(end, unit.size()) == unit &&
          (after >= text.size() || !IsAlpha(text[after]))) {
        return true;
      }
    }
  }
  return false;
}

}  // namespace

ExplanationFacts ReadExplanation(std::string_view explanation) {
  std::string text(explanation);
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  ExplanationFacts facts;
  facts.lowered = text;
  facts.category = DetectCategory(text);
  bool says_none = false;
  for (std::string_view phrase : kNoFault) says_none |= Contains(text, phrase);
  facts.claims_fault = !says_none && !facts.category.empty();
  ForEachNamed(text, "rank", false, [&](size_t pos) { ReadRankList(text, pos, &facts.ranks); });
  ForEachNamed(text, "node", true, [&](size_t pos) {
    int64_t node = 0;
    if (ReadInteger(text, &pos, &node)) facts.nodes.push_back(static_cast<int32_t>(node));
  });
  ForEachNamed(text, "step", false, [&](size_t pos) { ReadStepList(text, pos, &facts.steps); });
  facts.names_amount = NamesAmount(text);
  for (std::string_view action : kActions) facts.names_action |= Contains(text, action);
  return facts;
}

std::string_view CriterionName(Criterion criterion) {
  static constexpr std::array<std::string_view, kCriterionCount> kNames = {
      "Anomaly correctness", "Fault-type correctness", "Evidence locator validity",
      "Causal consistency",  "Actionability",          "Sentence completeness"};
  return kNames[static_cast<size_t>(criterion)];
}

namespace {

bool LocatorsExist(const ExplanationFacts& facts, const ExplanationWorld& world) {
  for (int32_t rank : facts.ranks) {
    if (rank < 0 || (world.ranks > 0 && rank >= world.ranks)) return false;
  }
  for (int32_t node : facts.nodes) {
    if (node < 0 || (world.nodes > 0 && node >= world.nodes)) return false;
  }
  for (const auto& [first, last] : facts.steps) {
    if (first > last || (world.steps > 0 && last >= world.steps)) return false;
  }
  return true;
}

bool NamesFamily(const ExplanationFacts& facts, const ExplanationTruth& truth) {
  return !truth.family.empty() && Contains(facts.lowered, truth.family);
}

bool NamesLocation(const ExplanationFacts& facts, const ExplanationTruth& truth) {
  return !facts.ranks.empty() || !facts.nodes.empty() || !facts.steps.empty() ||
         NamesFamily(facts, truth);
}

// The cause placed where the fault was (its rank first, else its node, else its family)
// and, where the explanation names steps, when it was.
bool PlacesTheCause(const ExplanationFacts& facts, const ExplanationTruth& truth) {
  bool where = true;
  if (truth.rank >= 0) {
    where = !facts.ranks.empty() && facts.ranks.front() == truth.rank;
  } else if (truth.node >= 0) {
    where = std::find(facts.nodes.begin(), facts.nodes.end(), truth.node) != facts.nodes.end();
  } else if (!truth.family.empty()) {
    where = NamesFamily(facts, truth);
  }
  if (!where || truth.first_step < 0 || facts.steps.empty()) return where;
  for (const auto& [first, last] : facts.steps) {
    if (first <= truth.last_step && last >= truth.first_step) return true;
  }
  return false;
}

}  // namespace

CriteriaCheck CheckExplanation(const ExplanationFacts& facts, const ExplanationTruth& truth,
                               const ExplanationWorld& world) {
  CriteriaCheck check{};
  auto set = [&](Criterion c, bool value) { check[static_cast<size_t>(c)] = value; };
  set(Criterion::kAnomaly, facts.claims_fault == truth.faulty);
  set(Criterion::kActionable, facts.names_action);
  if (!truth.faulty) {
    const bool quiet = !facts.claims_fault;
    for (Criterion c :
         {Criterion::kFaultType, Criterion::kLocator, Criterion::kCausal, Criterion::kComplete}) {
      set(c, quiet);
    }
    return check;
  }
  set(Criterion::kFaultType, facts.claims_fault && facts.category == truth.category);
  set(Criterion::kLocator, NamesLocation(facts, truth) && LocatorsExist(facts, world));
  set(Criterion::kCausal, facts.claims_fault && PlacesTheCause(facts, truth));
  set(Criterion::kComplete, facts.claims_fault && NamesLocation(facts, truth) &&
                                (truth.first_step < 0 || !facts.steps.empty()) &&
                                facts.names_amount);
  return check;
}

CriteriaScores ScoreCriteria(const std::vector<CriteriaCheck>& checks) {
  CriteriaScores scores;
  scores.checked = static_cast<int64_t>(checks.size());
  if (checks.empty()) return scores;
  for (const CriteriaCheck& check : checks) {
    for (int c = 0; c < kCriterionCount; ++c) scores.share[c] += check[c] ? 1.0 : 0.0;
  }
  for (double& share : scores.share) share /= static_cast<double>(checks.size());
  for (double share : scores.share) scores.overall += share / kCriterionCount;
  return scores;
}

}  // namespace teller::eval
