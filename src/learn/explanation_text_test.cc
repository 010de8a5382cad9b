// The decoder's words: the simulator's reference phrasings go through their slots
// and back unchanged, and the grounding check refuses what the trace does not have.
#include <gtest/gtest.h>

#include <regex>

#include "learn/explanation_text.h"
#include "sim/simulated_trace_testing.h"
#include "step_records/step_records.h"

namespace teller::learn {
namespace {

std::string FirstMatch(const std::string& text, const std::regex& pattern, int group = 0) {
  std::smatch match;
  return std::regex_search(text, match, pattern) ? match[group].str() : "";
}

// The slot values a phrasing holds, read back from it as the trace would give them.
ExplanationGround GroundOf(const std::string& text, const step_records::RecordSet& set) {
  ExplanationGround ground;
  ground.ranks = {0, 1};
  ground.nodes = {0};
  for (const step_records::StepRecord& record : set.records) {
    for (localize::OperatorFamily family : record.node_family)
      ground.families.emplace(localize::OperatorFamilyName(family));
  }
  ground.where = FirstMatch(text, std::regex(R"(rank \d+ \(GPU \d+ on node\d+\))"));
  ground.node = FirstMatch(text, std::regex(R"(node\d+)"));
  ground.when = FirstMatch(text, std::regex(R"([Ss]teps? \d+(-\d+)?)"));
  if (!ground.when.empty()) ground.when[0] = 's';
  ground.percent = FirstMatch(text, std::regex(R"((\d+)%)"), 1);
  ground.request = FirstMatch(text, std::regex(R"(cmpl-[0-9a-f]+)"));
  return ground;
}

bool HasSlot(const std::vector<std::string>& words, std::string_view slot) {
  return std::find(words.begin(), words.end(), slot) != words.end();
}

TEST(ExplanationText, ReferencesRoundTripThroughTheirSlots) {
  const std::vector<std::string> faults = {"gpu_throttle:rank=1",
                                           "launch_latency:rank=1",
                                           "memcpy_latency:rank=1",
                                           "straggler_rank:rank=1",
                                           "engine_pause",
                                           "decode_misroute",
                                           "illegal_memory_access:rank=1",
                                           "kernel_contention:rank=1",
                                           "host_memory_pressure:node=0"};
  int checked = 0, with_facts = 0, with_node = 0;
  for (const std::string& fault : faults) {
    SCOPED_TRACE(fault);
    const model::Trace trace = sim::SimulatedTrace(fault, "explanation_text");
    step_records::RecordSet set;
    step_records::RecordOptions options;
    options.bundle = "run";
    ASSERT_TRUE(step_records::AddTraceRecords(trace, options, &set).ok());
    const auto abnormal = std::find_if(set.records.begin(), set.records.end(), [](const auto& r) {
      return r.is_anomaly && !r.explanations.empty();
    });
    ASSERT_NE(abnormal, set.records.end());
    for (const std::string& phrasing : abnormal->explanations) {
      const std::string cut = phrasing.substr(0, phrasing.find(" Against the run's"));
      const ExplanationGround ground = GroundOf(cut, set);
      // Realized sentences start with a capital; some references do not.
      std::string original = cut;
      original[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(original[0])));
      const std::vector<std::string> words = DelexicalizeExplanation(phrasing);
      // No place, step or amount is left as a word of its own (the engine loop's rank 0
      // and the constants of crashes and hangs are not facts of the run).
      for (const std::string& w : words) {
        EXPECT_FALSE(std::regex_match(w, std::regex(R"(\d+%?|\d+-\d+)")) && w != "600" &&
                     w != "700" && w != "2" && w != "10" && w != "0")
            << w << " in " << original;
      }
      const RealizedExplanation realized = RealizeExplanation(words, ground);
      if (HasSlot(words, kSlotNumber)) {
        EXPECT_FALSE(realized.grounded()) << original;
        continue;
      }
      EXPECT_EQ(realized.text, original);
      EXPECT_TRUE(realized.grounded()) << realized.problems.front();
      ++checked;
      with_facts += HasSlot(words, kSlotWhere) || HasSlot(words, kSlotWhen);
      with_node += HasSlot(words, kSlotNode);
    }
  }
  EXPECT_GE(checked, 18);
  EXPECT_GE(with_facts, 18);
  EXPECT_EQ(with_node, 3);  // host memory pressure's three phrasings
}

TEST(ExplanationText, VocabularyEncodesDecodesAndBoundsLength) {
  const std::vector<std::string> sentence = {"GPU", "throttling", "on", "<where>", "."};
  const ExplanationVocabulary vocab = ExplanationVocabulary::Build({sentence});
  ASSERT_EQ(vocab.size(), 4u + sentence.size());
  const std::vector<int64_t> ids = vocab.Encode({"GPU", "throttling", "elsewhere"});
  ASSERT_EQ(ids.size(), 5u);
  EXPECT_EQ(ids.front(), kExplainBegin);
  EXPECT_EQ(ids[3], kExplainUnknown);
  EXPECT_EQ(ids.back(), kExplainEnd);
  std::vector<int32_t> said(ids.begin() + 1, ids.end());
  said.push_back(vocab.Id("on"));  // after the end mark: not read
  EXPECT_EQ(vocab.Decode(said), (std::vector<std::string>{"GPU", "throttling"}));
  EXPECT_EQ(vocab.Encode(std::vector<std::string>(500, "on")).size(), kMaxExplanationTokens);
  EXPECT_EQ(ExplanationVocabulary::FromWords(vocab.words()).words(), vocab.words());
  // A word list without the marks first is not a vocabulary.
  EXPECT_EQ(ExplanationVocabulary::FromWords({"GPU", "on", "a", "b", "c"}).size(), 4u);
}

TEST(ExplanationText, GroundingRefusesWhatTheTraceLacks) {
  ExplanationGround ground;
  ground.ranks = {0, 1};
  ground.nodes = {0};
  ground.families = {"gemm", "attention"};
  ground.where = "rank 1 (GPU 1 on node0)";
  ground.when = "steps 5-8";
  const auto realize = [&](const std::string& text) {
    return RealizeExplanation(DelexicalizeExplanation(text), ground);
  };
  const RealizedExplanation good =
      realize("The gemm kernels slowed on rank 1 (GPU 1 on node0) during steps 5-8.");
  EXPECT_TRUE(good.grounded());
  EXPECT_EQ(good.text, "The gemm kernels slowed on rank 1 (GPU 1 on node0) during steps 5-8.");
  // No measured change to fill the percentage with.
  EXPECT_FALSE(realize("Kernels ran about 30% slower.").grounded());
  // A node, a rank and a family the trace does not have.
  EXPECT_FALSE(realize("Slow network between node0 and node1.").grounded());
  EXPECT_FALSE(realize("Long pauses in the scheduler on rank 4.").grounded());
  EXPECT_FALSE(realize("The moe kernels slowed down.").grounded());
  EXPECT_TRUE(realize("Long pauses in the scheduler on rank 0.").grounded());
  EXPECT_FALSE(RealizeExplanation({}, ground).grounded());
}

}  // namespace
}  // namespace teller::learn
