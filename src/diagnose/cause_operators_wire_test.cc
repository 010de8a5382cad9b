// The cause operators' queries and answers as bytes (cause_operators_wire.h): a throttled
// GPU's survive the round trip, every cut or foreign buffer is an error naming the offset,
// a flipped byte never crashes the decoder.
#include "diagnose/cause_operators_wire.h"

#include <gtest/gtest.h>

#include <cmath>

#include "base/byte_io_testing.h"
#include "cause/deviation_map.h"
#include "cause/hypotheses.h"
#include "localize/step_features.h"
#include "sim/simulated_trace_testing.h"

namespace teller::diagnose {
namespace {

struct Asked {
  std::vector<OperatorQuery> queries;
  std::vector<std::vector<CauseOperator>> answers;
};

const Asked& ThrottledGpu() {
  static const Asked asked = [] {
    const model::Trace trace = sim::SimulatedTrace("gpu_throttle:rank=1", "operators_wire");
    const localize::StepFeatures features = localize::ComputeStepFeatures(trace);
    const cause::DeviationMap map = cause::BuildDeviationMap(trace, features, {});
    const cause::CauseAnalysis analysis = cause::AnalyzeCauses(map);
    Asked out;
    const std::vector<cause::NodeCell> node_cells = cause::NodeCells(trace, features);
    for (size_t i = 0; i < analysis.ranked.size() && i < 3; ++i) {
      out.queries.push_back(QueryOfCause(map, analysis.ranked[i]));
      out.answers.push_back(FindOperatorsOfPart(trace, node_cells, out.queries.back()));
    }
    return out;
  }();
  return asked;
}

TEST(CauseOperatorsWireTest, QueriesAndAnswersSurviveTheRoundTrip) {
  const Asked& asked = ThrottledGpu();
  ASSERT_FALSE(asked.queries.empty());
  ASSERT_FALSE(asked.queries[0].cells.empty());
  ASSERT_FALSE(asked.answers[0].empty());
  const std::vector<OperatorQuery> queries =
      base::Decoded(DecodeOperatorQueries(EncodeOperatorQueries(asked.queries)));
  ASSERT_EQ(queries.size(), asked.queries.size());
  for (size_t i = 0; i < queries.size(); ++i) {
    // NaN (a row without a cell) is not equal to itself: compare the bytes again.
    EXPECT_EQ(EncodeOperatorQueries({queries[i]}), EncodeOperatorQueries({asked.queries[i]}));
    EXPECT_EQ(queries[i].cells.size(), asked.queries[i].cells.size());
  }
  const auto answers = base::Decoded(DecodeCauseOperators(EncodeCauseOperators(asked.answers)));
  ASSERT_EQ(answers.size(), asked.answers.size());
  for (size_t i = 0; i < answers.size(); ++i) {
    ASSERT_EQ(answers[i].size(), asked.answers[i].size());
    for (size_t k = 0; k < answers[i].size(); ++k) {
      EXPECT_EQ(answers[i][k].name, asked.answers[i][k].name);
      EXPECT_EQ(answers[i][k].layer, asked.answers[i][k].layer);
      EXPECT_EQ(answers[i][k].victim, asked.answers[i][k].victim);
      EXPECT_EQ(answers[i][k].holds_moved, asked.answers[i][k].holds_moved);
      EXPECT_EQ(answers[i][k].started_later, asked.answers[i][k].started_later);
      EXPECT_EQ(answers[i][k].groups, asked.answers[i][k].groups);
    }
  }
  EXPECT_TRUE(base::Decoded(DecodeOperatorQueries(EncodeOperatorQueries({}))).empty());
}

TEST(CauseOperatorsWireTest, EveryTruncationIsAnErrorAndFlippedBytesNeverCrash) {
  const Asked& asked = ThrottledGpu();
  OperatorQuery small = asked.queries[0];
  small.cells.resize(1);
  small.cells[0].rows.resize(std::min<size_t>(small.cells[0].rows.size(), 4));
  base::ExpectDamageRefused(EncodeOperatorQueries({small}),
                            [](std::string_view b) { return DecodeOperatorQueries(b); });
  std::vector<CauseOperator> few(asked.answers[0].begin(),
                                 asked.answers[0].begin() +
                                     static_cast<std::ptrdiff_t>(std::min<size_t>(
                                         asked.answers[0].size(), 3)));
  base::ExpectDamageRefused(EncodeCauseOperators({few}),
                            [](std::string_view b) { return DecodeCauseOperators(b); });
}

TEST(CauseOperatorsWireTest, ForeignOrDamagedBuffersNameTheOffset) {
  const Asked& asked = ThrottledGpu();
  std::string foreign = EncodeOperatorQueries(asked.queries);
  foreign[0] = 'X';
  base::ExpectError(DecodeOperatorQueries(foreign).status(), "0", "magic");
  // The first cell's channel: after the header (8), the count (8), the window (16), the
  // later kernels' flag (1), the cells' count (8) and the rank (4).
  std::string channel = EncodeOperatorQueries(asked.queries);
  channel[45] = 99;
  base::ExpectError(DecodeOperatorQueries(channel).status(), "46", "channel 99");
  std::string flag = EncodeOperatorQueries(asked.queries);
  flag[32] = 5;
  base::ExpectError(DecodeOperatorQueries(flag).status(), "33", "later kernels' flag is 5");
  const std::string answers = EncodeCauseOperators(asked.answers);
  base::ExpectError(DecodeCauseOperators(answers.substr(0, 12)).status(), "8", "causes");
}

}  // namespace
}  // namespace teller::diagnose
