// The words of the model's generated explanations (paper 3.7, L_mot's NLL term): a
// reference explanation becomes a word sequence whose facts are slots ("<where>",
// "<when>", ...), the decoder learns the words, and a realized sentence takes its
// facts from the trace (the model's localized rank, its flagged window, the measured
// change), never from the decoder's memory. A grounding check then refuses a
// sentence that names a rank, node, step or operator family the trace does not have,
// or a slot it cannot fill.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace teller::learn {

inline constexpr int32_t kExplainPad = 0;
inline constexpr int32_t kExplainBegin = 1;
inline constexpr int32_t kExplainEnd = 2;
inline constexpr int32_t kExplainUnknown = 3;
// Words of one explanation, its begin and end marks included.
inline constexpr size_t kMaxExplanationTokens = 72;

// The slots a realized sentence fills from the trace.
inline constexpr std::string_view kSlotWhere = "<where>";      // rank r (GPU g on nodeN)
inline constexpr std::string_view kSlotNode = "<node>";        // nodeN (a node's fault)
inline constexpr std::string_view kSlotWhen = "<when>";        // step s / steps a-b
inline constexpr std::string_view kSlotPercent = "<percent>";  // the measured change, "25"
inline constexpr std::string_view kSlotRequest = "<request>";  // a request id
inline constexpr std::string_view kSlotNumber = "<number>";    // any other fact: not fillable

// A reference phrasing as words: facts replaced by slots, punctuation split off, the
// simulator's twin-measured cost (not a fact of the trace) cut. Case is kept.
std::vector<std::string> DelexicalizeExplanation(std::string_view text);

// Words <-> ids: the four marks first, then the words of the training references in
// order of first use.
class ExplanationVocabulary {
 public:
  ExplanationVocabulary();
  static ExplanationVocabulary Build(const std::vector<std::vector<std::string>>& sentences);
  // From the saved word list (the marks first); empty when it does not start with them.
  static ExplanationVocabulary FromWords(std::vector<std::string> words);

  size_t size() const { return words_.size(); }
  const std::vector<std::string>& words() const { return words_; }
  int32_t Id(const std::string& word) const;
  // kExplainBegin, the words' ids (at most kMaxExplanationTokens - 2), kExplainEnd.
  std::vector<int64_t> Encode(const std::vector<std::string>& words) const;
  // The words up to the first end mark; marks and padding dropped.
  std::vector<std::string> Decode(const std::vector<int32_t>& ids) const;

 private:
  std::vector<std::string> words_;
  std::unordered_map<std::string, int32_t> index_;
};

// What a generated sentence may name: the trace's ranks, nodes, steps and the operator
// families of its nodes, and the slot values measured for the run.
struct ExplanationGround {
  std::set<int32_t> ranks;
  std::set<int32_t> nodes;
  int64_t first_step = 0, last_step = -1;
  std::set<std::string> families;  // localize::OperatorFamilyName of the trace's operators
  std::string where;               // "" when the model localized no rank
  std::string node;                // "nodeN" of that rank, "" likewise
  std::string when;                // "" when it flagged no step
  std::string percent;             // "" when the change is not positive
  std::string request;             // "" when the records carry no request id
};

struct RealizedExplanation {
  std::string text;
  // Empty: grounded. Otherwise why the sentence was dropped (an unfilled slot, a rank,
  // node, step or family the trace lacks), one reason per problem.
  std::vector<std::string> problems;
  bool grounded() const { return problems.empty(); }
};

// The words joined into sentences (spacing of punctuation, capitals after a stop),
// slots filled from `ground`, every named fact checked against it.
RealizedExplanation RealizeExplanation(const std::vector<std::string>& words,
                                       const ExplanationGround& ground);

}  // namespace teller::learn
