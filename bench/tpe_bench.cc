// TPE at paper scale: the request-step corpus (the paper's step records, request q's
// projection C_q(s) over the ranks serving q) of a dataset from `teller synth dataset
// --preset paper`; times vocabulary training at 512 and 1024 and encoding the whole
// corpus. With --spm-input FILE it also writes the same training words for spm_train:
// one chain (maximal mergeable run) per line, each base symbol one private-use
// character, so BPE over those lines is the same job as TPE training; --spm-tsv FILE
// writes the distinct chains with their counts (spm_train --input_format=tsv).
// Usage: tpe_bench DATASET_DIR [--spm-input FILE] [--spm-tsv FILE]
// Prints one JSON line: corpus size, per vocabulary size {merges, seconds,
// spm_vocab_size = distinct symbols + 3 spm meta pieces + merges}, encode rate.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "bench_util.h"
#include "reconstruct/request_projection.h"
#include "store/open_trace.h"
#include "tpe/step_serializer.h"
#include "tpe/tpe_encoder.h"
#include "tpe/tpe_vocabulary.h"

using namespace teller;

namespace {

int Fail(const base::Status& status) {
  std::fprintf(stderr, "tpe_bench: %s\n", status.ToString().c_str());
  return 1;
}

// Request-step records of one bundle, appended to corpus.
base::Status AddRequestSteps(const model::Trace& trace, tpe::SymbolTable* symbols,
                             std::vector<tpe::Serialization>* corpus) {
  tpe::StepSerializer serializer(trace, symbols);
  for (uint32_t q = 0; q < trace.requests.size(); ++q) {
    model::RequestIndex request(q);
    std::map<int64_t, std::vector<model::StepIndex>> by_step;
    for (model::StepIndex step : reconstruct::StepsOfRequest(trace, request)) {
      by_step[trace.steps.global_step[step.value()]].push_back(step);
    }
    for (auto& [number, steps] : by_step) {
      std::stable_sort(steps.begin(), steps.end(), [&](model::StepIndex a, model::StepIndex b) {
        return trace.steps.rank[a.value()] < trace.steps.rank[b.value()];
      });
      tpe::Serialization record;
      for (model::StepIndex step : steps) {
        std::vector<model::NodeIndex> nodes = reconstruct::ProjectRequest(trace, request, step);
        if (nodes.empty()) continue;
        TELLER_ASSIGN_OR_RETURN(tpe::Serialization part, serializer.SerializeNodes(step, nodes));
        const int32_t offset = static_cast<int32_t>(record.size());
        for (size_t i = 0; i < part.size(); ++i) {
          record.symbol.push_back(part.symbol[i]);
          record.parent.push_back(part.parent[i] < 0 ? -1 : part.parent[i] + offset);
          record.dur_ns.push_back(part.dur_ns[i]);
          record.depth.push_back(part.depth[i]);
        }
      }
      if (record.size() > 0) corpus->push_back(std::move(record));
    }
  }
  return base::OkStatus();
}

void AppendUtf8(uint32_t code, std::string* out) {
  if (code < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (code >> 12)));
    out->push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (code >> 18)));
    out->push_back(static_cast<char>(0x80 | ((code >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
  }
}

// Base symbol -> one character: U+E000.. (BMP private use), then U+F0000.. (plane 15).
uint32_t PrivateUseChar(tpe::SymbolId id) {
  return id < 0x1900 ? 0xE000 + id : 0xF0000 + (id - 0x1900);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: tpe_bench DATASET_DIR [--spm-input FILE] [--spm-tsv FILE]\n");
    return 2;
  }
  const std::string dataset = argv[1];
  std::string spm_input, spm_tsv;
  for (int i = 2; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--spm-input") == 0) spm_input = argv[i + 1];
    if (std::strcmp(argv[i], "--spm-tsv") == 0) spm_tsv = argv[i + 1];
  }
  std::vector<std::string> bundles;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dataset, ec)) {
    if (std::filesystem::is_regular_file(entry.path() / "meta.json")) {
      bundles.push_back(entry.path().string());
    }
  }
  std::sort(bundles.begin(), bundles.end());
  if (bundles.empty()) {
    std::fprintf(stderr, "tpe_bench: %s has no bundles (expected `teller synth dataset` output)\n",
                 dataset.c_str());
    return 1;
  }

  double start = bench::NowSeconds();
  tpe::SymbolTable symbols;
  std::vector<tpe::Serialization> corpus;
  for (const std::string& bundle : bundles) {
    auto trace = store::OpenTrace({bundle}, {});
    if (!trace.ok()) return Fail(trace.status());
    base::Status status = AddRequestSteps(*trace, &symbols, &corpus);
    if (!status.ok()) return Fail(status);
  }
  const double load_seconds = bench::NowSeconds() - start;
  int64_t base_tokens = 0, nodes = 0, chains = 0;
  std::vector<bool> seen(symbols.size(), false);
  std::string spm_text, chain;
  std::unordered_map<std::string, int64_t> chain_counts;
  for (const tpe::Serialization& s : corpus) {
    base_tokens += static_cast<int64_t>(s.size());
    nodes += static_cast<int64_t>(s.node_count());
    for (size_t i = 0; i <= s.size(); ++i) {
      if (i > 0 && (i == s.size() || !tpe::MergeableBoundary(s, i))) {
        ++chains;
        if (!spm_input.empty()) spm_text += chain + "\n";
        ++chain_counts[chain];
        chain.clear();
      }
      if (i == s.size()) break;
      seen[s.symbol[i]] = true;
      AppendUtf8(PrivateUseChar(s.symbol[i]), &chain);
    }
  }
  const int64_t distinct = std::count(seen.begin(), seen.end(), true);
  std::string tsv_text;
  if (!spm_tsv.empty()) {
    std::map<std::string, int64_t> sorted(chain_counts.begin(), chain_counts.end());
    for (const auto& [text, count] : sorted) tsv_text += fmt::format("{}\t{}\n", text, count);
  }
  for (const auto& [path, text] :
       {std::pair{&spm_input, &spm_text}, std::pair{&spm_tsv, &tsv_text}}) {
    if (path->empty()) continue;
    FILE* file = std::fopen(path->c_str(), "wb");
    bool ok = file && std::fwrite(text->data(), 1, text->size(), file) == text->size();
    if (file) ok = std::fclose(file) == 0 && ok;
    if (!ok) {
      std::fprintf(stderr, "tpe_bench: cannot write %s\n", path->c_str());
      return 1;
    }
  }

  // Best of three for each timing.
  std::string train_json;
  tpe::TpeVocabulary vocab_512;
  for (size_t size : {size_t{512}, size_t{1024}}) {
    tpe::TpeTrainConfig config;
    config.vocab_size = size;
    double best = 1e30;
    tpe::TpeVocabulary vocab;
    for (int round = 0; round < 3; ++round) {
      double t0 = bench::NowSeconds();
      auto trained = tpe::TpeVocabulary::Train(corpus, symbols, config);
      double seconds = bench::NowSeconds() - t0;
      if (!trained.ok()) return Fail(trained.status());
      best = std::min(best, seconds);
      vocab = std::move(*trained);
    }
    if (size == 512) vocab_512 = vocab;
    const size_t merges = vocab.merges().size();
    train_json += fmt::format(
        "{}{{\"vocab_size\":{},\"merges\":{},\"seconds\":{:.6f},"
        "\"spm_vocab_size\":{}}}",
        train_json.empty() ? "" : ",", size, merges, best,
        distinct + 3 + static_cast<int64_t>(merges));
  }
  tpe::TpeEncoder encoder(vocab_512, symbols);
  double encode_best = 1e30;
  int64_t encoded_tokens = 0;
  for (int round = 0; round < 3; ++round) {
    double t0 = bench::NowSeconds();
    auto stats = encoder.Measure(corpus);
    double seconds = bench::NowSeconds() - t0;
    if (!stats.ok()) return Fail(stats.status());
    encode_best = std::min(encode_best, seconds);
    encoded_tokens = stats->encoded_tokens;
  }
  std::printf(
      "{\"bundles\":%zu,\"steps\":%zu,\"nodes\":%lld,\"base_tokens\":%lld,\"distinct_symbols\":%"
      "lld,"
      "\"chains\":%lld,\"distinct_chains\":%zu,\"load_seconds\":%.3f,\"train\":[%s],\"encode_vocab_"
      "size\":512,"
      "\"encoded_tokens\":%lld,\"encode_seconds\":%.6f,\"encode_symbols_per_s\":%.0f,"
      "\"peak_rss_bytes\":%lld}\n",
      bundles.size(), corpus.size(), static_cast<long long>(nodes),
      static_cast<long long>(base_tokens), static_cast<long long>(distinct),
      static_cast<long long>(chains), chain_counts.size(), load_seconds, train_json.c_str(),
      static_cast<long long>(encoded_tokens), encode_best, base_tokens / encode_best,
      static_cast<long long>(bench::PeakRssBytes()));
  return 0;
}
