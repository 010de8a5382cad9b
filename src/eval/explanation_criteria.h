// The paper's Table 9 criteria, checked automatically on one explanation against the
// run's labels: does it say there was a fault when there was one (anomaly), name the
// right category (fault type), name only ranks, nodes and steps that exist (evidence
// locator), put the cause where the fault was and when (causal consistency), say what to
// do (actionability), and say what, where, when and how much (completeness). BLEU says
// how an explanation is worded; these say whether what it states is right
// (docs/metrics.md, "Explanation criteria").
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace teller::eval {

// What the labels say happened. Category names are the labels' (cuda_kernel,
// communication_network, memory_resource, runtime_driver, scheduling_software).
struct ExplanationTruth {
  bool faulty = false;
  std::string category;
  int32_t rank = -1;                        // the fault's rank, -1 none
  int32_t node = -1;                        // the fault's node, -1 none
  std::string family;                       // the fault's operator family, "" none
  int64_t first_step = -1, last_step = -1;  // its affected steps, -1 none
};

// What exists to be named: ranks 0..ranks-1, nodes 0..nodes-1, steps 0..steps-1.
struct ExplanationWorld {
  int32_t ranks = 0;
  int32_t nodes = 0;
  int64_t steps = 0;
};

// What one explanation states, read from its words.
struct ExplanationFacts {
  std::string lowered;  // the explanation in lower case
  bool claims_fault = false;
  std::string category;        // the category its words point to, "" none
  std::vector<int32_t> ranks;  // in the order named
  std::vector<int32_t> nodes;
  std::vector<std::pair<int64_t, int64_t>> steps;  // named steps and ranges
  bool names_amount = false;                       // a ratio, a percentage or a duration
  bool names_action = false;                       // a check, a command or a fix
};
ExplanationFacts ReadExplanation(std::string_view text);

enum class Criterion : uint8_t {
  kAnomaly,
  kFaultType,
  kLocator,
  kCausal,
  kActionable,
  kComplete,
};
inline constexpr int kCriterionCount = static_cast<int>(Criterion::kComplete) + 1;
std::string_view CriterionName(Criterion criterion);

using CriteriaCheck = std::array<bool, kCriterionCount>;
CriteriaCheck CheckExplanation(const ExplanationFacts& facts, const ExplanationTruth& truth,
                               const ExplanationWorld& world);

// Shares of the checked explanations that meet each criterion, and their mean.
struct CriteriaScores {
  int64_t checked = 0;
  std::array<double, kCriterionCount> share{};
  double overall = 0.0;
};
CriteriaScores ScoreCriteria(const std::vector<CriteriaCheck>& checks);

}  // namespace teller::eval
