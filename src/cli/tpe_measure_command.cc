// `teller tpe encode|stats|table`: the verbs that measure a vocabulary on a corpus
// (flags, `tpe train` and the corpus loading are in tpe_command.cc).
#include <algorithm>
#include <chrono>
#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/file_util.h"
#include "cli/cli_status.h"
#include "cli/tpe_command.h"
#include "tpe/compression_report.h"
#include "tpe/tpe_encoder.h"

namespace teller::cli {
namespace {

using Json = nlohmann::json;

// One JSON line of `tpe encode --format json`: the first `shown` tokens of a record.
Json EncodedRecordJson(const step_records::CorpusRecordInfo& info, std::string_view unit,
                       const tpe::Serialization& s, const tpe::EncodedStep& encoded,
                       const tpe::TpeVocabulary& vocab, size_t shown) {
  Json line{{"source", info.source}, {"unit", unit}};
  if (!info.request.empty()) line["request"] = info.request;
  line["step"] = info.step;
  line["ranks"] = info.ranks;
  line["nodes"] = s.node_count();
  line["base_tokens"] = s.size();
  line["tokens"] = encoded.size();
  auto head = [shown](const auto& column) {
    return Json(std::vector(column.begin(), column.begin() + static_cast<long>(shown)));
  };
  line["input_ids"] = head(encoded.input_ids);
  line["parent_idx"] = head(encoded.parent_idx);
  line["duration_ns"] = head(encoded.duration_ns);
  line["depth"] = head(encoded.depth);
  Json text = Json::array();
  for (size_t j = 0; j < shown; ++j) text.push_back(vocab.TokenText(encoded.input_ids[j]));
  line["text"] = std::move(text);
  return line;
}

// A header line, then a tab-separated row per shown token.
std::string EncodedRecordText(const step_records::CorpusRecordInfo& info,
                              const tpe::Serialization& s, const tpe::EncodedStep& encoded,
                              const tpe::TpeVocabulary& vocab, size_t shown) {
  std::string out =
      fmt::format("{}: {} nodes, {} base tokens -> {} TPE tokens{}\n",
                  step_records::CorpusRecordLabel(info), s.node_count(), s.size(), encoded.size(),
                  shown < encoded.size() ? fmt::format(" (first {} shown)", shown) : std::string());
  out += "index\tinput_id\tparent_idx\tduration_ns\tdepth\ttoken\n";
  for (size_t j = 0; j < shown; ++j) {
    out += fmt::format("{}\t{}\t{}\t{}\t{}\t{}\n", j, encoded.input_ids[j], encoded.parent_idx[j],
                       encoded.duration_ns[j], encoded.depth[j],
                       vocab.TokenText(encoded.input_ids[j]));
  }
  return out;
}

}  // namespace

int TpeCommand::RunEncode() const {
  if (auto unit = step_records::ParseCorpusUnit(unit_); !unit.ok()) {
    return Usage(unit.status().message());
  }
  auto vocab = LoadVocabulary(vocab_path_);
  if (!vocab.ok()) return Fail(vocab.status());
  VerbCorpus loaded;
  if (int code = LoadCorpus("encode", &loaded); code != kExitOk) return code;
  const step_records::Corpus& corpus = loaded.corpus;

  tpe::TpeEncoder encoder(*vocab, corpus.symbols);
  int64_t unknown = 0;
  for (size_t r = 0; r < corpus.serializations.size(); ++r) {
    const tpe::Serialization& s = corpus.serializations[r];
    const step_records::CorpusRecordInfo& info = corpus.infos[r];
    auto encoded = encoder.Encode(s);
    if (!encoded.ok()) {
      return Fail(encoded.status().WithContext(step_records::CorpusRecordLabel(info)));
    }
    const size_t shown =
        max_tokens_ == 0 ? encoded->size() : std::min(max_tokens_, encoded->size());
    for (size_t j = 0; j < encoded->size(); ++j) {
      unknown += encoded->input_ids[j] == tpe::kUnknownSymbol;
    }
    if (format_ == "json") {
      const std::string_view unit = step_records::CorpusUnitName(loaded.unit);
      Print(EncodedRecordJson(info, unit, s, *encoded, *vocab, shown).dump() + "\n");
    } else {
      Print(EncodedRecordText(info, s, *encoded, *vocab, shown));
    }
  }
  if (unknown > 0 && !quiet_) {
    std::fprintf(stderr,
                 "teller: %lld base symbols are not in %s and were encoded as [UNK] (the "
                 "vocabulary was trained on other event names)\n",
                 static_cast<long long>(unknown), vocab_path_.c_str());
  }
  return kExitOk;
}

int TpeCommand::RunStats() const {
  if (auto unit = step_records::ParseCorpusUnit(unit_); !unit.ok()) {
    return Usage(unit.status().message());
  }
  std::vector<tpe::TpeVocabulary> vocabs;
  for (const std::string& path : vocab_paths_) {
    auto vocab = LoadVocabulary(path);
    if (!vocab.ok()) return Fail(vocab.status());
    vocabs.push_back(std::move(*vocab));
  }
  VerbCorpus loaded;
  if (int code = LoadCorpus("stats", &loaded); code != kExitOk) return code;
  const step_records::Corpus& corpus = loaded.corpus;

  std::string out;
  if (format_ == "markdown") out += tpe::kCompressionMarkdownHeader;
  if (format_ == "text") {
    out += fmt::format("input {}\n", step_records::DescribeCorpus(loaded.inputs, loaded.unit,
                                                                  corpus.filter.split));
  }
  for (size_t v = 0; v < vocabs.size(); ++v) {
    tpe::TpeEncoder encoder(vocabs[v], corpus.symbols);
    auto stats = encoder.Measure(corpus.serializations);
    if (!stats.ok()) return Fail(stats.status());
    if (format_ == "markdown") {
      out += tpe::CompressionMarkdownRow(vocabs[v], *stats);
    } else if (format_ == "json") {
      Json line = tpe::CompressionJson(vocabs[v], *stats);
      line["vocabulary"] = vocab_paths_[v];
      line["unit"] = step_records::CorpusUnitName(loaded.unit);
      out += line.dump() + "\n";
    } else {
      out += tpe::CompressionText(vocab_paths_[v], vocabs[v], *stats);
    }
  }
  Print(out);
  return kExitOk;
}

int TpeCommand::RunTable() const {
  auto unit = step_records::ParseCorpusUnit(unit_);
  if (!unit.ok()) return Usage(unit.status().message());
  if (*unit != step_records::CorpusUnit::kRequestStep) {
    return Usage("tpe table needs --unit request-step (splits)");
  }
  step_records::Corpus train;
  step_records::Corpus test;
  for (auto [corpus, text] : {std::pair{&train, &train_split_}, std::pair{&test, &test_split_}}) {
    auto split = step_records::ParseSplitPart(*text);
    if (!split.ok()) return Usage(split.status().message());
    corpus->filter.split = *split;
  }
  auto sources = step_records::ExpandCorpusInputs(inputs_);
  if (!sources.ok()) return Fail(sources.status());
  if (int code = LoadCorpora(*sources, *unit, {&train, &test}); code != kExitOk) return code;

  std::string rows;
  Json json_rows = Json::array();
  size_t base_symbols = 0;
  int64_t unknown = 0;
  for (size_t size : vocab_sizes_) {
    tpe::TpeTrainConfig config;
    config.vocab_size = size;
    config.min_pair_count = min_pair_count_;
    config.merge_siblings = merge_siblings_ == "on";
    config.corpus = step_records::DescribeCorpus(inputs_, *unit, train.filter.split);
    const auto start = std::chrono::steady_clock::now();
    auto vocab = tpe::TpeVocabulary::Train(train.serializations, train.symbols, config);
    if (!vocab.ok()) return Fail(vocab.status());
    const double seconds = SecondsSince(start);
    tpe::TpeEncoder encoder(*vocab, test.symbols);
    auto stats = encoder.Measure(test.serializations);
    if (!stats.ok()) return Fail(stats.status());
    if (!quiet_) {
      std::fprintf(stderr, "teller: vocab %zu: %zu merges, trained in %.2f s\n", size,
                   vocab->merges().size(), seconds);
    }
    base_symbols = vocab->base_size();
    unknown = stats->unknown_symbols;
    rows += tpe::CompressionMarkdownRow(*vocab, *stats);
    json_rows.push_back(tpe::CompressionJson(*vocab, *stats));
  }
  const std::string train_text = train.filter.split->Text();
  const std::string test_text = test.filter.split->Text();
  const std::string datasets = step_records::DescribeDatasets(inputs_);
  std::string out = fmt::format(
      "Trained on `{}` ({} request-steps), measured on `{}` ({} request-steps) of {}; the test "
      "split is never used for training or tuning. A step is the paper's step record: request "
      "q's projection C_q(s) of engine step s over the ranks serving q. Events before = "
      "call-chain nodes per step; after = TPE tokens per step; compression = before / after; "
      "reduction = 1 - after / before. {} base symbols in the training vocabulary; {} base "
      "tokens of the test split carry names unseen in training (encoded as [UNK]). Merge rule: "
      "{}.\n\n",
      train_text, train.serializations.size(), test_text, test.serializations.size(), datasets,
      base_symbols, unknown,
      merge_siblings_ == "on" ? "pairs, first children and next siblings (--merge-siblings on)"
                              : "pairs and first children only (--merge-siblings off)");
  out += tpe::kCompressionMarkdownHeader;
  out += rows;
  // `--json -`: the JSON is the output, in place of the table.
  if (!IsStdout(json_output_)) Print(out);
  if (json_output_.empty()) return kExitOk;
  Json doc{{"unit", step_records::CorpusUnitName(*unit)},
           {"dataset", datasets},
           {"train_split", train_text},
           {"test_split", test_text},
           {"train_steps", train.serializations.size()},
           {"test_steps", test.serializations.size()},
           {"train_events", train.nodes()},
           {"test_events", test.nodes()},
           {"min_pair_count", min_pair_count_},
           {"merge_siblings", merge_siblings_ == "on"},
           {"rows", json_rows}};
  base::Status status = WriteOutput(json_output_, doc.dump(1) + "\n");
  return status.ok() ? kExitOk : Fail(status);
}

}  // namespace teller::cli
