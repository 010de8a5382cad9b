#include "tpe/compression_report.h"

#include <fmt/format.h>

namespace teller::tpe {
namespace {

double Reduction(const CompressionStats& stats) {
  return stats.nodes ? 100.0 * (1.0 - double(stats.encoded_tokens) / stats.nodes) : 0;
}

double BaseTokensPerStep(const CompressionStats& stats) {
  return stats.steps ? double(stats.base_tokens) / stats.steps : 0;
}

}  // namespace

std::string VocabularySummary(const TpeVocabulary& vocab) {
  return fmt::format("{} tokens ({} base symbols, {} merges)", vocab.size(), vocab.base_size(),
                     vocab.merges().size());
}

std::string CompressionMarkdownRow(const TpeVocabulary& vocab, const CompressionStats& stats) {
  return fmt::format("| {} | {} | {:.2f} | {:.2f} | {:.2f} | {:.2f}% |\n",
                     vocab.config().vocab_size, vocab.merges().size(), stats.NodesPerStep(),
                     stats.TokensPerStep(), stats.NodeRatio(), Reduction(stats));
}

std::string CompressionText(const std::string& path, const TpeVocabulary& vocab,
                            const CompressionStats& stats) {
  std::string out = fmt::format("vocabulary {}: {}\n", path, VocabularySummary(vocab));
  out += fmt::format("  steps                {}\n", stats.steps);
  out += fmt::format("  events/step before   {:.2f} nodes ({:.2f} base tokens)\n",
                     stats.NodesPerStep(), BaseTokensPerStep(stats));
  out += fmt::format("  events/step after    {:.2f} TPE tokens\n", stats.TokensPerStep());
  out += fmt::format("  compression          {:.2f}x over nodes, {:.2f}x over base tokens\n",
                     stats.NodeRatio(), stats.Ratio());
  out += fmt::format("  reduction            {:.2f}%\n", Reduction(stats));
  out += fmt::format("  unknown symbols      {}\n", stats.unknown_symbols);
  return out;
}

nlohmann::json CompressionJson(const TpeVocabulary& vocab, const CompressionStats& stats) {
  return nlohmann::json{{"vocab_size", vocab.config().vocab_size},
                        {"tokens", vocab.size()},
                        {"base_symbols", vocab.base_size()},
                        {"merges", vocab.merges().size()},
                        {"steps", stats.steps},
                        {"events_per_step_before", stats.NodesPerStep()},
                        {"base_tokens_per_step", BaseTokensPerStep(stats)},
                        {"events_per_step_after", stats.TokensPerStep()},
                        {"compression", stats.NodeRatio()},
                        {"token_compression", stats.Ratio()},
                        {"reduction_percent", Reduction(stats)},
                        {"unknown_symbols", stats.unknown_symbols}};
}

}  // namespace teller::tpe
