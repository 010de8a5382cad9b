#include "cli/tpe_command.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "base/file_util.h"
#include "cli/progress_printer.h"
#include "reconstruct/request_projection.h"
#include "store/open_trace.h"
#include "records/dataset.h"
#include "tpe/step_serializer.h"
#include "tpe/tpe_encoder.h"
#include "tpe/tpe_vocabulary.h"
#include "wire/dataset_files.h"

namespace teller::cli {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

int Fail(const base::Status& status) {
  std::fprintf(stderr, "teller: %s\n", status.ToString().c_str());
  return kExitFailure;
}

int Usage(const std::string& message) {
  std::fprintf(stderr, "teller: %s\n", message.c_str());
  return kExitUsage;
}

void Print(const std::string& text) { std::fwrite(text.data(), 1, text.size(), stdout); }

// What one step record is: an engine step on one rank, or the paper's step record
// C_q(s), request q's projection of engine step s over the ranks that served it.
enum class Unit { kEngineStep, kRequestStep };

std::string_view UnitName(Unit unit) {
  return unit == Unit::kEngineStep ? "engine-step" : "request-step";
}

// --split [DATASET_DIR:]SPLIT:PART, e.g. request_disjoint:train.
struct SplitSpec {
  std::string dataset;  // empty: each dataset input's own splits.json
  std::string name;
  std::string part;
  std::string Text() const { return name + ":" + part; }
};

base::StatusOr<SplitSpec> ParseSplit(const std::string& text) {
  size_t last = text.rfind(':');
  size_t middle =
      last == std::string::npos || last == 0 ? std::string::npos : text.rfind(':', last - 1);
  SplitSpec spec;
  if (last == std::string::npos) {
    return base::InvalidArgument(
        "--split '{}': expected [DATASET_DIR:]SPLIT:PART, e.g. "
        "request_disjoint:train",
        text);
  }
  spec.part = text.substr(last + 1);
  if (middle == std::string::npos) {
    spec.name = text.substr(0, last);
  } else {
    spec.name = text.substr(middle + 1, last - middle - 1);
    spec.dataset = text.substr(0, middle);
  }
  if (spec.name.empty() || spec.part.empty()) {
    return base::InvalidArgument(
        "--split '{}': expected [DATASET_DIR:]SPLIT:PART, e.g. "
        "request_disjoint:train",
        text);
  }
  return spec;
}

bool IsDataset(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::is_regular_file(fs::path(path) / "manifest.json", ec);
}



// One trace to open: a bundle, store or raw input; a dataset contributes its bundles.
struct Source {
  std::string path;
  std::string name;     // shown in labels: the input as given, or the dataset bundle
  std::string bundle;   // dataset bundle name; "" outside a dataset
  std::string dataset;  // the dataset folder; "" outside a dataset
};

base::StatusOr<std::vector<Source>> ExpandInputs(const std::vector<std::string>& inputs) {
  std::vector<Source> sources;
  for (const std::string& input : inputs) {
    if (!IsDataset(input)) {
      sources.push_back(Source{input, input, "", ""});
      continue;
    }
    TELLER_ASSIGN_OR_RETURN(wire::DatasetManifest manifest, wire::ReadManifest(input));
    for (const wire::ManifestBundle& entry : manifest.bundles) {
      sources.push_back(
          Source{(fs::path(input) / entry.bundle).string(), entry.bundle, entry.bundle, input});
    }
  }
  return sources;
}

// Which step records a corpus keeps.
struct CorpusFilter {
  std::optional<SplitSpec> split;
  int64_t step = -1;
  int32_t rank = -1;
  std::string request;  // request id, or "bundle/request" in a dataset
};

struct RecordInfo {
  std::string source;
  std::string request;  // empty for an engine step
  int64_t step = 0;
  std::vector<int32_t> ranks;
};

std::string Label(const RecordInfo& info) {
  if (info.request.empty()) {
    return fmt::format("{} step {} rank {}", info.source, info.step, fmt::join(info.ranks, ","));
  }
  return fmt::format("{} request {} step {} ranks {}", info.source, info.request, info.step,
                     fmt::join(info.ranks, ","));
}

// Step records serialized into one symbol table.
struct Corpus {
  CorpusFilter filter;
  tpe::SymbolTable symbols;
  std::vector<tpe::Serialization> serializations;
  std::vector<RecordInfo> infos;
  // Split keys by dataset folder, read once.
  std::map<std::string, std::unordered_set<std::string>> keys;
  int64_t nodes() const {
    int64_t n = 0;
    for (const tpe::Serialization& s : serializations) n += static_cast<int64_t>(s.node_count());
    return n;
  }
};

// Appends `part` as further roots of `out`.

bool StepCarries(const model::Trace& trace, size_t step, std::string_view request) {
  const uint32_t begin = trace.steps.requests_begin[step];
  for (uint32_t k = 0; k < trace.steps.requests_count[step]; ++k) {
    model::RequestIndex q = trace.step_requests[begin + k];
    if (trace.str(trace.requests.id[q.value()]) == request) return true;
  }
  return false;
}

base::Status AddEngineSteps(const model::Trace& trace, const Source& source, Corpus* corpus) {
  tpe::StepSerializer serializer(trace, &corpus->symbols);
  const CorpusFilter& filter = corpus->filter;
  std::string request = filter.request;
  if (!source.bundle.empty() && request.rfind(source.bundle + "/", 0) == 0) {
    request = request.substr(source.bundle.size() + 1);
  }
  for (size_t s = 0; s < trace.steps.size(); ++s) {
    if (filter.step >= 0 && trace.steps.number[s] != filter.step) continue;
    if (filter.rank >= 0 && trace.steps.rank[s] != filter.rank) continue;
    if (!request.empty() && !StepCarries(trace, s, request)) continue;
    TELLER_ASSIGN_OR_RETURN(tpe::Serialization serialization,
                            serializer.SerializeStep(model::StepIndex(static_cast<uint32_t>(s))));
    corpus->serializations.push_back(std::move(serialization));
    corpus->infos.push_back(
        RecordInfo{source.name, "", trace.steps.number[s], {trace.steps.rank[s]}});
  }
  return base::OkStatus();
}

base::Status AddRequestSteps(const model::Trace& trace, const Source& source,
                             const std::unordered_set<std::string>* keys, Corpus* corpus) {
  tpe::StepSerializer serializer(trace, &corpus->symbols);
  const CorpusFilter& filter = corpus->filter;
  for (size_t q = 0; q < trace.requests.size(); ++q) {
    const std::string id(trace.str(trace.requests.id[q]));
    const std::string key = source.bundle.empty() ? id : source.bundle + "/" + id;
    if (keys != nullptr && keys->count(key) == 0) continue;
    if (!filter.request.empty() && filter.request != id && filter.request != key) continue;
    const model::RequestIndex request(static_cast<uint32_t>(q));
    // One record per global step: the request's projection on every rank.
    std::map<int64_t, std::vector<model::StepIndex>> by_step;
    for (model::StepIndex step : reconstruct::StepsOfRequest(trace, request)) {
      by_step[trace.steps.global_step[step.value()]].push_back(step);
    }
    for (auto& [number, steps] : by_step) {
      if (filter.step >= 0 && number != filter.step) continue;
      std::stable_sort(steps.begin(), steps.end(), [&](model::StepIndex a, model::StepIndex b) {
        return trace.steps.rank[a.value()] < trace.steps.rank[b.value()];
      });
      tpe::Serialization record;
      RecordInfo info{source.name, id, number, {}};
      for (model::StepIndex step : steps) {
        const int32_t rank = trace.steps.rank[step.value()];
        if (filter.rank >= 0 && rank != filter.rank) continue;
        std::vector<model::NodeIndex> nodes = reconstruct::ProjectRequest(trace, request, step);
        if (nodes.empty()) continue;
        TELLER_ASSIGN_OR_RETURN(tpe::Serialization part, serializer.SerializeNodes(step, nodes));
        tpe::AppendSerialization(part, &record);
        info.ranks.push_back(rank);
      }
      if (record.size() == 0) continue;
      corpus->serializations.push_back(std::move(record));
      corpus->infos.push_back(std::move(info));
    }
  }
  return base::OkStatus();
}

// Opens every source once and adds its step records to each corpus.
base::Status LoadCorpora(const std::vector<Source>& sources, Unit unit,
                         const std::vector<Corpus*>& corpora, bool quiet) {
  // Split keys per corpus and dataset; sources outside every split are not opened.
  std::vector<std::unordered_set<std::string>> wanted_bundles(corpora.size());
  for (size_t c = 0; c < corpora.size(); ++c) {
    Corpus* corpus = corpora[c];
    if (!corpus->filter.split) continue;
    const SplitSpec& spec = *corpus->filter.split;
    for (const Source& source : sources) {
      if (source.dataset.empty()) {
        return base::InvalidArgument(
            "--split {}: {} is not a dataset folder (no manifest.json); "
            "splits name dataset requests",
            spec.Text(), source.path);
      }
      const std::string dataset = spec.dataset.empty() ? source.dataset : spec.dataset;
      if (corpus->keys.count(dataset) == 0) {
        TELLER_ASSIGN_OR_RETURN(corpus->keys[dataset], records::ReadSplitKeys(dataset, spec.name, spec.part));
      }
      for (const std::string& key : corpus->keys[dataset]) {
        wanted_bundles[c].insert(dataset + "\n" + key.substr(0, key.find('/')));
      }
    }
  }
  ProgressPrinter progress(quiet);
  store::OpenOptions options;
  options.import.progress = &progress;
  size_t done = 0;
  progress.Update("tpe: inputs", 0, sources.size());
  for (const Source& source : sources) {
    progress.Update("tpe: inputs", done, sources.size());
    ++done;
    std::vector<size_t> users;
    for (size_t c = 0; c < corpora.size(); ++c) {
      const Corpus* corpus = corpora[c];
      if (corpus->filter.split) {
        const std::string dataset =
            corpus->filter.split->dataset.empty() ? source.dataset : corpus->filter.split->dataset;
        if (wanted_bundles[c].count(dataset + "\n" + source.bundle) == 0) continue;
      }
      users.push_back(c);
    }
    if (users.empty()) continue;
    TELLER_ASSIGN_OR_RETURN(model::Trace trace, store::OpenTrace({source.path}, options));
    size_t records = 0;
    for (size_t c : users) {
      Corpus* corpus = corpora[c];
      const size_t before = corpus->infos.size();
      if (unit == Unit::kEngineStep) {
        TELLER_RETURN_IF_ERROR(AddEngineSteps(trace, source, corpus));
      } else {
        const std::unordered_set<std::string>* keys = nullptr;
        if (corpus->filter.split) {
          keys =
              &corpus->keys[corpus->filter.split->dataset.empty() ? source.dataset
                                                                  : corpus->filter.split->dataset];
        }
        TELLER_RETURN_IF_ERROR(AddRequestSteps(trace, source, keys, corpus));
      }
      records += corpus->infos.size() - before;
    }
    if (sources.size() > 1) {
      progress.Note(fmt::format("teller: tpe: [{}/{}] {}: {} step records", done, sources.size(),
                                source.name, records));
    }
  }
  progress.Finish("tpe: inputs");
  return base::OkStatus();
}

base::Status CheckNotEmpty(const Corpus& corpus, Unit unit, const std::vector<Source>& sources) {
  if (!corpus.serializations.empty()) return base::OkStatus();
  std::string what =
      sources.size() == 1 ? sources[0].path : fmt::format("{} inputs", sources.size());
  std::string selection;
  if (corpus.filter.split) selection += " in split " + corpus.filter.split->Text();
  if (!corpus.filter.request.empty()) selection += " of request " + corpus.filter.request;
  if (corpus.filter.step >= 0) selection += fmt::format(" at step {}", corpus.filter.step);
  if (corpus.filter.rank >= 0) selection += fmt::format(" on rank {}", corpus.filter.rank);
  if (unit == Unit::kRequestStep && selection.empty()) {
    return base::NotFound(
        "no request steps in {}: its steps name no requests (use --unit "
        "engine-step for traces without request ids)",
        what);
  }
  return base::NotFound("no {}s{} in {}", UnitName(unit), selection, what);
}

std::string Describe(const std::vector<std::string>& inputs, Unit unit,
                     const std::optional<SplitSpec>& split) {
  std::string text = fmt::format("{} ({}", fmt::join(inputs, " "), UnitName(unit));
  if (split) text += ", split " + split->Text();
  return text + ")";
}

// "preset paper, seed 20260101" from each dataset's manifest.json, else the input.
std::string DescribeDatasets(const std::vector<std::string>& inputs) {
  std::vector<std::string> parts;
  for (const std::string& input : inputs) {
    auto manifest = wire::ReadManifest(input);
    if (manifest.ok() && manifest->preset && manifest->seed) {
      parts.push_back(
          fmt::format("the `{}` dataset (seed {})", *manifest->preset, *manifest->seed));
    } else {
      parts.push_back(input);
    }
  }
  return fmt::format("{}", fmt::join(parts, " + "));
}

std::string VocabularySummary(const tpe::TpeVocabulary& vocab) {
  return fmt::format("{} tokens ({} base symbols, {} merges)", vocab.size(), vocab.base_size(),
                     vocab.merges().size());
}

double Reduction(const tpe::CompressionStats& stats) {
  return stats.nodes ? 100.0 * (1.0 - double(stats.encoded_tokens) / stats.nodes) : 0;
}

double BaseTokensPerStep(const tpe::CompressionStats& stats) {
  return stats.steps ? double(stats.base_tokens) / stats.steps : 0;
}

Json StatsJson(const tpe::TpeVocabulary& vocab, const tpe::CompressionStats& stats) {
  return Json{{"vocab_size", vocab.config().vocab_size},
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

constexpr const char* kMarkdownHeader =
    "| Vocab size | Merges | Avg. events/step before TPE | Avg. events/step after TPE | "
    "Compression× | Reduction |\n| --- | --- | --- | --- | --- | --- |\n";

std::string MarkdownRow(const tpe::TpeVocabulary& vocab, const tpe::CompressionStats& stats) {
  return fmt::format("| {} | {} | {:.2f} | {:.2f} | {:.2f} | {:.2f}% |\n",
                     vocab.config().vocab_size, vocab.merges().size(), stats.NodesPerStep(),
                     stats.TokensPerStep(), stats.NodeRatio(), Reduction(stats));
}

std::string StatsText(const std::string& path, const tpe::TpeVocabulary& vocab,
                      const tpe::CompressionStats& stats) {
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

base::StatusOr<tpe::TpeVocabulary> LoadVocabulary(const std::string& path) {
  auto vocab = tpe::TpeVocabulary::Load(path);
  if (!vocab.ok()) return vocab.status().WithContext("--vocab");
  return vocab;
}

base::StatusOr<Unit> ParseUnit(const std::string& text) {
  if (text == "request-step") return Unit::kRequestStep;
  if (text == "engine-step") return Unit::kEngineStep;
  return base::InvalidArgument("--unit '{}': expected request-step or engine-step", text);
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

constexpr const char* kInputHelp =
    "bundle directories, store files, raw traces (a directory of per-rank files is one input), "
    "or dataset folders from `teller synth dataset` (every bundle in them); each input is "
    "opened on its own";
constexpr const char* kUnitHelp =
    "what one step record is: request-step = the paper's step record C_q(s), request q's "
    "projection of engine step s over every rank that served it (needs request ids); "
    "engine-step = one engine step's whole call tree on one rank";

}  // namespace

TpeCommand::TpeCommand(CLI::App* app) {
  tpe_ = app->add_subcommand(
      "tpe",
      "Trace Pair Encoding (paper 3.5): learn a vocabulary of merged call-chain tokens, "
      "encode steps with it, measure compression");
  tpe_->require_subcommand(1);

  train_ = tpe_->add_subcommand(
      "train",
      "Learn a TPE vocabulary from the step serializations of the inputs and save it "
      "as JSON");
  train_->add_option("inputs", inputs_, kInputHelp);
  train_->add_option("-o,--output", output_, "vocabulary JSON to write ('-' for stdout)")
      ->required();
  train_
      ->add_option("--vocab-size", vocab_size_,
                   "target size: base symbols + merges; training stops earlier when no pair "
                   "occurs --min-pair-count times")
      ->capture_default_str();
  train_
      ->add_option("--min-pair-count", min_pair_count_,
                   "a pair seen fewer times (weighted by chain count) is never merged")
      ->capture_default_str();
  train_
      ->add_option("--merge-siblings", merge_siblings_,
                   "on: merges may also join a leaf with its next sibling (the paper's adjacent "
                   "merges, kept exactly decodable); off: a node's [layer, name] pair and first "
                   "children only (version-1 vocabularies)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  train_->add_option("--split", split_,
                     "[DATASET_DIR:]SPLIT:PART, e.g. request_disjoint:train: only the requests of "
                     "that part of the dataset's splits.json (request-step only); a DATASET_DIR "
                     "here is the input when none is given");
  train_->add_option("--unit", unit_, kUnitHelp)->capture_default_str();
  train_->add_flag("-q,--quiet", quiet_, "no progress on stderr");

  encode_ = tpe_->add_subcommand(
      "encode",
      "Encode steps with a vocabulary: per token input_id, parent_idx, duration_ns, "
      "depth and the token's base symbols");
  encode_->add_option("inputs", inputs_, kInputHelp)->required();
  encode_->add_option("--vocab", vocab_path_, "vocabulary JSON from `teller tpe train`")
      ->required();
  encode_->add_option("--step", step_,
                      "only this step (engine-step: the step number; request-step: the global "
                      "step shared by the ranks); default all");
  encode_->add_option("--rank", rank_, "only this rank (request-step: that rank's projection)");
  encode_->add_option("--request", request_,
                      "only this request id ('bundle/request' in a dataset); engine-step: the "
                      "steps carrying it");
  encode_
      ->add_option("--format", format_,
                   "text: a header line per step, then a tab-separated row per token; json: one "
                   "JSON object per step")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  encode_->add_option("--max-tokens", max_tokens_, "tokens printed per step, 0 for all")
      ->capture_default_str();
  encode_->add_option("--split", split_, "[DATASET_DIR:]SPLIT:PART: only requests of that part");
  encode_->add_option("--unit", unit_, kUnitHelp)->capture_default_str();
  encode_->add_flag("-q,--quiet", quiet_, "no progress on stderr");

  stats_ = tpe_->add_subcommand(
      "stats",
      "Compression of the inputs' steps under one or more vocabularies: events per "
      "step before and after, ratio, reduction, unknown symbols");
  stats_->add_option("inputs", inputs_, kInputHelp);
  stats_
      ->add_option("--vocab", vocab_paths_,
                   "vocabulary JSON from `teller tpe train`; repeat to compare several")
      ->required();
  stats_->add_option("--split", split_,
                     "[DATASET_DIR:]SPLIT:PART, e.g. request_disjoint:test: only the requests of "
                     "that part (request-step only)");
  stats_
      ->add_option("--format", format_,
                   "text, markdown (a Table-6 row per vocabulary) or json (an object per "
                   "vocabulary, one a line)")
      ->check(CLI::IsMember({"text", "markdown", "json"}))
      ->capture_default_str();
  stats_->add_option("--unit", unit_, kUnitHelp)->capture_default_str();
  stats_->add_flag("-q,--quiet", quiet_, "no progress on stderr");

  table_ = tpe_->add_subcommand(
      "table",
      "Table 6 (paper 5.2): train a vocabulary per size on one split of a dataset, "
      "measure on another; prints a markdown table");
  table_->add_option("inputs", inputs_, "dataset folders from `teller synth dataset`")->required();
  table_->add_option("--train", train_split_, "SPLIT:PART to train on")->capture_default_str();
  table_->add_option("--test", test_split_, "SPLIT:PART to measure on (never used for training)")
      ->capture_default_str();
  table_->add_option("--vocab-sizes", vocab_sizes_, "vocabulary sizes, one row each")
      ->delimiter(',')
      ->capture_default_str();
  table_->add_option("--min-pair-count", min_pair_count_, "as in `teller tpe train`")
      ->capture_default_str();
  table_->add_option("--merge-siblings", merge_siblings_, "on|off, as in `teller tpe train`")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  table_->add_option("--json", json_output_, "also write the numbers as JSON to this file");
  table_->add_option("--unit", unit_, kUnitHelp)->capture_default_str();
  table_->add_flag("-q,--quiet", quiet_, "no progress on stderr");
}

bool TpeCommand::selected() const { return tpe_ != nullptr && tpe_->parsed(); }

int TpeCommand::Run() const {
  if (train_->parsed()) return RunTrain();
  if (encode_->parsed()) return RunEncode();
  if (stats_->parsed()) return RunStats();
  if (table_->parsed()) return RunTable();
  return kExitUsage;
}

int TpeCommand::RunTrain() const {
  auto unit = ParseUnit(unit_);
  if (!unit.ok()) return Usage(unit.status().message());
  Corpus corpus;
  std::vector<std::string> inputs = inputs_;
  if (!split_.empty()) {
    auto split = ParseSplit(split_);
    if (!split.ok()) return Usage(split.status().message());
    if (*unit != Unit::kRequestStep) {
      return Usage(
          "--split needs --unit request-step (an engine step is shared by requests of "
          "different splits)");
    }
    if (inputs.empty() && !split->dataset.empty()) inputs.push_back(split->dataset);
    corpus.filter.split = *split;
  }
  if (inputs.empty())
    return Usage("tpe train: no input (give INPUT... or --split DATASET_DIR:...)");
  auto sources = ExpandInputs(inputs);
  if (!sources.ok()) return Fail(sources.status());
  base::Status status = LoadCorpora(*sources, *unit, {&corpus}, quiet_);
  if (status.ok()) status = CheckNotEmpty(corpus, *unit, *sources);
  if (!status.ok()) return Fail(status);

  tpe::TpeTrainConfig config;
  config.vocab_size = vocab_size_;
  config.min_pair_count = min_pair_count_;
  config.merge_siblings = merge_siblings_ == "on";
  config.corpus = Describe(inputs, *unit, corpus.filter.split);
  const auto start = std::chrono::steady_clock::now();
  auto vocab = tpe::TpeVocabulary::Train(corpus.serializations, corpus.symbols, config);
  if (!vocab.ok()) return Fail(vocab.status());
  const double seconds = SecondsSince(start);
  tpe::TpeEncoder encoder(*vocab, corpus.symbols);
  auto stats = encoder.Measure(corpus.serializations);
  if (!stats.ok()) return Fail(stats.status());

  const bool to_stdout = output_ == "-";
  if (to_stdout) {
    Print(vocab->ToJson() + "\n");
  } else {
    status = vocab->Save(output_);
    if (!status.ok()) return Fail(status);
  }
  std::string stop;
  if (vocab->size() < vocab_size_) {
    stop = fmt::format("; stopped below --vocab-size {}: no pair left that occurs {} times or more",
                       vocab_size_, min_pair_count_);
  }
  if (!quiet_) {
    std::fprintf(stderr, "teller: trained in %.2f s (%zu %ss, %lld base tokens)\n", seconds,
                 corpus.serializations.size(), std::string(UnitName(*unit)).c_str(),
                 static_cast<long long>(vocab->corpus_tokens()));
  }
  std::string summary = fmt::format(
      "wrote {}: {} from {} {}s; in-sample {:.2f} -> {:.2f} events/step ({:.2f}x){}\n",
      to_stdout ? std::string("stdout") : output_, VocabularySummary(*vocab), stats->steps,
      UnitName(*unit), stats->NodesPerStep(), stats->TokensPerStep(), stats->NodeRatio(), stop);
  if (to_stdout) {
    if (!quiet_) std::fprintf(stderr, "teller: %s", summary.c_str());
  } else {
    Print(summary);
  }
  return kExitOk;
}

int TpeCommand::RunEncode() const {
  auto unit = ParseUnit(unit_);
  if (!unit.ok()) return Usage(unit.status().message());
  auto vocab = LoadVocabulary(vocab_path_);
  if (!vocab.ok()) return Fail(vocab.status());
  Corpus corpus;
  corpus.filter.step = step_;
  corpus.filter.rank = rank_;
  corpus.filter.request = request_;
  if (!split_.empty()) {
    auto split = ParseSplit(split_);
    if (!split.ok()) return Usage(split.status().message());
    if (*unit != Unit::kRequestStep) return Usage("--split needs --unit request-step");
    corpus.filter.split = *split;
  }
  auto sources = ExpandInputs(inputs_);
  if (!sources.ok()) return Fail(sources.status());
  base::Status status = LoadCorpora(*sources, *unit, {&corpus}, quiet_);
  if (status.ok()) status = CheckNotEmpty(corpus, *unit, *sources);
  if (!status.ok()) return Fail(status);

  tpe::TpeEncoder encoder(*vocab, corpus.symbols);
  const bool json = format_ == "json";
  int64_t unknown = 0;
  for (size_t r = 0; r < corpus.serializations.size(); ++r) {
    const tpe::Serialization& s = corpus.serializations[r];
    const RecordInfo& info = corpus.infos[r];
    auto encoded = encoder.Encode(s);
    if (!encoded.ok()) return Fail(encoded.status().WithContext(Label(info)));
    const size_t shown =
        max_tokens_ == 0 ? encoded->size() : std::min(max_tokens_, encoded->size());
    for (size_t j = 0; j < encoded->size(); ++j)
      unknown += encoded->input_ids[j] == tpe::kUnknownSymbol;
    if (json) {
      Json line{{"source", info.source}, {"unit", UnitName(*unit)}};
      if (!info.request.empty()) line["request"] = info.request;
      line["step"] = info.step;
      line["ranks"] = info.ranks;
      line["nodes"] = s.node_count();
      line["base_tokens"] = s.size();
      line["tokens"] = encoded->size();
      auto head = [shown](const auto& column) {
        return Json(std::vector(column.begin(), column.begin() + static_cast<long>(shown)));
      };
      line["input_ids"] = head(encoded->input_ids);
      line["parent_idx"] = head(encoded->parent_idx);
      line["duration_ns"] = head(encoded->duration_ns);
      line["depth"] = head(encoded->depth);
      Json text = Json::array();
      for (size_t j = 0; j < shown; ++j) text.push_back(vocab->TokenText(encoded->input_ids[j]));
      line["text"] = std::move(text);
      Print(line.dump() + "\n");
      continue;
    }
    std::string out = fmt::format(
        "{}: {} nodes, {} base tokens -> {} TPE tokens{}\n", Label(info), s.node_count(), s.size(),
        encoded->size(),
        shown < encoded->size() ? fmt::format(" (first {} shown)", shown) : std::string());
    out += "index\tinput_id\tparent_idx\tduration_ns\tdepth\ttoken\n";
    for (size_t j = 0; j < shown; ++j) {
      out += fmt::format("{}\t{}\t{}\t{}\t{}\t{}\n", j, encoded->input_ids[j],
                         encoded->parent_idx[j], encoded->duration_ns[j], encoded->depth[j],
                         vocab->TokenText(encoded->input_ids[j]));
    }
    Print(out);
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
  auto unit = ParseUnit(unit_);
  if (!unit.ok()) return Usage(unit.status().message());
  std::vector<tpe::TpeVocabulary> vocabs;
  for (const std::string& path : vocab_paths_) {
    auto vocab = LoadVocabulary(path);
    if (!vocab.ok()) return Fail(vocab.status());
    vocabs.push_back(std::move(*vocab));
  }
  Corpus corpus;
  std::vector<std::string> inputs = inputs_;
  if (!split_.empty()) {
    auto split = ParseSplit(split_);
    if (!split.ok()) return Usage(split.status().message());
    if (*unit != Unit::kRequestStep) return Usage("--split needs --unit request-step");
    if (inputs.empty() && !split->dataset.empty()) inputs.push_back(split->dataset);
    corpus.filter.split = *split;
  }
  if (inputs.empty())
    return Usage("tpe stats: no input (give INPUT... or --split DATASET_DIR:...)");
  auto sources = ExpandInputs(inputs);
  if (!sources.ok()) return Fail(sources.status());
  base::Status status = LoadCorpora(*sources, *unit, {&corpus}, quiet_);
  if (status.ok()) status = CheckNotEmpty(corpus, *unit, *sources);
  if (!status.ok()) return Fail(status);

  std::string out;
  if (format_ == "markdown") out += kMarkdownHeader;
  if (format_ == "text") {
    out += fmt::format("input {}\n", Describe(inputs, *unit, corpus.filter.split));
  }
  for (size_t v = 0; v < vocabs.size(); ++v) {
    tpe::TpeEncoder encoder(vocabs[v], corpus.symbols);
    auto stats = encoder.Measure(corpus.serializations);
    if (!stats.ok()) return Fail(stats.status());
    if (format_ == "markdown") {
      out += MarkdownRow(vocabs[v], *stats);
    } else if (format_ == "json") {
      Json line = StatsJson(vocabs[v], *stats);
      line["vocabulary"] = vocab_paths_[v];
      line["unit"] = UnitName(*unit);
      out += line.dump() + "\n";
    } else {
      out += StatsText(vocab_paths_[v], vocabs[v], *stats);
    }
  }
  Print(out);
  return kExitOk;
}

int TpeCommand::RunTable() const {
  auto unit = ParseUnit(unit_);
  if (!unit.ok()) return Usage(unit.status().message());
  if (*unit != Unit::kRequestStep) return Usage("tpe table needs --unit request-step (splits)");
  Corpus train;
  Corpus test;
  for (auto [corpus, text] : {std::pair{&train, &train_split_}, std::pair{&test, &test_split_}}) {
    auto split = ParseSplit(*text);
    if (!split.ok()) return Usage(split.status().message());
    corpus->filter.split = *split;
  }
  auto sources = ExpandInputs(inputs_);
  if (!sources.ok()) return Fail(sources.status());
  base::Status status = LoadCorpora(*sources, *unit, {&train, &test}, quiet_);
  if (status.ok()) status = CheckNotEmpty(train, *unit, *sources);
  if (status.ok()) status = CheckNotEmpty(test, *unit, *sources);
  if (!status.ok()) return Fail(status);

  std::string rows;
  Json json_rows = Json::array();
  size_t base_symbols = 0;
  int64_t unknown = 0;
  for (size_t size : vocab_sizes_) {
    tpe::TpeTrainConfig config;
    config.vocab_size = size;
    config.min_pair_count = min_pair_count_;
    config.merge_siblings = merge_siblings_ == "on";
    config.corpus = Describe(inputs_, *unit, train.filter.split);
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
    rows += MarkdownRow(*vocab, *stats);
    json_rows.push_back(StatsJson(*vocab, *stats));
  }
  const std::string train_text = train.filter.split->Text();
  const std::string test_text = test.filter.split->Text();
  std::string out = fmt::format(
      "Trained on `{}` ({} request-steps), measured on `{}` ({} request-steps) of {}; the test "
      "split is never used for training or tuning. A step is the paper's step record: request "
      "q's projection C_q(s) of engine step s over the ranks serving q. Events before = "
      "call-chain nodes per step; after = TPE tokens per step; compression = before / after; "
      "reduction = 1 - after / before. {} base symbols in the training vocabulary; {} base "
      "tokens of the test split carry names unseen in training (encoded as [UNK]). Merge rule: "
      "{}.\n\n",
      train_text, train.serializations.size(), test_text, test.serializations.size(),
      DescribeDatasets(inputs_), base_symbols, unknown,
      merge_siblings_ == "on" ? "pairs, first children and next siblings (--merge-siblings on)"
                              : "pairs and first children only (--merge-siblings off)");
  out += kMarkdownHeader;
  out += rows;
  Print(out);
  if (!json_output_.empty()) {
    Json doc{{"unit", UnitName(*unit)},
             {"dataset", DescribeDatasets(inputs_)},
             {"train_split", train_text},
             {"test_split", test_text},
             {"train_steps", train.serializations.size()},
             {"test_steps", test.serializations.size()},
             {"train_events", train.nodes()},
             {"test_events", test.nodes()},
             {"min_pair_count", min_pair_count_},
             {"merge_siblings", merge_siblings_ == "on"},
             {"rows", json_rows}};
    status = base::WriteFileAtomic(json_output_, doc.dump(1) + "\n");
    if (!status.ok()) return Fail(status);
  }
  return kExitOk;
}

}  // namespace teller::cli
