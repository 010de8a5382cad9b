// Compression of TPE on one input: `tpe_measure INPUT [VOCAB_SIZE...]`. Trains on
// every step of the input and encodes the same steps (in-sample). Not a test and
// not a CLI verb: a measuring tool like store_rate.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "store/open_trace.h"
#include "tpe/step_serializer.h"
#include "tpe/tpe_encoder.h"
#include "tpe/tpe_vocabulary.h"

int main(int argc, char** argv) {
  using namespace teller;
  if (argc < 2) {
    std::fprintf(stderr, "usage: tpe_measure INPUT [VOCAB_SIZE...]\n");
    return 2;
  }
  std::vector<size_t> sizes;
  for (int i = 2; i < argc; ++i) sizes.push_back(std::strtoull(argv[i], nullptr, 10));
  if (sizes.empty()) sizes = {256, 512, 1024};
  auto trace = store::OpenTrace({argv[1]}, {});
  if (!trace.ok()) {
    std::fprintf(stderr, "%s\n", trace.status().ToString().c_str());
    return 1;
  }
  tpe::SymbolTable symbols;
  tpe::StepSerializer serializer(*trace, &symbols);
  std::vector<tpe::Serialization> corpus;
  for (uint32_t step = 0; step < trace->steps.size(); ++step) {
    auto s = serializer.SerializeStep(model::StepIndex(step));
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.status().ToString().c_str());
      return 1;
    }
    corpus.push_back(std::move(*s));
  }
  std::printf("input %s: %zu steps, %zu base symbols\n", argv[1], corpus.size(), symbols.size());
  std::printf(
      "| vocab | merges | nodes/step | base tokens/step | TPE tokens/step | ratio (tokens) "
      "| ratio (nodes) | reduction |\n|---|---|---|---|---|---|---|---|\n");
  for (size_t size : sizes) {
    tpe::TpeTrainConfig config;
    config.vocab_size = size;
    config.corpus = argv[1];
    auto vocab = tpe::TpeVocabulary::Train(corpus, symbols, config);
    if (!vocab.ok()) {
      std::fprintf(stderr, "%s\n", vocab.status().ToString().c_str());
      return 1;
    }
    tpe::TpeEncoder encoder(*vocab, symbols);
    auto stats = encoder.Measure(corpus);
    if (!stats.ok()) {
      std::fprintf(stderr, "%s\n", stats.status().ToString().c_str());
      return 1;
    }
    double base_per_step = stats->steps ? double(stats->base_tokens) / stats->steps : 0;
    std::printf("| %zu | %zu | %.1f | %.1f | %.1f | %.2f | %.2f | %.1f%% |\n", size,
                vocab->merges().size(), stats->NodesPerStep(), base_per_step,
                stats->TokensPerStep(), stats->Ratio(), stats->NodeRatio(),
                100.0 * (1.0 - 1.0 / stats->Ratio()));
  }
  return 0;
}
