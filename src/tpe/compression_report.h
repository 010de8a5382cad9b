// Text, Markdown (the paper's Table 6 row) and JSON forms of a vocabulary and the
// compression it gives (`teller tpe stats`, `teller tpe table`, `teller tpe train`).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "tpe/tpe_encoder.h"
#include "tpe/tpe_vocabulary.h"

namespace teller::tpe {

// "197 tokens (74 base symbols, 123 merges)".
std::string VocabularySummary(const TpeVocabulary& vocab);

// The header of Table 6 and one row of it.
inline constexpr const char* kCompressionMarkdownHeader =
    "| Vocab size | Merges | Avg. events/step before TPE | Avg. events/step after TPE | "
    "Compression× | Reduction |\n| --- | --- | --- | --- | --- | --- |\n";
std::string CompressionMarkdownRow(const TpeVocabulary& vocab, const CompressionStats& stats);

// "vocabulary PATH: ..." then one indented line per figure.
std::string CompressionText(const std::string& path, const TpeVocabulary& vocab,
                            const CompressionStats& stats);

// vocab_size, tokens, base_symbols, merges, steps, events per step before and after,
// compression, token_compression, reduction_percent, unknown_symbols.
nlohmann::json CompressionJson(const TpeVocabulary& vocab, const CompressionStats& stats);

}  // namespace teller::tpe
