// The corpus loader (corpus.h) against the model's records (step_records.h): on a
// dataset split part they hold the same request steps, serialized alike.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "step_records/corpus.h"
#include "step_records/dataset_testing.h"

namespace teller::step_records {
namespace {

std::vector<std::string> SymbolTexts(const tpe::Serialization& s, const tpe::SymbolTable& table) {
  std::vector<std::string> texts;
  for (tpe::SymbolId id : s.symbol) texts.emplace_back(table.Get(id));
  return texts;
}

TEST(Corpus, SplitPartHoldsTheRecordsOfThatPart) {
  const std::string folder = BuildSmallDataset("corpus_split");
  // The TPE tool's corpus spells names as written (NormalizeName), as records do without
  // operator tokens.
  const RecordSet records =
      LoadParts(folder, "request_disjoint", {"train"}, /*operator_tokens=*/false);
  ASSERT_FALSE(records.records.empty());

  auto sources = ExpandCorpusInputs({folder});
  ASSERT_TRUE(sources.ok()) << sources.status().message();
  auto split = ParseSplitPart("request_disjoint:train");
  ASSERT_TRUE(split.ok());
  Corpus corpus;
  corpus.filter.split = *split;
  CorpusOptions options;
  size_t opened = 0;
  options.on_source = [&](const CorpusSource&, size_t, size_t, size_t) { ++opened; };
  ASSERT_TRUE(LoadCorpora(*sources, options, {&corpus}).ok());
  EXPECT_TRUE(CheckCorpusNotEmpty(corpus, CorpusUnit::kRequestStep, *sources).ok());
  EXPECT_GT(opened, 0u);

  ASSERT_EQ(corpus.serializations.size(), records.records.size());
  for (size_t r = 0; r < records.records.size(); ++r) {
    const StepRecord& record = records.records[r];
    const CorpusRecordInfo& info = corpus.infos[r];
    EXPECT_EQ(info.source, record.bundle);
    EXPECT_EQ(info.request, record.request);
    EXPECT_EQ(info.step, record.step);
    EXPECT_EQ(info.ranks, record.ranks);
    const tpe::Serialization& s = corpus.serializations[r];
    EXPECT_EQ(s.parent, record.serialization.parent);
    EXPECT_EQ(s.depth, record.serialization.depth);
    EXPECT_EQ(s.dur_ns, record.serialization.dur_ns);
    EXPECT_EQ(SymbolTexts(s, corpus.symbols), SymbolTexts(record.serialization, records.symbols));
  }
}

TEST(Corpus, FilterByRankKeepsThatRanksProjectionOnly) {
  const std::string folder = BuildSmallDataset("corpus_rank");
  auto sources = ExpandCorpusInputs({folder});
  ASSERT_TRUE(sources.ok());
  Corpus corpus;
  corpus.filter.rank = 1;
  corpus.filter.split = *ParseSplitPart("request_disjoint:test");
  ASSERT_TRUE(LoadCorpora(*sources, {}, {&corpus}).ok());
  for (const CorpusRecordInfo& info : corpus.infos) {
    EXPECT_EQ(info.ranks, std::vector<int32_t>{1}) << CorpusRecordLabel(info);
  }
}

TEST(Corpus, ParsesUnitsAndSplitParts) {
  EXPECT_EQ(*ParseCorpusUnit("engine-step"), CorpusUnit::kEngineStep);
  EXPECT_FALSE(ParseCorpusUnit("step").ok());
  auto part = ParseSplitPart("data/ds:bundle_disjoint:val");
  ASSERT_TRUE(part.ok());
  EXPECT_EQ(part->dataset, "data/ds");
  EXPECT_EQ(part->Text(), "bundle_disjoint:val");
  EXPECT_FALSE(ParseSplitPart("train").ok());
  EXPECT_FALSE(ParseSplitPart(":train").ok());
}

}  // namespace
}  // namespace teller::step_records
