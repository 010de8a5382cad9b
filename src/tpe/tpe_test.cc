#include <algorithm>
#include <filesystem>
#include <random>

#include <gtest/gtest.h>

#include "base/file_util.h"
#include "base/testing.h"
#include "store/open_trace.h"
#include "tpe/step_serializer.h"
#include "tpe/tpe_encoder.h"
#include "tpe/tpe_vocabulary.h"

namespace teller::tpe {
namespace {

using model::Layer;

// A random tree of n nodes in pre-order over a small name alphabet.
Serialization RandomTree(std::mt19937* rng, SymbolTable* symbols, int n) {
  Serialization s;
  std::vector<SymbolId> names;
  for (const char* name : {"matmul", "softmax", "cudaLaunchKernel", "gemm", "norm", "nccl"}) {
    names.push_back(symbols->Intern(name));
  }
  std::vector<int32_t> stack;  // open nodes: the path from the root
  s.AppendNode(SymbolTable::LayerSymbol(Layer::kStep), symbols->Intern("step"), -1, 1000);
  stack.push_back(0);
  for (int node = 1; node < n; ++node) {
    // Pop a random number of levels (never the root), then attach a child.
    while (stack.size() > 1 && (*rng)() % 3 == 0) stack.pop_back();
    Layer layer = static_cast<Layer>(1 + (*rng)() % 8);
    s.AppendNode(SymbolTable::LayerSymbol(layer), names[(*rng)() % names.size()], stack.back(),
                 static_cast<int64_t>((*rng)() % 500));
    stack.push_back(node);
  }
  return s;
}

// Checks decode(encode(x)) against x and the encoded columns' invariants.
void ExpectRoundTrip(TpeEncoder& encoder, const Serialization& s) {
  auto encoded = encoder.Encode(s);
  ASSERT_TRUE(encoded.ok()) << encoded.status().ToString();
  const EncodedStep& e = *encoded;
  int64_t total = 0, encoded_total = 0;
  for (int64_t d : s.dur_ns) total += d;
  for (size_t j = 0; j < e.size(); ++j) {
    encoded_total += e.duration_ns[j];
    ASSERT_LT(e.parent_idx[j], static_cast<int32_t>(j));
    ASSERT_GE(e.parent_idx[j], -1);
    if (e.parent_idx[j] >= 0) {
      ASSERT_LT(e.depth[e.parent_idx[j]], e.depth[j]);
    }
  }
  EXPECT_EQ(encoded_total, total);
  auto decoded = encoder.Decode(e);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->symbol, s.symbol);
  EXPECT_EQ(decoded->parent, s.parent);
  EXPECT_EQ(decoded->depth, s.depth);
  ASSERT_TRUE(ValidateSerialization(*decoded).ok());
  // Each encoded token's duration is the sum of the base durations it covers.
  int64_t decoded_total = 0;
  for (int64_t d : decoded->dur_ns) decoded_total += d;
  EXPECT_EQ(decoded_total, total);
}

TEST(TpeNormalize, StripsTemplatesSignaturesAndCounters) {
  EXPECT_EQ(NormalizeName("void at::native::vectorized_elementwise_kernel<4, "
                          "at::native::FillFunctor<float>, std::array<char*, 1> >(int, "
                          "at::native::FillFunctor<float>, std::array<char*, 1>)"),
            "at::native::vectorized_elementwise_kernel");
  EXPECT_EQ(NormalizeName("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long)"),
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  EXPECT_EQ(NormalizeName("ProfilerStep#12"), "ProfilerStep");
  EXPECT_EQ(NormalizeName("[memcpy HtoD]"), "[memcpy HtoD]");
  EXPECT_EQ(NormalizeName("aten::linear"), "aten::linear");
  EXPECT_EQ(NormalizeName("sm90_xmma_gemm_f16f16_128x64"), "sm90_xmma_gemm_f16f16_128x64");
  EXPECT_EQ(NormalizeName(""), "?");
  EXPECT_EQ(NormalizeName(std::string(300, 'a')).size(), kMaxNameBytes);
}

// step -> (fe -> (k, k), be)
model::Trace SmallTrace() {
  model::Trace trace;
  auto p = trace.processes.Append(1, trace.strings.Intern("h"), trace.strings.Intern("py"), 0,
                                  base::StringId(0));
  auto t = trace.threads.Append(p, 1, trace.strings.Intern("main"), false, -1);
  auto add = [&](Layer layer, const char* name, int64_t dur) {
    return trace.events.Append(layer, model::EventPhase::kComplete, trace.strings.Intern(name), p,
                               t, 0, dur);
  };
  std::vector<model::EventRow> events = {add(Layer::kStep, "STEP 3", 100),
                                         add(Layer::kFe, "forward", 60),
                                         add(Layer::kK, "gemm<float>(int)", 20),
                                         add(Layer::kK, "gemm<half>(int)", 10),
                                         add(Layer::kBe, "aten::add", 5)};
  std::vector<int> parents = {-1, 0, 1, 1, 0};
  for (size_t i = 0; i < events.size(); ++i) {
    trace.nodes.event.push_back(events[i]);
    trace.nodes.parent.push_back(parents[i] < 0 ? model::NodeIndex::Invalid()
                                                : model::NodeIndex(parents[i]));
    trace.nodes.depth.push_back(parents[i] < 0 ? 0 : trace.nodes.depth[parents[i]] + 1);
    trace.nodes.step.push_back(model::StepIndex(0));
  }
  trace.steps.event.push_back(events[0]);
  trace.steps.node_begin.push_back(model::NodeIndex(0));
  trace.steps.node_end.push_back(model::NodeIndex(5));
  trace.reconstructed = true;
  return trace;
}

TEST(TpeSerializer, StepInPreOrderWithParentsDepthsAndDurations) {
  model::Trace trace = SmallTrace();
  SymbolTable symbols;
  StepSerializer serializer(trace, &symbols);
  auto s = serializer.SerializeStep(model::StepIndex(0));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->size(), 10u);
  std::vector<std::string> text;
  for (SymbolId id : s->symbol) text.emplace_back(symbols.Get(id));
  EXPECT_EQ(text, (std::vector<std::string>{"[STEP]", "STEP 3", "[FE]", "forward", "[K]", "gemm",
                                            "[K]", "gemm", "[BE]", "aten::add"}));
  EXPECT_EQ(s->parent, (std::vector<int32_t>{-1, -1, 0, 0, 2, 2, 2, 2, 0, 0}));
  EXPECT_EQ(s->depth, (std::vector<uint16_t>{0, 0, 1, 1, 2, 2, 2, 2, 1, 1}));
  EXPECT_EQ(s->dur_ns, (std::vector<int64_t>{100, 0, 60, 0, 20, 0, 10, 0, 5, 0}));
  EXPECT_TRUE(ValidateSerialization(*s).ok());

  // A parent-closed subset keeps pre-order and re-indexes parents.
  auto subset = serializer.SerializeNodes(
      model::StepIndex(0), {model::NodeIndex(4), model::NodeIndex(0), model::NodeIndex(1),
                            model::NodeIndex(3)});
  ASSERT_TRUE(subset.ok()) << subset.status().ToString();
  EXPECT_EQ(subset->parent, (std::vector<int32_t>{-1, -1, 0, 0, 2, 2, 0, 0}));
  EXPECT_EQ(subset->dur_ns, (std::vector<int64_t>{100, 0, 60, 0, 10, 0, 5, 0}));

  // Not closed under parents: node 2 without node 1.
  auto open = serializer.SerializeNodes(model::StepIndex(0),
                                        {model::NodeIndex(0), model::NodeIndex(2)});
  EXPECT_FALSE(open.ok());
  EXPECT_FALSE(serializer.SerializeStep(model::StepIndex(7)).ok());
}

TEST(TpeVocabulary, NeverMergesAcrossSiblings) {
  // [STEP s] with 50 leaf children [K x]: "x [K]" is the most frequent pair but joins
  // siblings, so each child stays its own token and only the first joins the root.
  SymbolTable symbols;
  Serialization s;
  SymbolId step = symbols.Intern("s"), x = symbols.Intern("x");
  s.AppendNode(SymbolTable::LayerSymbol(Layer::kStep), step, -1, 10);
  for (int i = 0; i < 50; ++i) s.AppendNode(SymbolTable::LayerSymbol(Layer::kK), x, 0, 1);
  TpeTrainConfig config;
  config.vocab_size = 64;
  auto vocab = TpeVocabulary::Train({s, s}, symbols, config);
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  for (size_t t = vocab->base_size(); t < vocab->size(); ++t) {
    EXPECT_EQ(vocab->TokenText(static_cast<TokenId>(t)).find("x [K]"), std::string::npos)
        << vocab->TokenText(static_cast<TokenId>(t));
  }
  TpeEncoder encoder(*vocab, symbols);
  auto e = encoder.Encode(s);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->size(), 50u);  // root+first child, then 49 children
  EXPECT_EQ(vocab->TokenText(e->input_ids[0]), "[STEP] s [K] x");
  EXPECT_EQ(e->duration_ns[0], 11);
  for (size_t j = 1; j < e->size(); ++j) {
    EXPECT_EQ(vocab->TokenText(e->input_ids[j]), "[K] x");
    EXPECT_EQ(e->parent_idx[j], 0);
    EXPECT_EQ(e->depth[j], 1);
  }
  ExpectRoundTrip(encoder, s);
}

TEST(TpeVocabulary, TrainingIsDeterministicAndJsonRoundTrips) {
  std::mt19937 rng(7);
  SymbolTable symbols;
  std::vector<Serialization> corpus;
  for (int i = 0; i < 40; ++i) corpus.push_back(RandomTree(&rng, &symbols, 30));
  TpeTrainConfig config;
  config.vocab_size = 80;
  config.corpus = "random trees, seed 7";
  auto a = TpeVocabulary::Train(corpus, symbols, config);
  auto b = TpeVocabulary::Train(corpus, symbols, config);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->size(), 80u);
  EXPECT_EQ(a->ToJson(), b->ToJson());

  std::string dir = base::TempDir("tpe_vocab");
  std::string path = dir + "/vocab.json";
  ASSERT_TRUE(a->Save(path).ok());
  auto loaded = TpeVocabulary::Load(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->ToJson(), a->ToJson());
  EXPECT_EQ(loaded->config().corpus, "random trees, seed 7");
  EXPECT_EQ(loaded->corpus_steps(), 40);
  std::filesystem::remove_all(dir);
}

TEST(TpeVocabulary, MalformedOrForeignFilesAreClearErrors) {
  SymbolTable symbols;
  Serialization s;
  s.AppendNode(SymbolTable::LayerSymbol(Layer::kStep), symbols.Intern("s"), -1, 1);
  s.AppendNode(SymbolTable::LayerSymbol(Layer::kK), symbols.Intern("k"), 0, 1);
  auto vocab = TpeVocabulary::Train({s, s}, symbols, TpeTrainConfig{});
  ASSERT_TRUE(vocab.ok());
  std::string good = vocab->ToJson();
  ASSERT_TRUE(TpeVocabulary::FromJson(good, "good.json").ok());

  auto not_json = TpeVocabulary::FromJson("{nope", "a.json");
  ASSERT_FALSE(not_json.ok());
  EXPECT_NE(not_json.status().message().find("a.json: not JSON"), std::string::npos);
  auto foreign = TpeVocabulary::FromJson(R"({"model": "gpt2", "merges": []})", "b.json");
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(foreign.status().message().find("not a TPE vocabulary"), std::string::npos);

  auto replace = [&](std::string from, std::string to) {
    std::string text = good;
    size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) text.replace(at, from.size(), to);
    return TpeVocabulary::FromJson(text, "c.json");
  };
  auto version = replace("\"version\": 1", "\"version\": 9");
  ASSERT_FALSE(version.ok());
  EXPECT_NE(version.status().message().find("version 9, expected 1"), std::string::npos);
  EXPECT_FALSE(replace("\"[STEP]\"", "\"[STOP]\"").ok());
  EXPECT_FALSE(replace("\"vocab_size\": 256", "\"vocab_size\": \"big\"").ok());
  auto future = replace("\"merges\": [", "\"merges\": [[0, 9999],");
  ASSERT_FALSE(future.ok());
  EXPECT_NE(future.status().message().find("before it exists"), std::string::npos);
  EXPECT_FALSE(TpeVocabulary::Load("/nonexistent/vocab.json").ok());
}

TEST(TpeEncoder, RandomTreesRoundTripAndCompress) {
  std::mt19937 rng(11);
  SymbolTable symbols;
  std::vector<Serialization> train, test;
  for (int i = 0; i < 60; ++i) train.push_back(RandomTree(&rng, &symbols, 5 + rng() % 60));
  for (int i = 0; i < 60; ++i) test.push_back(RandomTree(&rng, &symbols, 1 + rng() % 80));
  TpeTrainConfig config;
  config.vocab_size = 128;
  auto vocab = TpeVocabulary::Train(train, symbols, config);
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  TpeEncoder encoder(*vocab, symbols);
  for (const Serialization& s : test) ExpectRoundTrip(encoder, s);
  auto stats = encoder.Measure(test);
  ASSERT_TRUE(stats.ok());
  EXPECT_GT(stats->Ratio(), 1.0);
  EXPECT_EQ(stats->unknown_symbols, 0);

  // No merges: the encoding is the base serialization itself.
  TpeTrainConfig tiny;
  tiny.vocab_size = 1;
  auto base_only = TpeVocabulary::Train(train, symbols, tiny);
  ASSERT_TRUE(base_only.ok());
  TpeEncoder identity(*base_only, symbols);
  auto e = identity.Encode(test[0]);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->size(), test[0].size());
  auto d = identity.Decode(*e);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, test[0]);
}

TEST(TpeEncoder, RejectsBadInputs) {
  SymbolTable symbols;
  Serialization s;
  s.AppendNode(SymbolTable::LayerSymbol(Layer::kStep), symbols.Intern("s"), -1, 1);
  auto vocab = TpeVocabulary::Train({s}, symbols, TpeTrainConfig{});
  ASSERT_TRUE(vocab.ok());
  TpeEncoder encoder(*vocab, symbols);
  Serialization broken = s;
  broken.parent[0] = 4;
  EXPECT_FALSE(encoder.Encode(broken).ok());
  EncodedStep e{{99999}, {-1}, {0}, {0}};
  EXPECT_FALSE(encoder.Decode(e).ok());
  EncodedStep forward{{0, 0}, {1, -1}, {0, 0}, {0, 0}};
  EXPECT_FALSE(encoder.Decode(forward).ok());
  // A name unknown to the vocabulary encodes as [UNK].
  SymbolTable other;
  Serialization unseen;
  unseen.AppendNode(SymbolTable::LayerSymbol(Layer::kStep), other.Intern("never"), -1, 1);
  TpeEncoder other_encoder(*vocab, other);
  auto u = other_encoder.Encode(unseen);
  ASSERT_TRUE(u.ok());
  auto decoded = other_encoder.Decode(*u);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->symbol[1], kUnknownSymbol);
}

TEST(TpeEncoder, SampleBundleStepsRoundTripAndCompress) {
  std::string bundle = base::SourceDir() + "/samples/vllm_tp2_sample";
  if (!std::filesystem::is_directory(bundle)) GTEST_SKIP() << "no " << bundle;
  auto trace = store::OpenTrace({bundle}, {});
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  ASSERT_GT(trace->steps.size(), 0u);
  SymbolTable symbols;
  StepSerializer serializer(*trace, &symbols);
  std::vector<Serialization> corpus;
  for (uint32_t step = 0; step < trace->steps.size(); ++step) {
    auto s = serializer.SerializeStep(model::StepIndex(step));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    ASSERT_TRUE(ValidateSerialization(*s).ok());
    corpus.push_back(std::move(*s));
  }
  TpeTrainConfig config;
  config.vocab_size = 256;
  config.corpus = "samples/vllm_tp2_sample";
  auto vocab = TpeVocabulary::Train(corpus, symbols, config);
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  TpeEncoder encoder(*vocab, symbols);
  for (const Serialization& s : corpus) ExpectRoundTrip(encoder, s);
  auto stats = encoder.Measure(corpus);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->steps, static_cast<int64_t>(trace->steps.size()));
  EXPECT_GT(stats->Ratio(), 1.0);

  // Parent-closed subsets (as a slice would give): nodes of depth <= 2.
  for (uint32_t step = 0; step < trace->steps.size(); ++step) {
    std::vector<model::NodeIndex> nodes;
    for (uint32_t n = trace->steps.node_begin[step].value();
         n < trace->steps.node_end[step].value(); ++n) {
      if (trace->nodes.depth[n] - trace->nodes.depth[trace->steps.node_begin[step].value()] <= 2) {
        nodes.push_back(model::NodeIndex(n));
      }
    }
    auto s = serializer.SerializeNodes(model::StepIndex(step), nodes);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_EQ(s->node_count(), nodes.size());
    ExpectRoundTrip(encoder, *s);
  }
}

}  // namespace
}  // namespace teller::tpe
