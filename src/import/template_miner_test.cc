#include "import/template_miner.h"

#include <gtest/gtest.h>

#include <random>

namespace teller::import {
namespace {

std::string Mask(std::string_view token) {
  std::string scratch;
  return std::string(MaskToken(token, &scratch));
}

TEST(TemplateMiner, MasksParametersBeforeMining) {
  EXPECT_EQ(Mask("1234"), "<*>");
  EXPECT_EQ(Mask("1234,"), "<*>,");
  EXPECT_EQ(Mask("0.5%"), "<*>");
  EXPECT_EQ(Mask("0x7f3b6d41df86"), "<*>");
  EXPECT_EQ(Mask("(0x7f3b6d41df86"), "(<*>");
  EXPECT_EQ(Mask("cmpl-8b3f2a1c-0."), "<*>.");
  EXPECT_EQ(Mask("WorkNCCL(SeqNum=1234,"), "WorkNCCL(SeqNum=<*>,");
  EXPECT_EQ(Mask("Timeout(ms)=600000)"), "Timeout(ms)=<*>)");
  EXPECT_EQ(Mask("rid='6b0c2f7e',"), "rid='<*>',");
  EXPECT_EQ(Mask("127.0.0.1:50000"), "<*>");
  EXPECT_EQ(Mask("3f2a9b8c-7d6e-4f1a-0b9c-8d7e6f5a4b3c"), "<*>");
  EXPECT_EQ(Mask("7.4944"), "<*>");
  EXPECT_EQ(Mask("12ms"), "<*>");
  EXPECT_EQ(Mask("3.5GiB"), "<*>");
  EXPECT_EQ(Mask("[Rank"), "[Rank");
  EXPECT_EQ(Mask("0]"), "<*>]");
  // Words stay, even with digits inside.
  EXPECT_EQ(Mask("/v1/completions"), "/v1/completions");
  EXPECT_EQ(Mask("HTTP/1.1\""), "HTTP/1.1\"");
  EXPECT_EQ(Mask("cuda:0"), "cuda:0");
  EXPECT_EQ(Mask("#new-seq:"), "#new-seq:");
  EXPECT_EQ(Mask("deadbeef"), "deadbeef");
  EXPECT_EQ(Mask("("), "(");
}

TEST(TemplateMiner, LinesDifferingOnlyInNumbersAndIdsShareATemplate) {
  TemplateMiner miner;
  model::TemplateId a = miner.Add("Added request cmpl-8b3f2a1c9d4e4f5a-0.");
  model::TemplateId b = miner.Add("Added request chatcmpl-0f1e2d3c4b5a6978.");
  model::TemplateId c = miner.Add("Added request cmpl-00aa11bb22cc-0.");
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, c);
  EXPECT_EQ(miner.Pattern(a), "Added request <*>.");
  EXPECT_EQ(miner.Count(a), 3);

  model::TemplateId d1 = miner.Add(
      "Decode batch. #running-req: 3, #token: 1024, token usage: 0.01, gen throughput (token/s): "
      "123.45, #queue-req: 0");
  model::TemplateId d2 = miner.Add(
      "Decode batch. #running-req: 40, #token: 99, token usage: 0.93, gen throughput (token/s): "
      "1.5, #queue-req: 12");
  EXPECT_EQ(d1, d2);
  EXPECT_EQ(miner.Pattern(d1),
            "Decode batch. #running-req: <*>, #token: <*>, token usage: <*>, gen throughput "
            "(token/s): <*>, #queue-req: <*>");
}

TEST(TemplateMiner, DifferentMessagesGetDifferentTemplates) {
  TemplateMiner miner;
  model::TemplateId added = miner.Add("Added request cmpl-8b3f2a1c9d4e4f5a-0.");
  model::TemplateId finished = miner.Add("Finished request cmpl-8b3f2a1c9d4e4f5a-0.");
  model::TemplateId prefill = miner.Add(
      "Prefill batch. #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, "
      "#running-req: 0, #queue-req: 0");
  model::TemplateId decode = miner.Add(
      "Decode batch. #running-req: 3, #token: 1024, token usage: 0.01, gen throughput (token/s): "
      "123.45, #queue-req: 0");
  model::TemplateId load = miner.Add("Load weight begin. avail mem=78.50 GB");
  model::TemplateId oom = miner.Add("CUDA out of memory. Tried to allocate 2.00 GiB.");
  std::vector<model::TemplateId> ids = {added, finished, prefill, decode, load, oom};
  for (size_t i = 0; i < ids.size(); ++i) {
    for (size_t j = i + 1; j < ids.size(); ++j) EXPECT_NE(ids[i], ids[j]) << i << " " << j;
  }
  EXPECT_EQ(miner.size(), 6u);
}

TEST(TemplateMiner, DrainMergesVariablePositionsBeyondThePrefix) {
  TemplateMiner miner;
  model::TemplateId a = miner.Add("connection to node alpha closed by peer");
  model::TemplateId b = miner.Add("connection to node beta closed by peer");
  EXPECT_EQ(a, b);
  EXPECT_EQ(miner.Pattern(a), "connection to node <*> closed by peer");
  // Below the similarity threshold: a new template in the same leaf.
  model::TemplateId c = miner.Add("connection to x y z w v");
  EXPECT_NE(a, c);
  // A different token count is a different template.
  EXPECT_NE(a, miner.Add("connection to node alpha closed"));
}

TEST(TemplateMiner, EmptyAndAllParameterLinesAreStable) {
  TemplateMiner miner;
  EXPECT_EQ(miner.Add(""), miner.Add("   "));
  EXPECT_EQ(miner.Add("12 0x34 5.6"), miner.Add("7 8 9"));
}

TEST(TemplateMiner, LongLinesAreCappedToMaxTokens) {
  TemplateMinerOptions options;
  options.max_tokens = 8;
  TemplateMiner miner(options);
  std::string long_a = "alpha beta gamma delta epsilon zeta eta theta iota kappa";
  std::string long_b = "alpha beta gamma delta epsilon zeta eta theta lambda mu nu xi";
  model::TemplateId a = miner.Add(long_a);
  EXPECT_EQ(a, miner.Add(long_b));
  EXPECT_EQ(miner.Pattern(a), "alpha beta gamma delta epsilon zeta eta <*>");
}

std::vector<std::string> RandomLines(uint32_t seed, int count) {
  std::mt19937 random(seed);
  const char* words[] = {"Added", "request", "batch", "Decode", "token", "usage:", "error",
                         "NCCL",  "timeout", "rank",  "alloc",  "free",  "GiB"};
  std::vector<std::string> lines;
  for (int i = 0; i < count; ++i) {
    std::string line;
    int n = 1 + static_cast<int>(random() % 8);
    for (int k = 0; k < n; ++k) {
      if (k) line += ' ';
      if (random() % 3 == 0) {
        line += std::to_string(random() % 1000);
      } else {
        line += words[random() % (sizeof(words) / sizeof(words[0]))];
      }
    }
    lines.push_back(line);
  }
  return lines;
}

TEST(TemplateMiner, DeterministicForTheSameInputOrder) {
  std::vector<std::string> lines = RandomLines(7, 3000);
  TemplateMiner first, second;
  for (const std::string& line : lines) EXPECT_EQ(first.Add(line), second.Add(line));
  ASSERT_EQ(first.size(), second.size());
  for (size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(first.Pattern(model::TemplateId(i)), second.Pattern(model::TemplateId(i)));
  }
}

TEST(TemplateMiner, StoreAndLoadKeepIdsAcrossImports) {
  std::vector<std::string> lines = RandomLines(11, 2000);
  model::Trace trace;
  TemplateMiner whole;
  std::vector<model::TemplateId> expected;
  for (const std::string& line : lines) expected.push_back(whole.Add(line));

  // The same lines in two halves, the second half starting from the stored templates.
  TemplateMiner first;
  for (size_t i = 0; i < 1000; ++i) EXPECT_EQ(first.Add(lines[i]), expected[i]);
  first.StoreTo(&trace);
  TemplateMiner second;
  second.LoadFrom(trace);
  for (size_t i = 1000; i < lines.size(); ++i) EXPECT_EQ(second.Add(lines[i]), expected[i]) << i;
  second.StoreTo(&trace);
  ASSERT_EQ(trace.templates.size(), whole.size());
  int64_t total = 0;
  for (size_t i = 0; i < whole.size(); ++i) {
    EXPECT_EQ(trace.str(trace.templates.pattern[i]), whole.Pattern(model::TemplateId(i)));
    EXPECT_EQ(trace.templates.count[i], whole.Count(model::TemplateId(i)));
    total += trace.templates.count[i];
  }
  EXPECT_EQ(total, static_cast<int64_t>(lines.size()));
}

}  // namespace
}  // namespace teller::import
